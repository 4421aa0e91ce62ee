package netlab

import (
	"fmt"
	"net"
	"time"
)

// readyTimeout bounds New's wait for all hosts to reach each other.
const readyTimeout = 10 * time.Second

// build creates the bridge, then n hosts, then waits until the hosts can talk.
func (l *Lab) build(n int) error {
	if err := disableIPv6(l.sw); err != nil {
		return err
	}
	if err := ip("-n", l.sw, "link", "add", "br0", "type", "bridge"); err != nil {
		return err
	}
	if err := ip("-n", l.sw, "link", "set", "br0", "up"); err != nil {
		return err
	}
	for i := range n {
		if err := l.addHost(i); err != nil {
			return err
		}
	}
	return l.waitReachable(readyTimeout)
}

// addNamespace creates a named namespace and records it for Close first, so a failure
// halfway through `ip netns add` is still cleaned up.
func (l *Lab) addNamespace(ns string) error {
	l.mu.Lock()
	l.created = append(l.created, ns)
	l.mu.Unlock()
	return ip("netns", "add", ns)
}

// addHost creates host i: its namespace, a veth pair made inside the switch with the peer
// placed straight into the host as eth0, the address, and lo.
func (l *Lab) addHost(i int) error {
	h := &Host{
		Name: fmt.Sprintf("%s-h%d", l.name, i),
		IP:   fmt.Sprintf("10.213.%d.%d", l.index, i+1),
	}
	port := fmt.Sprintf("h%d", i)
	if err := l.addNamespace(h.Name); err != nil {
		return err
	}
	if err := disableIPv6(h.Name); err != nil {
		return err
	}
	l.mu.Lock()
	l.ports = append(l.ports, port)
	l.mu.Unlock()
	steps := [][]string{
		{"-n", l.sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", h.Name},
		{"-n", l.sw, "link", "set", port, "master", "br0", "up"},
		{"-n", h.Name, "addr", "add", h.IP + "/24", "dev", "eth0"},
		{"-n", h.Name, "link", "set", "eth0", "up"},
		{"-n", h.Name, "link", "set", "lo", "up"},
	}
	for _, args := range steps {
		if err := ip(args...); err != nil {
			return err
		}
	}
	l.mu.Lock()
	l.hosts = append(l.hosts, h)
	l.mu.Unlock()
	return nil
}

// waitReachable returns once every host has completed a TCP handshake with every other
// host, or fails when timeout passes first.
func (l *Lab) waitReachable(timeout time.Duration) error {
	hosts := l.Hosts()
	addrs := make([]string, len(hosts))
	for i, h := range hosts {
		ln, err := h.Listen("tcp", net.JoinHostPort(h.IP, "0"))
		if err != nil {
			return err
		}
		defer ln.Close()
		addrs[i] = ln.Addr().String()
	}
	deadline := time.Now().Add(timeout)
	for i, src := range hosts {
		err := inNamespace(src.Name, func() error {
			for j, addr := range addrs {
				if j == i {
					continue
				}
				if err := dialUntil(addr, deadline); err != nil {
					return fmt.Errorf("netlab: %s cannot reach %s within %v: %w", src.Name, hosts[j].Name, timeout, err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// dialUntil retries a TCP connect to addr until one succeeds or deadline passes.
func dialUntil(addr string, deadline time.Time) error {
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
