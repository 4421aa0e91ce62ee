package acl

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// AddrPattern is one white-list entry: any address, one address, a CIDR block, or an IPv4
// pattern of per-segment wildcards, ranges and a final-segment set (RocketMQ's
// RemoteAddressStrategy forms).
type AddrPattern struct {
	text   string
	any    bool
	prefix netip.Prefix // exact address (full-length prefix) or CIDR
	segs   [4]segMatch  // IPv4 segment pattern when !prefix.IsValid() && !any
}

// segMatch matches one IPv4 octet: a set of values or an inclusive range.
type segMatch struct {
	lo, hi int
	set    []int
}

func (s segMatch) match(v int) bool {
	if s.set != nil {
		for _, x := range s.set {
			if x == v {
				return true
			}
		}
		return false
	}
	return v >= s.lo && v <= s.hi
}

// ParseAddrPattern parses one white-list entry; an empty string is an error.
func ParseAddrPattern(s string) (AddrPattern, error) {
	t := strings.TrimSpace(s)
	p := AddrPattern{text: t}
	switch {
	case t == "":
		return p, fmt.Errorf("empty address pattern")
	case t == "*" || t == "*.*.*.*" || t == "*:*:*:*:*:*:*:*":
		p.any = true
		return p, nil
	}
	if strings.Contains(t, "/") {
		pre, err := netip.ParsePrefix(t)
		if err != nil {
			return p, fmt.Errorf("bad CIDR %q: %w", t, err)
		}
		p.prefix = pre.Masked()
		return p, nil
	}
	if a, err := netip.ParseAddr(t); err == nil {
		a = a.Unmap()
		p.prefix = netip.PrefixFrom(a, a.BitLen())
		return p, nil
	}
	parts := strings.Split(t, ".")
	if len(parts) != 4 {
		return p, fmt.Errorf("bad address pattern %q: want an address, a CIDR block, * or an IPv4 pattern such as 10.1.*.* / 10.1.2.1-99 / 10.1.2.{1,2}", t)
	}
	for i, seg := range parts {
		m, err := parseSeg(seg, i == 3)
		if err != nil {
			return p, fmt.Errorf("bad address pattern %q, segment %d: %w", t, i+1, err)
		}
		p.segs[i] = m
	}
	return p, nil
}

func parseSeg(seg string, last bool) (segMatch, error) {
	octet := func(s string) (int, error) {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 || n > 255 {
			return 0, fmt.Errorf("%q is not 0..255", s)
		}
		return n, nil
	}
	switch {
	case seg == "*":
		return segMatch{lo: 0, hi: 255}, nil
	case strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}"):
		if !last {
			return segMatch{}, fmt.Errorf("a {a,b} set is only allowed in the last segment")
		}
		var set []int
		for _, x := range strings.Split(seg[1:len(seg)-1], ",") {
			n, err := octet(x)
			if err != nil {
				return segMatch{}, err
			}
			set = append(set, n)
		}
		return segMatch{set: set}, nil
	case strings.Contains(seg, "-"):
		a, b, _ := strings.Cut(seg, "-")
		lo, err := octet(a)
		if err != nil {
			return segMatch{}, err
		}
		hi, err := octet(b)
		if err != nil {
			return segMatch{}, err
		}
		if lo > hi {
			return segMatch{}, fmt.Errorf("range %q is empty", seg)
		}
		return segMatch{lo: lo, hi: hi}, nil
	default:
		n, err := octet(seg)
		if err != nil {
			return segMatch{}, err
		}
		return segMatch{lo: n, hi: n}, nil
	}
}

// Match reports whether addr ("ip" or "ip:port") matches the pattern.
func (p AddrPattern) Match(addr string) bool {
	if p.any {
		return true
	}
	a, ok := parseRemote(addr)
	if !ok {
		return false
	}
	if p.prefix.IsValid() {
		return p.prefix.Contains(a)
	}
	if !a.Is4() {
		return false
	}
	b := a.As4()
	for i := range 4 {
		if !p.segs[i].match(int(b[i])) {
			return false
		}
	}
	return true
}

// String is the pattern as written.
func (p AddrPattern) String() string { return p.text }

// parseRemote reads the IP of "ip:port" or "ip", IPv4-mapped addresses unmapped.
func parseRemote(addr string) (netip.Addr, bool) {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// matchAny reports whether addr matches one of ps.
func matchAny(ps []AddrPattern, addr string) bool {
	for _, p := range ps {
		if p.Match(addr) {
			return true
		}
	}
	return false
}
