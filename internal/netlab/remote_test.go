package netlab

import "testing"

// TestRemoteHandle: a handle on another process's lab knows its hosts, refuses hosts it was
// not given, and its Close removes nothing (no root needed: nothing is created).
func TestRemoteHandle(t *testing.T) {
	a, b := Host{Name: "rrlab1x1-h0", IP: "10.213.1.1"}, Host{Name: "rrlab1x1-h1", IP: "10.213.1.2"}
	l := Remote(a, b)
	hs := l.Hosts()
	if len(hs) != 2 || *hs[0] != a || *hs[1] != b {
		t.Fatalf("hosts %v, want %v and %v", hs, a, b)
	}
	if err := l.Cut(hs[0], &Host{Name: "other", IP: "10.213.1.9"}); err == nil {
		t.Fatal("a cut to a host the handle was not given succeeded")
	}
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := l.Heal(); err != ErrClosed {
		t.Fatalf("heal after close: %v, want ErrClosed", err)
	}
}
