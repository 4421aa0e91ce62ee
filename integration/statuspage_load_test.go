package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
)

// The three status pages under load: a 5.x producer sends through a proxy while a push consumer
// group keeps up and another group (stopped) falls further behind. Headless Chromium renders the
// leader's page, the name server's page and the proxy's page, takes a screenshot of each, and
// the test asserts on the DOM that the rates, sizes, each follower's match index and lag, and
// the stopped group's lag in time are shown with plausible values, and that no page logged to
// the console (a script error, a failed request or a CSP violation all would).

// loadSetup is what TestStatusPages hands over: the running cluster and what it created.
type loadSetup struct {
	ns          *namesrv
	nsHTTP      int
	g           *raftGroup
	c           *cluster
	ports       map[string]int // dLegerSelfId → httpPort
	topic       string
	behindGroup string // consumed once, then stopped: its lag grows with the load
	behind      int64  // its lag before the load
	began       time.Time
}

// renderShot loads url in headless Chromium like renderPage, also saving a screenshot to png,
// and returns the DOM and the console lines Chromium logged.
func renderShot(chromium, url, png, tmp string) (string, []string, error) {
	// Bounded, but generously: niced, the browsers starve on a busy machine (a load average of
	// 47 on two cores took 63 s for the three).
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nice", "-n", "19", chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--enable-logging=stderr", "--v=0", "--window-size=1400,1800", "--screenshot="+png,
		"--user-data-dir="+filepath.Join(tmp, "profile"), "--virtual-time-budget=4000", "--dump-dom", url)
	cmd.Env = append(os.Environ(), "HOME="+tmp)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", nil, fmt.Errorf("chromium %s: %w\n%s", url, err, tail2k(stderr.String()))
	}
	var console []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, ":CONSOLE") {
			console = append(console, l)
		}
	}
	if fi, err := os.Stat(png); err != nil || fi.Size() < 10_000 {
		return "", nil, fmt.Errorf("screenshot of %s: %v (%v)", url, err, fi)
	}
	return string(out), console, nil
}

// screenshotDir is where the screenshots go: $RR_SCREENSHOT_DIR when set (kept), else a
// temporary directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("RR_SCREENSHOT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// loadStatus is the part of a broker's /status the load phase checks.
type loadStatus struct {
	RaftStatus struct {
		Term uint64 `json:"term"`
	} `json:"raftStatus"`
	Rates struct {
		InPerSec  float64 `json:"inPerSec"`
		OutPerSec float64 `json:"outPerSec"`
	} `json:"rates"`
	Followers []struct {
		ID         string `json:"id"`
		MatchIndex uint64 `json:"matchIndex"`
		Lag        uint64 `json:"lag"`
	} `json:"followers"`
	ConsumerGroups []struct {
		Group         string  `json:"group"`
		Topic         string  `json:"topic"`
		Lag           int64   `json:"lag"`
		LagTimeMs     int64   `json:"lagTimeMs"`
		Online        int     `json:"online"`
		ConsumePerSec float64 `json:"consumePerSec"`
	} `json:"consumerGroups"`
}

