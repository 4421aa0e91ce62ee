package netlab

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Close removes every namespace (also when called twice), refuses further cuts, and leaves
// running programs alone.
func TestClose(t *testing.T) {
	l := newLab(t, 2)
	h := l.Hosts()
	srv := startServer(t, h[0])
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if list := ipOut(t, "netns", "list"); strings.Contains(list, l.Name()+"-") {
		t.Errorf("namespaces left after Close:\n%s", list)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := l.Cut(h[0], h[1]); err != ErrClosed {
		t.Errorf("Cut after Close = %v, want ErrClosed", err)
	}
	if err := syscall.Kill(srv.pid, 0); err != nil {
		t.Errorf("Close touched the program it did not start: %v", err)
	}
}

// A lab that failed halfway (here: hosts added before the bridge exists) is cleaned up too.
func TestCloseAfterPartialCreation(t *testing.T) {
	if err := Available(); err != nil {
		t.Fatalf("netlab cannot run on this machine: %v", err)
	}
	l, err := claim()
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	if err := l.addHost(0); err == nil {
		t.Fatal("addHost without a bridge succeeded")
	}
	if !nsExists(l.Name() + "-h0") {
		t.Fatal("partial host namespace was not created; test proves nothing")
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if list := ipOut(t, "netns", "list"); strings.Contains(list, l.Name()+"-") {
		t.Errorf("namespaces left after Close:\n%s", list)
	}
}

// Labs built at the same time get different subnets and cannot reach each other.
func TestTwoLabsAtOnce(t *testing.T) {
	if err := Available(); err != nil {
		t.Fatalf("netlab cannot run on this machine: %v", err)
	}
	labs := make([]*Lab, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range labs {
		wg.Go(func() { labs[i], errs[i] = New(2) })
	}
	wg.Wait()
	for i, l := range labs {
		if l != nil {
			t.Cleanup(func() { l.Close() })
		}
		if errs[i] != nil {
			t.Fatalf("New #%d: %v", i, errs[i])
		}
	}
	a, b := labs[0], labs[1]
	t.Logf("labs %s (%s) and %s (%s)", a.Name(), a.Subnet(), b.Name(), b.Subnet())
	if a.Subnet() == b.Subnet() || a.Name() == b.Name() {
		t.Fatalf("two labs share %s / %s", a.Subnet(), b.Subnet())
	}
	addrs := listenAll(t, b.Hosts())
	if err := connect(a.Hosts()[0], addrs[0]); err == nil {
		t.Errorf("lab %s reached lab %s", a.Name(), b.Name())
	}
	expectReach(t, b.Hosts()[1], addrs[0])
}

// Sweep deletes namespaces whose creator is dead and keeps live labs.
func TestSweep(t *testing.T) {
	live := newLab(t, 1)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command(exe, "-test.run=^TestHelperProcess$", "--", "exit")
	dead.Env = helperEnviron()
	if err := dead.Run(); err != nil {
		t.Fatalf("helper exit: %v", err)
	}
	// Index 0 is never handed out by New, so these fakes cannot clash with a real lab.
	stale := []string{labName(dead.Process.Pid, 0) + "-h0", labName(dead.Process.Pid, 0) + "-sw"}
	for _, ns := range stale {
		ipOut(t, "netns", "add", ns)
		t.Cleanup(func() {
			if nsExists(ns) {
				ip("netns", "del", ns)
			}
		})
	}
	if err := Sweep(); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	for _, ns := range stale {
		if nsExists(ns) {
			t.Errorf("Sweep left %s of dead PID %d", ns, dead.Process.Pid)
		}
	}
	if !nsExists(live.Hosts()[0].Name) {
		t.Errorf("Sweep removed live lab %s", live.Name())
	}
}
