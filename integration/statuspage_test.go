package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
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
// Then, under load, Chromium renders the leader's page, the name server's cluster view and a
// proxy's page (statuspage_load_test.go); the first two show the group, the leader's address
// marked as leader, the term, the topic and the group's lag.
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

	// The pages themselves are rendered under load (statuspage_load_test.go), with the checks
	// of the identity, the Raft row, the topic and the group's lag there.
	statusPagesUnderLoad(t, chromium, loadSetup{ns: ns, nsHTTP: nsHTTP, g: g, c: c, ports: ports, topic: topic, behindGroup: group, behind: behind, began: began})
}
