package netlab

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// inParallel runs fns at once and waits: each silent-drop probe costs a full dial timeout.
func inParallel(fns ...func()) {
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Go(fn)
	}
	wg.Wait()
}

// Cut silences a<->b both ways while a third host still reaches both; Heal restores, and
// removes every rule the lab added.
func TestCutAndHeal(t *testing.T) {
	l := newLab(t, 3)
	h := l.Hosts()
	addr := listenAll(t, h)
	rootBefore := rootSnapshot(t)
	if err := l.Cut(h[0], h[1]); err != nil {
		t.Fatalf("Cut: %v", err)
	}
	if err := l.Cut(h[1], h[0]); err != nil { // repeated cut: no duplicate rules, no error
		t.Fatalf("second Cut: %v", err)
	}
	start := time.Now()
	inParallel(
		func() { expectSilentDrop(t, h[0], addr[1]) },
		func() { expectSilentDrop(t, h[1], addr[0]) },
		func() { expectReach(t, h[2], addr[0]) },
		func() { expectReach(t, h[2], addr[1]) },
		func() { expectReach(t, h[0], addr[2]) },
		func() { expectReach(t, h[1], addr[2]) },
	)
	t.Logf("probes across the cut took %v", time.Since(start).Round(time.Millisecond))
	if out, err := helperDialFrom(t, h[1], addr[0]); err == nil {
		t.Errorf("a program on %s crossed the cut: %q", h[1].Name, out)
	}
	if got := rootSnapshot(t); got != rootBefore {
		t.Errorf("Cut changed the root namespace:\nbefore:\n%s\nafter:\n%s", rootBefore, got)
	}
	rules := ipOut(t, "netns", "exec", h[1].Name, "nft", "list", "ruleset")
	if strings.Count(rules, "drop") != 1 || strings.Contains(rules, "reject") {
		t.Errorf("%s ruleset after two identical cuts:\n%s", h[1].Name, rules)
	}

	if err := l.Heal(); err != nil {
		t.Fatalf("Heal: %v", err)
	}
	expectReach(t, h[0], addr[1])
	expectReach(t, h[1], addr[0])
	for _, host := range h {
		if rules := ipOut(t, "netns", "exec", host.Name, "nft", "list", "ruleset"); strings.TrimSpace(rules) != "" {
			t.Errorf("%s still has rules after Heal:\n%s", host.Name, rules)
		}
	}
	if err := l.Heal(); err != nil {
		t.Errorf("Heal with nothing to heal: %v", err)
	}
}

// CutOneWay drops from->to only: datagrams to->from still arrive, from->to vanish, and TCP
// (whose handshake needs both ways) fails both ways.
func TestCutOneWay(t *testing.T) {
	l := newLab(t, 2)
	from, to := l.Hosts()[0], l.Hosts()[1]
	addr := listenAll(t, []*Host{from, to})
	if err := l.CutOneWay(from, to); err != nil {
		t.Fatalf("CutOneWay: %v", err)
	}
	if !udpArrives(t, to, from) {
		t.Errorf("datagrams %s -> %s lost; only the other direction is cut", to.Name, from.Name)
	}
	if udpArrives(t, from, to) {
		t.Errorf("datagrams %s -> %s arrived across a one-way cut", from.Name, to.Name)
	}
	expectSilentDrop(t, from, addr[1])
	if err := l.Heal(); err != nil {
		t.Fatalf("Heal: %v", err)
	}
	if !udpArrives(t, from, to) {
		t.Errorf("datagrams %s -> %s lost after Heal", from.Name, to.Name)
	}
}

// Isolate cuts one host from all others, who still reach each other.
func TestIsolate(t *testing.T) {
	l := newLab(t, 3)
	h := l.Hosts()
	addr := listenAll(t, h)
	if err := l.Isolate(h[0]); err != nil {
		t.Fatalf("Isolate: %v", err)
	}
	inParallel(
		func() { expectSilentDrop(t, h[0], addr[1]) },
		func() { expectSilentDrop(t, h[0], addr[2]) },
		func() { expectSilentDrop(t, h[1], addr[0]) },
		func() { expectSilentDrop(t, h[2], addr[0]) },
		func() { expectReach(t, h[1], addr[2]) },
		func() { expectReach(t, h[2], addr[1]) },
	)
	if err := l.Heal(); err != nil {
		t.Fatalf("Heal: %v", err)
	}
	expectReach(t, h[0], addr[1])
	expectReach(t, h[2], addr[0])
}

// Cuts are refused for hosts of another lab and for a host paired with itself.
func TestCutRejectsForeignHosts(t *testing.T) {
	l := newLab(t, 2)
	h := l.Hosts()
	if err := l.Cut(h[0], h[0]); err == nil {
		t.Error("Cut(h0, h0) succeeded")
	}
	stranger := &Host{Name: "elsewhere", IP: "10.213.0.1"}
	if err := l.CutOneWay(h[0], stranger); err == nil {
		t.Error("CutOneWay to a host of no lab succeeded")
	}
}

// udpArrives reports whether a datagram sent from src to dst gets through within about half
// a second; it sends several so that a lost first packet cannot decide the answer.
func udpArrives(t *testing.T, src, dst *Host) bool {
	t.Helper()
	pc, err := dst.ListenPacket("udp", net.JoinHostPort(dst.IP, "0"))
	if err != nil {
		t.Fatalf("ListenPacket on %s: %v", dst.Name, err)
	}
	defer pc.Close()
	c, err := src.DialTimeout("udp", pc.LocalAddr().String(), time.Second)
	if err != nil {
		t.Fatalf("udp dial from %s: %v", src.Name, err)
	}
	defer c.Close()
	buf := make([]byte, 16)
	for range 5 {
		c.Write([]byte("ping"))
		pc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if n, _, err := pc.ReadFrom(buf); err == nil && string(buf[:n]) == "ping" {
			return true
		}
	}
	return false
}
