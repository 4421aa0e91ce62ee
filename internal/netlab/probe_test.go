package netlab

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// newLab fails the test (never skips) when the lab cannot be built, and always closes it.
func newLab(t *testing.T, n int) *Lab {
	t.Helper()
	if err := Available(); err != nil {
		t.Fatalf("netlab cannot run on this machine: %v", err)
	}
	start := time.Now()
	l, err := New(n)
	if err != nil {
		t.Fatalf("New(%d): %v", n, err)
	}
	t.Logf("lab %s (%s, %d hosts) ready in %v", l.Name(), l.Subnet(), n, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

// helperCmd returns a command that runs this test binary as a helper inside h.
func helperCmd(t *testing.T, h *Host, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	cmd := h.Command(exe, append([]string{"-test.run=^TestHelperProcess$", "--"}, args...)...)
	cmd.Env = helperEnviron()
	return cmd
}

// helperEnviron is the environment of a helper: ours, plus the mode switch, plus (under -race)
// no one-second sleep at exit, which the race runtime does by default.
func helperEnviron() []string {
	return append(os.Environ(), helperEnv+"=1", "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
}

// helperServer is a running "listen" helper.
type helperServer struct {
	cmd  *exec.Cmd
	pid  int // as the helper reported it
	addr string
}

// startServer starts a listen helper on h and waits (bounded) for it to be ready. The test's
// cleanup kills it.
func startServer(t *testing.T, h *Host) *helperServer {
	t.Helper()
	cmd := helperCmd(t, h, "listen", net.JoinHostPort(h.IP, "0"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start listen helper in %s: %v", h.Name, err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(10 * time.Second):
		t.Fatalf("listen helper in %s not ready after 10s; stderr: %s", h.Name, stderr.String())
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "ready" {
		t.Fatalf("listen helper in %s said %q; stderr: %s", h.Name, line, stderr.String())
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatalf("listen helper printed bad pid %q", f[1])
	}
	return &helperServer{cmd: cmd, pid: pid, addr: f[2]}
}

// helperDialFrom runs a dial helper on h against addr and returns what it printed; the run is
// bounded by a 10 s kill timer.
func helperDialFrom(t *testing.T, h *Host, addr string) (string, error) {
	t.Helper()
	cmd := helperCmd(t, h, "dial", addr)
	var out, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start dial helper in %s: %v", h.Name, err)
	}
	timer := time.AfterFunc(10*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	if err != nil {
		err = fmt.Errorf("%w: %s %s", err, strings.TrimSpace(out.String()), stderr.String())
	}
	return strings.TrimSpace(out.String()), err
}

// listenAll opens an in-process listener on every host and returns their addresses.
func listenAll(t *testing.T, hosts []*Host) []string {
	t.Helper()
	addrs := make([]string, len(hosts))
	for i, h := range hosts {
		ln, err := h.Listen("tcp", net.JoinHostPort(h.IP, "0"))
		if err != nil {
			t.Fatalf("Listen on %s: %v", h.Name, err)
		}
		t.Cleanup(func() { ln.Close() })
		addrs[i] = ln.Addr().String()
	}
	return addrs
}

// probeTimeout bounds each connect attempt; a cut link must make it expire.
const probeTimeout = time.Second

// connect reports how a TCP connect from h to addr ends: nil, or the error.
func connect(h *Host, addr string) error {
	c, err := h.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return err
	}
	return c.Close()
}

// expectReach fails the test unless h connects to addr (retrying briefly: Heal's effect on a
// connect already backing off is not instant).
func expectReach(t *testing.T, h *Host, addr string) {
	t.Helper()
	var err error
	for range 3 {
		if err = connect(h, addr); err == nil {
			return
		}
	}
	t.Errorf("%s cannot connect to %s: %v", h.Name, addr, err)
}

// expectSilentDrop fails the test unless a connect from h to addr times out: a refused or
// reset connection would mean the cut is not silent.
func expectSilentDrop(t *testing.T, h *Host, addr string) {
	t.Helper()
	start := time.Now()
	err := connect(h, addr)
	if err == nil {
		t.Errorf("%s connected to %s across a cut", h.Name, addr)
		return
	}
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Errorf("%s -> %s failed with %v after %v; want a timeout (silent drop)", h.Name, addr, err, time.Since(start))
	}
}