func statusPagesUnderLoad(t *testing.T, chromium string, s loadSetup) {
	t.Logf("load phase starts %v into the test", time.Since(s.began).Round(time.Millisecond))
	mport := freePort(t)
	px := startProxyWith(t, s.ns, "--metricsExporterType=PROM", "--metricsPromExporterPort="+strconv.Itoa(mport), "--metricsPromExporterHost=127.0.0.1")
	live := uniq("GStatusLive")
	lc := startPushConsumer(t, s.c, live, s.topic, all)
	v5 := newV5Producer(t, px.addr, s.topic)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	sent := make(chan int, 1)
	go func() { // about 50 messages a second through the proxy until the test ends
		n := 0
		defer func() { sent <- n }()
		for ctx.Err() == nil {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if _, err := v5.Send(sctx, &rmq.Message{Topic: s.topic, Body: []byte("load")}); err == nil {
				n++
			}
			cancel()
			time.Sleep(20 * time.Millisecond)
		}
	}()

	leaderStatus := func() (*broker, loadStatus, error) {
		leader := s.g.waitMaster(t, 30*time.Second, nil)
		var st loadStatus
		err := getJSON(fmt.Sprintf("http://127.0.0.1:%d/status", s.ports[leader.props["dLegerSelfId"]]), &st)
		return leader, st, err
	}
	loadFrom := time.Now()
	// The rates need two samples (2 s apart) with traffic, the time lag a few seconds of age.
	eventually(t, 60*time.Second, "rates, followers and consumer figures in the leader's /status", func() error {
		_, st, err := leaderStatus()
		if err != nil {
			return err
		}
		if st.Rates.InPerSec <= 0 || st.Rates.OutPerSec <= 0 {
			return fmt.Errorf("rates in %.1f out %.1f", st.Rates.InPerSec, st.Rates.OutPerSec)
		}
		if len(st.Followers) != 2 || st.Followers[0].MatchIndex == 0 || st.Followers[1].MatchIndex == 0 {
			return fmt.Errorf("followers %+v", st.Followers)
		}
		var behind, keeping bool
		for _, cg := range st.ConsumerGroups {
			behind = behind || (cg.Group == s.behindGroup && cg.Topic == s.topic && cg.LagTimeMs >= 2000)
			keeping = keeping || (cg.Group == live && cg.Topic == s.topic && cg.Online == 1)
		}
		if !behind || !keeping {
			return fmt.Errorf("consumer groups %+v", st.ConsumerGroups)
		}
		return nil
	})
	t.Logf("figures under load after %v", time.Since(loadFrom).Round(time.Millisecond))
	// Two views of the name server a second apart, so the page's first view has rates.
	var v struct{}
	for range 2 {
		if err := getJSON(fmt.Sprintf("http://127.0.0.1:%d/cluster", s.nsHTTP), &v); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
	}

	dir := screenshotDir(t)
	// Chromium's start-up competes for the CPU with the three brokers (it runs niced); should
	// the group elect a new leader meanwhile, the pages are rendered again for the new one.
	var problems []string
	var doms map[string]string
	var pages []struct{ name, url string }
	for attempt := 1; ; attempt++ {
		leader, st, err := leaderStatus()
		if err != nil {
			t.Fatal(err)
		}
		pages, doms = s.renderAll(t, chromium, leader, mport, dir)
		problems = s.checkPages(doms, leader, st, live)
		_, now, err := leaderStatus()
		if len(problems) == 0 || attempt == 3 || (err == nil && now.RaftStatus.Term == st.RaftStatus.Term) {
			break
		}
		t.Logf("attempt %d: the leader changed while rendering (term %d, now %d %v): %s", attempt, st.RaftStatus.Term,
			now.RaftStatus.Term, err, strings.Join(problems, "; "))
	}
	stop()
	t.Logf("load: %d messages sent through the proxy, %d consumed by %s", <-sent, lc.got.count(), live)
	if len(problems) > 0 {
		for _, p := range pages {
			t.Logf("%s page DOM:\n%s", p.name, doms[p.name])
		}
		t.Fatal(strings.Join(problems, "\n"))
	}
}

// renderAll renders the leader's, the name server's and the proxy's pages at once (each browser
// mostly waits for its virtual time) with a screenshot each; it returns the pages and their DOMs
// and fails the test when Chromium does.
func (s loadSetup) renderAll(t *testing.T, chromium string, leader *broker, mport int, dir string) ([]struct{ name, url string }, map[string]string) {
	leaderHTTP := fmt.Sprintf("127.0.0.1:%d", s.ports[leader.props["dLegerSelfId"]])
	pages := []struct{ name, url string }{
		{"broker", "http://" + leaderHTTP + "/"},
		{"namesrv", fmt.Sprintf("http://127.0.0.1:%d/", s.nsHTTP)},
		{"proxy", fmt.Sprintf("http://127.0.0.1:%d/", mport)},
	}
	// The three browsers run at once: each mostly waits for its virtual time.
	type shot struct {
		dom     string
		console []string
		err     error
	}
	shots := make([]shot, len(pages))
	began := time.Now()
	var wg sync.WaitGroup
	for i, p := range pages {
		tmp := t.TempDir()
		wg.Go(func() {
			png := filepath.Join(dir, "statuspage-"+p.name+".png")
			shots[i].dom, shots[i].console, shots[i].err = renderShot(chromium, p.url, png, tmp)
		})
	}
	wg.Wait()
	t.Logf("three pages rendered in %v; screenshots in %s", time.Since(began).Round(time.Millisecond), dir)
	doms := map[string]string{}
	for i, p := range pages {
		if shots[i].err != nil {
			t.Fatal(shots[i].err)
		}
		doms[p.name] = shots[i].dom
		if len(shots[i].console) > 0 {
			doms[p.name+" console"] = strings.Join(shots[i].console, "\n")
		}
	}

	return pages, doms
}

