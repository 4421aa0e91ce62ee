package testport

import (
	"net"
	"testing"
)

// Ports come from below the ephemeral range, are never handed out twice, and can be bound.
func TestFree(t *testing.T) {
	lo, hi := Range()
	seen := map[int]bool{}
	for range 50 {
		p := Free(t, 1)
		if p < lo || p >= hi {
			t.Fatalf("port %d outside %d-%d", p, lo, hi)
		}
		if seen[p] || seen[p+1] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p], seen[p+1] = true, true
	}
	l, err := net.Listen("tcp", Addr(t))
	if err != nil {
		t.Fatalf("cannot bind a port Addr returned: %v", err)
	}
	l.Close()
}
