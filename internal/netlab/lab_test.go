package netlab

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests need root, ip and nft; CI provides them, so a missing piece is a failure.
func TestAvailable(t *testing.T) {
	if err := Available(); err != nil {
		t.Fatalf("netlab cannot run on this machine: %v", err)
	}
}

// ipOut runs ip and returns its output, failing the test on error.
func ipOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := run("", "ip", args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rootSnapshot describes the root namespace's interfaces, addresses and nftables ruleset,
// leaving out what changes on its own (counters, address lifetimes, link state).
func rootSnapshot(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(ipOut(t, "-o", "link", "show"), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			fmt.Fprintln(&b, "link", f[1])
		}
	}
	for _, line := range strings.Split(ipOut(t, "-o", "addr", "show"), "\n") {
		if f := strings.Fields(line); len(f) > 3 {
			fmt.Fprintln(&b, "addr", f[1], f[2], f[3])
		}
	}
	rules, err := run("", "nft", "--stateless", "list", "ruleset")
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString(rules)
	return b.String()
}

// Hosts get distinct addresses in the lab's subnet, one interface with no IPv6 and no default
// route; the switch holds the bridge and no address; the root namespace does not change.
func TestTopology(t *testing.T) {
	before := rootSnapshot(t)
	l := newLab(t, 3)
	hosts := l.Hosts()
	if len(hosts) != 3 {
		t.Fatalf("Hosts() = %d hosts, want 3", len(hosts))
	}
	prefix := strings.TrimSuffix(l.Subnet(), "0/24")
	for i, h := range hosts {
		if want := fmt.Sprintf("%s-h%d", l.Name(), i); h.Name != want {
			t.Errorf("host %d is %q, want %q", i, h.Name, want)
		}
		if want := fmt.Sprintf("%s%d", prefix, i+1); h.IP != want {
			t.Errorf("host %d has IP %s, want %s", i, h.IP, want)
		}
		addrs := ipOut(t, "-n", h.Name, "-o", "addr", "show", "dev", "eth0")
		if !strings.Contains(addrs, " inet "+h.IP+"/24 ") || strings.Contains(addrs, "inet6") {
			t.Errorf("%s eth0 addresses: %s; want only %s/24, no IPv6", h.Name, addrs, h.IP)
		}
		if routes := ipOut(t, "-n", h.Name, "route", "show"); strings.Contains(routes, "default") {
			t.Errorf("%s has a default route: %s", h.Name, routes)
		}
	}
	sw := l.Name() + "-sw"
	if addrs := ipOut(t, "-n", sw, "-o", "addr", "show"); strings.Contains(addrs, "inet") {
		t.Errorf("switch namespace has addresses: %s", addrs)
	}
	links := ipOut(t, "-n", sw, "-o", "link", "show")
	for _, name := range []string{"br0:", "h0@", "h1@", "h2@"} {
		if !strings.Contains(links, " "+name) {
			t.Errorf("switch namespace lacks %s: %s", strings.TrimRight(name, ":@"), links)
		}
	}
	if after := rootSnapshot(t); after != before {
		t.Errorf("root namespace changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// Two programs started with Host.Command on different hosts talk over TCP.
func TestTCPBetweenHosts(t *testing.T) {
	l := newLab(t, 2)
	h := l.Hosts()
	for _, pair := range [][2]int{{0, 1}, {1, 0}} {
		srv := startServer(t, h[pair[0]])
		start := time.Now()
		out, err := helperDialFrom(t, h[pair[1]], srv.addr)
		if err != nil {
			t.Fatalf("dial %s from %s: %v", srv.addr, h[pair[1]].Name, err)
		}
		if want := fmt.Sprintf("hello %d", srv.pid); out != want {
			t.Errorf("%s got %q from %s, want %q", h[pair[1]].Name, out, srv.addr, want)
		}
		t.Logf("%s -> %s: %q in %v", h[pair[1]].Name, srv.addr, out, time.Since(start).Round(time.Millisecond))
	}
}

// cmd.Process.Pid is the program itself, inside the host's namespace: stopping and killing
// that PID stops and kills the program, with no wrapper in between.
func TestCommandPID(t *testing.T) {
	l := newLab(t, 2)
	h0, h1 := l.Hosts()[0], l.Hosts()[1]
	srv := startServer(t, h0)
	if srv.pid != srv.cmd.Process.Pid {
		t.Fatalf("program PID %d, cmd.Process.Pid %d", srv.pid, srv.cmd.Process.Pid)
	}
	got, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", srv.pid))
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(netnsDir+"/"+h0.Name, &st); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("net:[%d]", st.Ino); got != want {
		t.Errorf("program runs in namespace %s, want %s (%s)", got, want, h0.Name)
	}

	// SIGSTOP freezes the server: the kernel still completes the handshake, but no greeting.
	if err := syscall.Kill(srv.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if out, err := helperDialFrom(t, h1, srv.addr); err == nil {
		t.Errorf("stopped server answered %q", out)
	}
	if err := syscall.Kill(srv.pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := helperDialFrom(t, h1, srv.addr); err != nil {
		t.Errorf("server silent after SIGCONT: %v", err)
	}

	if err := syscall.Kill(srv.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = srv.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("Wait after SIGKILL to the PID: %v, want killed by SIGKILL", err)
	}
}
