package netlab

import (
	"errors"
	"fmt"
	"strings"
)

// cutTable is the nftables table every cut lives in, one per host namespace; cutHeader and
// cutFooter wrap the rules added to it. Its chain hooks prerouting at raw priority (-300),
// ahead of connection tracking, so a dropped packet leaves no trace in the receiver; the rule
// verdict is drop, never reject, so no RST or ICMP error tells the sender anything.
const (
	cutTable  = "inet netlab"
	cutHeader = "table inet netlab {\n\tchain cut {\n\t\ttype filter hook prerouting priority -300; policy accept;\n"
	cutFooter = "\t}\n}\n"
)

// Cut silently drops every packet between a and b, both ways, as a network partition would:
// connections in flight stall and new connects time out. Other hosts still reach both.
func (l *Lab) Cut(a, b *Host) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkPair(a, b); err != nil {
		return err
	}
	return errors.Join(l.drop(a, b), l.drop(b, a))
}

// CutOneWay silently drops packets from from to to, leaving the other direction open: to
// still sends to from, and from receives it. Any TCP handshake between them then fails in
// both directions (it needs both), but datagrams and already-open connections show the
// asymmetry: to's packets arrive, from's vanish.
func (l *Lab) CutOneWay(from, to *Host) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkPair(from, to); err != nil {
		return err
	}
	return l.drop(to, from)
}

// Isolate cuts h from every other host of the lab, both ways.
func (l *Lab) Isolate(h *Host) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkHosts(h); err != nil {
		return err
	}
	var others []*Host
	for _, o := range l.hosts {
		if o.Name != h.Name {
			others = append(others, o)
		}
	}
	errs := []error{l.drop(h, others...)}
	for _, o := range others {
		errs = append(errs, l.drop(o, h))
	}
	return errors.Join(errs...)
}

// Heal removes every rule the lab added, in every host, restoring full connectivity.
// Connections that stalled resume if their peers have not given up on them.
func (l *Lab) Heal() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	var errs []error
	for _, h := range l.hosts {
		// "table ... {}" creates the table if missing, so the delete never fails for lack of it.
		if err := nft(h.Name, "table "+cutTable+" {}\ndelete table "+cutTable+"\n"); err != nil {
			errs = append(errs, fmt.Errorf("netlab: heal %s: %w", h.Name, err))
			continue
		}
		for k := range l.cuts {
			if k[0] == h.Name {
				delete(l.cuts, k)
			}
		}
	}
	return errors.Join(errs...)
}

// drop makes host at discard every IPv4 packet arriving from any of from. Pairs already cut
// are skipped so repeated calls do not pile up duplicate rules. The caller holds l.mu.
func (l *Lab) drop(at *Host, from ...*Host) error {
	var b strings.Builder
	var added [][2]string
	for _, f := range from {
		k := [2]string{at.Name, f.Name}
		if !l.cuts[k] {
			fmt.Fprintf(&b, "\t\tip saddr %s drop\n", f.IP)
			added = append(added, k)
		}
	}
	if len(added) == 0 {
		return nil
	}
	if err := nft(at.Name, cutHeader+b.String()+cutFooter); err != nil {
		return fmt.Errorf("netlab: cut %s off from %d host(s): %w", at.Name, len(added), err)
	}
	for _, k := range added {
		l.cuts[k] = true
	}
	return nil
}

// checkPair rejects a pair that is not two distinct hosts of this lab.
func (l *Lab) checkPair(a, b *Host) error {
	if err := l.checkHosts(a, b); err != nil {
		return err
	}
	if a.Name == b.Name {
		return fmt.Errorf("netlab: cannot cut %s from itself", a.Name)
	}
	return nil
}

// checkHosts rejects hosts that are not this lab's, and any use after Close. The caller holds
// l.mu.
func (l *Lab) checkHosts(hs ...*Host) error {
	if l.closed {
		return ErrClosed
	}
	for _, h := range hs {
		if h == nil || !l.has(h) {
			return fmt.Errorf("netlab: host %v is not part of lab %s", h, l.name)
		}
	}
	return nil
}

// has reports whether h is one of the lab's hosts (by name and address, so copies count).
func (l *Lab) has(h *Host) bool {
	for _, o := range l.hosts {
		if o.Name == h.Name && o.IP == h.IP {
			return true
		}
	}
	return false
}
