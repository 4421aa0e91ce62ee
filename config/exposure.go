package config

import (
	"net"
	"net/netip"
	"strings"
)

// LoopbackOnly reports whether a listen address (host:port or a bare host) accepts connections
// from this machine only: a loopback IP or "localhost". An empty host, 0.0.0.0, :: or any other
// address is reachable from the network, so what the port serves without access control is
// open to anyone who reaches it (the start-up warnings with aclEnable=false use this).
func LoopbackOnly(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.IsLoopback()
}
