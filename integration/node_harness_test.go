package integration

// The official RocketMQ 5 Node.js client (rocketmq-client-nodejs, pinned in node/package.json and
// node/package-lock.json) runs as child processes of the tests: node/client.js, one mode per
// process, prints one JSON event per line, which nodeRun collects. npm ci installs the client
// into node/node_modules once per test binary.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

var (
	nodeOnce sync.Once
	nodeDir  string
	nodeErr  error
)

// needNodeClient installs the pinned Node client (npm ci, bounded) the first time a test asks,
// and fails the test if node or npm are missing or the install fails.
func needNodeClient(t testing.TB) {
	t.Helper()
	nodeOnce.Do(func() { nodeDir, nodeErr = npmCI() })
	if nodeErr != nil {
		t.Fatal(nodeErr)
	}
}

func npmCI() (string, error) {
	dir, err := filepath.Abs("node")
	if err != nil {
		return "", err
	}
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			return "", fmt.Errorf("%s not found: the Node client tests need Node.js and npm (.ci/run installs them with apt-get): %w", bin, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("npm ci in %s (after %v): %w\n%s", dir, time.Since(start).Round(time.Second), err, out)
	}
	return dir, nil
}

// nodeEvent is one line client.js prints.
type nodeEvent struct {
	Event    string            `json:"event"`
	Body     string            `json:"body"`
	ID       string            `json:"id"`
	Tag      string            `json:"tag"`
	Keys     []string          `json:"keys"`
	Props    map[string]string `json:"props"`
	Attempt  int32             `json:"attempt"`
	Offset   int64             `json:"offset"`
	Queue    int32             `json:"queue"`
	Failed   bool              `json:"failed"`
	Corrupt  bool              `json:"corrupted"`
	Distinct int               `json:"distinct"`
	Pulled   int               `json:"pulled"`
	RPC      string            `json:"rpc"`
	Policy   string            `json:"policy"`
	When     string            `json:"when"`
	Code     int               `json:"code"`
	Message  string            `json:"message"`
	From     int64             `json:"from"`
	Next     int64             `json:"next"`
	Group    string            `json:"group"` // a FIFO message's message group
	TxID     string            `json:"txid"`
	Commit   bool              `json:"commit"`
	Checked  int               `json:"checked"`
	Unknown  int               `json:"unknown"`
}

// nodeRun is a running client.js.
type nodeRun struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	mu      sync.Mutex
	events  []nodeEvent
	exited  chan struct{}
	err     error
}

// startNode runs client.js in mode with args as --key=value flags; it stops by itself after
// timeout (passed on as --timeout), and is killed 30 s later if it has not.
func startNode(t testing.TB, mode string, timeout time.Duration, args map[string]string) *nodeRun {
	t.Helper()
	needNodeClient(t)
	argv := []string{"client.js", mode, "--timeout=" + strconv.FormatInt(timeout.Milliseconds(), 10)}
	for k, v := range args {
		argv = append(argv, "--"+k+"="+v)
	}
	home := t.TempDir() // the client library's default logger writes under $HOME/logs
	r := &nodeRun{name: "node " + mode, logPath: filepath.Join(home, "stderr.log"), exited: make(chan struct{})}
	logf, err := os.Create(r.logPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	r.cmd = exec.CommandContext(ctx, "node", argv...)
	r.cmd.Dir = nodeDir
	r.cmd.Env = append(os.Environ(), "HOME="+home)
	r.cmd.Stderr = logf
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", r.name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e nodeEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				e = nodeEvent{Event: "garbage", Message: sc.Text()}
			}
			r.mu.Lock()
			r.events = append(r.events, e)
			r.mu.Unlock()
		}
		r.err = r.cmd.Wait()
		cancel()
		logf.Close()
		close(r.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-r.exited:
		default:
			_ = r.cmd.Process.Kill() // only this test's own child
			<-r.exited
		}
	})
	return r
}

// snapshot is a copy of the events so far.
func (r *nodeRun) snapshot() []nodeEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]nodeEvent(nil), r.events...)
}

// waitFor waits until an event satisfies f, failing the test at timeout or if the process ends
// first.
func (r *nodeRun) waitFor(t testing.TB, timeout time.Duration, what string, f func(nodeEvent) bool) nodeEvent {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, e := range r.snapshot() {
			if f(e) {
				return e
			}
		}
		select {
		case <-r.exited:
			for _, e := range r.snapshot() {
				if f(e) {
					return e
				}
			}
			t.Fatalf("%s ended before %s: %v\n%s", r.name, what, r.err, r.tail())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %s within %v\n%s", r.name, what, timeout, r.tail())
		}
	}
}

// wait waits for the process to end by itself and returns its events; a failed run fails the
// test with the client's log.
func (r *nodeRun) wait(t testing.TB, timeout time.Duration) []nodeEvent {
	t.Helper()
	select {
	case <-r.exited:
	case <-time.After(timeout):
		t.Fatalf("%s still running after %v\n%s", r.name, timeout, r.tail())
	}
	ev := r.snapshot()
	for _, e := range ev {
		if e.Event == "error" || e.Event == "garbage" {
			t.Fatalf("%s: %s %s\n%s", r.name, e.Event, e.Message, r.tail())
		}
	}
	if r.err != nil {
		t.Fatalf("%s: %v\n%s", r.name, r.err, r.tail())
	}
	return ev
}

// tail is the end of the client's stderr log.
func (r *nodeRun) tail() string { return "--- " + r.name + " stderr (tail):\n" + tail(r.logPath, 6000) }

// received is the recv events, in order.
func receivedEvents(ev []nodeEvent) []nodeEvent {
	var out []nodeEvent
	for _, e := range ev {
		if e.Event == "recv" {
			out = append(out, e)
		}
	}
	return out
}
