package netlab

import "testing"

// A handle attached to another's hosts cuts and heals them, and its Close leaves the lab alone.
func TestAttachCutsAndHeals(t *testing.T) {
	l := newLab(t, 3)
	h := l.Hosts()
	addr := listenAll(t, h)
	a, err := Attach(h)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	if err := a.Cut(a.Hosts()[0], a.Hosts()[1]); err != nil {
		t.Fatalf("Cut through the attached handle: %v", err)
	}
	inParallel(
		func() { expectSilentDrop(t, h[0], addr[1]) },
		func() { expectReach(t, h[0], addr[2]) },
	)
	if err := a.Heal(); err != nil {
		t.Fatalf("Heal: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close of an attached handle: %v", err)
	}
	expectReach(t, h[0], addr[1])
	if _, err := Attach([]*Host{{Name: "rrlab-none-h0", IP: "10.213.250.1"}}); err == nil {
		t.Errorf("Attach to a namespace that does not exist succeeded")
	}
	if _, err := Attach(nil); err == nil {
		t.Errorf("Attach to no hosts succeeded")
	}
}
