package netlab

import (
	"testing"
)

// An attached handle cuts and heals among the builder's hosts, refuses names that are not lab
// hosts, and its Close leaves the builder's namespaces in place.
func TestAttach(t *testing.T) {
	l := newLab(t, 3)
	h := l.Hosts()
	addr := listenAll(t, h)
	a, err := Attach([]Host{*h[0], *h[1]})
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	if err := a.Cut(a.Hosts()[0], a.Hosts()[1]); err != nil {
		t.Fatalf("Cut through the attached handle: %v", err)
	}
	expectSilentDrop(t, h[0], addr[1])
	if err := a.Heal(); err != nil {
		t.Fatalf("Heal: %v", err)
	}
	expectReach(t, h[0], addr[1])
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !nsExists(h[0].Name) {
		t.Errorf("closing the attached handle removed %s", h[0].Name)
	}
	for _, bad := range [][]Host{nil, {{Name: "other", IP: "10.0.0.1"}}, {{Name: l.sw, IP: "10.0.0.1"}},
		{{Name: h[0].Name, IP: h[0].IP}, {Name: "rrlab1x999-h0", IP: "10.0.0.2"}}} {
		if _, err := Attach(bad); err == nil {
			t.Errorf("Attach(%v) accepted", bad)
		}
	}
}
