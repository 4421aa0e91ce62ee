package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The status pages rendered in a real browser: headless Chromium loads the broker's and the
// name server's page, runs their scripts (which poll /status and /cluster) and dumps the DOM.

// findChromium returns the Chromium binary, or skips the test (fails it when
// RR_REQUIRE_BROWSER=1) when there is none.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "chromium"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	msg := "chromium not found (install it with: apt-get install -y chromium); the status page browser test needs it"
	if os.Getenv("RR_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg + " and RR_REQUIRE_BROWSER=1")
	}
	t.Skip(msg)
	return ""
}

// renderPage loads url in headless Chromium and returns the DOM after the page's scripts ran
// for 8 s of virtual time.
func renderPage(t *testing.T, chromium, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nice", "-n", "19", chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=8000", "--dump-dom", url)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", url, err, tail2k(stderr.String()))
	}
	return string(out)
}

func tail2k(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

// getJSON decodes the JSON at url into v.
func getJSON(url string, v any) error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// TestStatusPages: a name server and a three-node DLedger group, each with httpPort; messages
// sent with the official Go client, a consumer group that consumed them and then fell 7 behind.
// Chromium renders the leader's page and the name server's cluster view; both show the group,
// the leader's address marked as leader, the term, the topic and the group's lag. Then, under
// load, the three pages with a proxy (statuspage_load_test.go).
func TestStatusPages(t *testing.T) {
	t.Parallel()
	began := time.Now()
	chromium := findChromium(t)
	nsHTTP := freePort(t)
	ns := startNamesrv(t, "--httpPort="+strconv.Itoa(nsHTTP))
	ports := map[string]int{} // dLegerSelfId → httpPort
	g := startRaftGroup(t, ns, 3, func(b *broker) {
		port := freePort(t)
		ports[b.props["dLegerSelfId"]] = port
		b.props["httpPort"] = strconv.Itoa(port)
	})
	c := g.asCluster(g.waitMaster(t, 30*time.Second, nil))
	topic, group := uniq("StatusPage"), uniq("GStatusPage")
	const n, behind = 10, 7
	p := newProducer(t, c)
	sendSync(t, p, topic, "s", n, nil)
	pc := startPushConsumer(t, c, group, topic, all)
	eventually(t, 60*time.Second, "consumer receives all", func() error { return countErr("push consumer", pc.got.count(), n) })

	type status struct {
		RaftStatus struct {
			Term uint64 `json:"term"`
			Role string `json:"role"`
		} `json:"raftStatus"`
		ConsumerGroups []struct {
			Group string `json:"group"`
			Topic string `json:"topic"`
			Lag   int64  `json:"lag"`
		} `json:"consumerGroups"`
	}
	// lagOf reads the group's lag and the term from the registered master's /status.
	lagOf := func(want int64) (uint64, error) {
		leader := g.waitMaster(t, 30*time.Second, nil)
		var s status
		if err := getJSON(fmt.Sprintf("http://127.0.0.1:%d/status", ports[leader.props["dLegerSelfId"]]), &s); err != nil {
			return 0, err
		}
		if s.RaftStatus.Role != "leader" {
			return 0, fmt.Errorf("the registered master reports raft role %q", s.RaftStatus.Role)
		}
		for _, cg := range s.ConsumerGroups {
			if cg.Group == group && cg.Topic == topic {
				if cg.Lag != want {
					return 0, fmt.Errorf("/status lag of %s is %d, want %d", group, cg.Lag, want)
				}
				return s.RaftStatus.Term, nil
			}
		}
		return 0, fmt.Errorf("/status has no consumer group %s on %s: %+v", group, topic, s.ConsumerGroups)
	}
	// The Go client commits offsets every 5 s, and at shutdown.
	eventually(t, 30*time.Second, "offsets committed", func() error { _, err := lagOf(0); return err })
	pc.shutdown()
	sendSync(t, p, topic, "late", behind, nil)
	eventually(t, 30*time.Second, "lag in /status", func() error { _, err := lagOf(behind); return err })

	// Chromium's start-up competes for the CPU with the three brokers (it runs niced); should
	// the group elect a new leader meanwhile, the page is rendered again for the new one.
	check := func(what, dom string, res map[string]string) []string {
		var missing []string
		for name, re := range res {
			if !regexp.MustCompile(re).MatchString(dom) {
				missing = append(missing, fmt.Sprintf("%s page lacks the %s (/%s/)", what, name, re))
			}
		}
		return missing
	}
	for attempt := 1; ; attempt++ {
		leader := g.waitMaster(t, 30*time.Second, nil)
		leaderURL := fmt.Sprintf("http://127.0.0.1:%d", ports[leader.props["dLegerSelfId"]])
		term, err := lagOf(behind)
		if err != nil {
			t.Fatal(err)
		}
		termRE, lagRE := strconv.FormatUint(term, 10), strconv.Itoa(behind)
		dom := renderPage(t, chromium, leaderURL+"/")
		missing := check("broker", dom, map[string]string{
			"identity with the group name and address": `<td>` + regexp.QuoteMeta(g.name) + `</td><td>0</td><td>[A-Z_]+</td><td>` + regexp.QuoteMeta(leader.addr) + `</td>`,
			"raft row marked leader with the term":     `<tr class="leader"><td>` + regexp.QuoteMeta(g.name) + `</td><td>n\d</td><td>leader</td><td class="num">` + termRE + `</td>`,
			"topic":                                    `<td>` + regexp.QuoteMeta(topic) + `</td>`,
			"consumer group and lag":                   `<td>` + regexp.QuoteMeta(group) + `</td><td>` + regexp.QuoteMeta(topic) + `</td><td class="num">` + lagRE + `</td>`,
		})
		nsDOM := renderPage(t, chromium, fmt.Sprintf("http://127.0.0.1:%d/", nsHTTP))
		missing = append(missing, check("name server", nsDOM, map[string]string{
			"group":                         `<b>` + regexp.QuoteMeta(g.name) + `</b> — DLedger group, term ` + termRE + `, leader n\d at ` + regexp.QuoteMeta(leader.addr),
			"leader's row marked as leader": `<tr class="leader"><td><a href="http://127\.0\.0\.1:\d+/">` + regexp.QuoteMeta(leader.addr) + `</a></td><td class="num">0</td><td>MASTER</td><td>n\d</td><td>leader</td><td class="num">` + termRE + `</td>`,
			"topic":                         `<td>` + regexp.QuoteMeta(topic) + `</td>`,
			"consumer group and lag":        `<td>` + regexp.QuoteMeta(group) + `</td><td>` + regexp.QuoteMeta(topic) + `</td><td>` + regexp.QuoteMeta(g.name) + `</td><td class="num">` + lagRE + `</td>`,
		})...)
		for _, b := range g.nodes {
			if b != leader && !strings.Contains(nsDOM, `">`+b.addr+`</a></td>`) { // linked to its page
				missing = append(missing, "name server page lacks follower "+b.addr)
			}
		}
		if len(missing) == 0 {
			break
		}
		now, err := lagOf(behind)
		if attempt < 3 && (err != nil || now != term) {
			t.Logf("attempt %d: the leader changed while rendering (term %d, now %d %v): %s", attempt, term, now, err, strings.Join(missing, "; "))
			continue
		}
		t.Fatalf("%s\nbroker page:\n%s\nname server page:\n%s", strings.Join(missing, "\n"), dom, nsDOM)
	}
	statusPagesUnderLoad(t, chromium, loadSetup{ns: ns, nsHTTP: nsHTTP, g: g, c: c, ports: ports, topic: topic, behindGroup: group, began: began})
}
