package dledger

import (
	"fmt"
	"strings"

	"github.com/hashicorp/raft"
)

// warnStoredPeers logs where the membership restored from this node's Raft state differs from
// cfg.Peers. With existing state Raft uses the membership it stored (changes go through the
// log), so an edited dLegerPeers has no effect: a node whose peers moved keeps dialling the old
// addresses and never elects a leader, with nothing in its log saying why. A node that joined
// online (cfg.Join) has no dLegerPeers of its own to compare, so it is not checked.
func (n *Node) warnStoredPeers() {
	if n.cfg.Join {
		return
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	if d := peerDiffs(f.Configuration().Servers, n.cfg.Peers); len(d) > 0 {
		n.cfg.Logger.Warn("dLegerPeers differs from the membership stored in the Raft state, which is what this node uses: " +
			strings.Join(d, "; ") +
			". Change membership on the leader with mqadmin addPeer/removePeer (addPeer of an existing id moves it to a new address), " +
			"or start the whole group from empty stores to bootstrap from dLegerPeers")
	}
}

// peerDiffs describes each difference between the stored servers and the configured peers, in
// the configured order, then stored servers the configuration does not name.
func peerDiffs(stored []raft.Server, configured []Peer) []string {
	byID := make(map[string]raft.Server, len(stored))
	for _, s := range stored {
		byID[string(s.ID)] = s
	}
	var out []string
	named := make(map[string]bool, len(configured))
	for _, p := range configured {
		named[p.ID] = true
		s, ok := byID[p.ID]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s (%s) is not a member", p.ID, p.Addr))
		case string(s.Address) != p.Addr:
			out = append(out, fmt.Sprintf("%s is stored at %s, configured at %s", p.ID, s.Address, p.Addr))
		case s.Suffrage != raft.Voter:
			out = append(out, fmt.Sprintf("%s is stored as a %s", p.ID, s.Suffrage))
		}
	}
	for _, s := range stored {
		if !named[string(s.ID)] {
			out = append(out, fmt.Sprintf("%s (%s) is a member not in dLegerPeers", s.ID, s.Address))
		}
	}
	return out
}