// checkPages returns what the rendered pages lack or show implausibly.
func (s loadSetup) checkPages(doms map[string]string, leader *broker, st loadStatus, live string) []string {
	var problems []string
	for _, name := range []string{"broker", "namesrv", "proxy"} {
		if c := doms[name+" console"]; c != "" {
			problems = append(problems, name+" page console: "+c)
		}
	}
	leaderHTTP := fmt.Sprintf("127.0.0.1:%d", s.ports[leader.props["dLegerSelfId"]])
	term, group, topic, name := strconv.FormatUint(st.RaftStatus.Term, 10), regexp.QuoteMeta(s.behindGroup), regexp.QuoteMeta(s.topic), regexp.QuoteMeta(s.g.name)
	for what, re := range map[string]string{
		"broker: identity with the group name and address": `<td>` + name + `</td><td>0</td><td>[A-Z_]+</td><td>` + regexp.QuoteMeta(leader.addr) + `</td>`,
		"broker: raft row marked leader with the term":     `<tr class="leader"><td>` + name + `</td><td>n\d</td><td>leader</td><td class="num">` + term + `</td>`,
		"broker: topic":  `<td>` + topic + `</td>`,
		"namesrv: group": `<b>` + name + `</b> — DLedger group, term ` + term + `, leader n\d at ` + regexp.QuoteMeta(leader.addr),
		"namesrv: leader's row marked as leader, linked to its page": `<tr class="leader"><td><a href="http://` + regexp.QuoteMeta(leaderHTTP) + `/">` +
			regexp.QuoteMeta(leader.addr) + `</a></td><td class="num">0</td><td>MASTER</td><td>n\d</td><td>leader</td><td class="num">` + term + `</td>`,
		"namesrv: topic":                  `<td>` + topic + `</td>`,
		"namesrv: consumer group and lag": `<td>` + group + `</td><td>` + topic + `</td><td>` + name + `</td><td class="num">\d+</td>`,
	} {
		page, _, _ := strings.Cut(what, ":")
		if !regexp.MustCompile(re).MatchString(doms[page]) {
			problems = append(problems, fmt.Sprintf("%s page lacks the %s (/%s/)", page, what, re))
		}
	}
	for _, b := range s.g.nodes {
		if b != leader && !strings.Contains(doms["namesrv"], `">`+b.addr+`</a></td>`) {
			problems = append(problems, "name server page lacks follower "+b.addr+" linked to its page")
		}
	}
	rate := func(page, class string) {
		m := regexp.MustCompile(`<span class="` + class + `">(?:in|out) ([0-9.]+)/s</span>`).FindStringSubmatch(doms[page])
		if m == nil {
			problems = append(problems, page+" page shows no "+class)
			return
		}
		if r, _ := strconv.ParseFloat(m[1], 64); r <= 0 || r > 100_000 {
			problems = append(problems, fmt.Sprintf("%s page %s is %v", page, class, r))
		}
	}
	for _, page := range []string{"broker", "namesrv", "proxy"} {
		rate(page, "rate-in")
		if !regexp.MustCompile(`<svg[^>]*class="spark"[^>]*>.*<polyline points="[0-9., ]+" class="in">`).MatchString(doms[page]) {
			problems = append(problems, page+" page has no sparkline")
		}
	}
	rate("broker", "rate-out")
	size := `[0-9.]+ (?:KiB|MiB|GiB)`
	if !regexp.MustCompile(`<th>CommitLog size</th>.*<td class="num">` + size + `</td>`).MatchString(doms["broker"]) {
		problems = append(problems, "broker page shows no commitlog size")
	}
	for _, f := range st.Followers {
		m := regexp.MustCompile(`<td>` + f.ID + `</td><td>[0-9.:]+</td><td class="num">(\d+)</td><td class="num">(\d+)</td>`).FindStringSubmatch(doms["broker"])
		if m == nil {
			problems = append(problems, "broker page lacks follower "+f.ID)
			continue
		}
		match, _ := strconv.ParseUint(m[1], 10, 64)
		lag, _ := strconv.ParseUint(m[2], 10, 64)
		if match == 0 || lag > 10_000 {
			problems = append(problems, fmt.Sprintf("follower %s: match index %d, lag %d", f.ID, match, lag))
		}
	}
	m := regexp.MustCompile(`<td>` + regexp.QuoteMeta(s.behindGroup) + `</td><td>` + regexp.QuoteMeta(s.topic) +
		`</td><td class="num">(\d+)</td><td class="num">([0-9.]+ s|\d+m \d+s)</td>`).FindStringSubmatch(doms["broker"])
	if m == nil {
		problems = append(problems, "broker page shows no lag in time for "+s.behindGroup)
	} else if lag, _ := strconv.ParseInt(m[1], 10, 64); lag < s.behind {
		problems = append(problems, fmt.Sprintf("%s lag %d messages on the page", s.behindGroup, lag))
	}
	if !regexp.MustCompile(`<td>` + regexp.QuoteMeta(live) + `</td><td>` + regexp.QuoteMeta(s.topic) + `</td>.*?<td class="num">1</td><td class="num">[0-9.]+/s</td>`).MatchString(doms["broker"]) {
		problems = append(problems, "broker page lacks the live group's online client and consume rate")
	}
	if !regexp.MustCompile(`<td class="num">` + size + `</td>`).MatchString(doms["namesrv"]) {
		problems = append(problems, "name server page shows no commitlog size")
	}
	if !strings.Contains(doms["proxy"], "<td>PRODUCER</td>") {
		problems = append(problems, "proxy page lacks the 5.x producer")
	}
	return problems
}
