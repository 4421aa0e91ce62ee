package config

import (
	"net"
	"strings"
)

// Procs says how many CPUs the broker should schedule goroutines on (runtime.GOMAXPROCS) and
// why; n == 0 leaves the Go runtime's choice alone. cpus is that choice (the machine's or the
// container's CPUs); envSet reports a GOMAXPROCS environment variable. leader > 0 is the count
// for while this node leads its group (n again once it follows); 0 means no change with the role.
//
// An explicit maxProcs wins, then GOMAXPROCS. Otherwise a DLedger node whose dLegerPeers all
// name one host shares that machine with the other nodes of its group (make run, tests, a
// laptop), so it takes a share of the CPUs. Go's default would give each node every CPU: three
// nodes and a client on two cores then run up to eight scheduler threads that spin and wake each
// other across processes, which measured 15 % more CPU per message and a longer tail than one
// each (docs/benchmarks.md). A follower takes cpus / nodes, at least 1; the leader, which does
// more of the work per message (it decodes the clients' requests, answers them and sends every
// entry twice), takes what the followers leave, cpus - (nodes - 1) * share, never less than a
// follower: the group's scheduler threads never outnumber the CPUs once there is one CPU per
// node. On two cores that is one each: a leader given the second core as well (the rule before
// 2026-12-04) spent 12-30 % more CPU per message on the wake-ups between its two threads and
// sent 6-16 % fewer messages at 256 in flight and for a lone producer (docs/benchmarks.md).
// A group spread over machines keeps all CPUs in every role.
func (b *Broker) Procs(cpus int, envSet bool) (n, leader int, why string) {
	switch {
	case b.MaxProcs > 0:
		return b.MaxProcs, 0, "maxProcs"
	case envSet:
		return 0, 0, "GOMAXPROCS"
	case !b.EnableDLegerCommitLog:
		return 0, 0, "default"
	}
	peers, err := b.DLegerPeerList()
	if err != nil || len(peers) < 2 || !oneHost(peers) {
		return 0, 0, "default"
	}
	n = max(1, cpus/len(peers))
	leader = max(n, cpus-(len(peers)-1)*n)
	if leader == n {
		leader = 0
	}
	return n, leader, "dLegerPeers share one host"
}

// oneHost reports whether every peer address names the same host; all loopback names and
// addresses count as one host.
func oneHost(peers []Peer) bool {
	first := ""
	for i, p := range peers {
		h := hostKey(p.Addr)
		if i == 0 {
			first = h
		} else if h != first {
			return false
		}
	}
	return true
}

func hostKey(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	host = strings.ToLower(host)
	if host == "localhost" {
		return "loopback"
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsLoopback() {
			return "loopback"
		}
		return ip.String()
	}
	return host
}
