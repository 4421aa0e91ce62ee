package dledger

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// What the leader knows of each follower's log, for the status pages: hashicorp/raft keeps its
// match indexes private, so the transport (transport.go, raftTransport.AppendEntries) records
// the last log index every follower reports in its AppendEntries answers. Heartbeats travel that
// path too, so the figure is at most one heartbeat old even while entries go through the
// pipeline.

// FollowerProgress is one peer's log as the last AppendEntries answer from it said.
type FollowerProgress struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
	// MatchIndex is the highest index the peer is known to hold: its last log index as it
	// answered, or the last entry of a batch it accepted.
	MatchIndex uint64 `json:"matchIndex"`
	// Lag is the leader's last log index minus MatchIndex (0 when the peer is ahead).
	Lag uint64 `json:"lag"`
	// AnsweredAgoMs is how long ago the peer last answered.
	AnsweredAgoMs int64 `json:"answeredAgoMs"`
}

// followerLog holds the latest answer per peer address; bounded by the peers the leader sends to.
type followerLog struct {
	mu    sync.Mutex
	peers map[raft.ServerAddress]followerAnswer
}

type followerAnswer struct {
	id    raft.ServerID
	match uint64
	at    time.Time
}

// note records one successful AppendEntries round trip.
func (f *followerLog) note(id raft.ServerID, target raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	if f == nil || resp == nil {
		return
	}
	match := resp.LastLog
	if resp.Success && len(req.Entries) > 0 {
		match = max(match, req.Entries[len(req.Entries)-1].Index)
	}
	f.mu.Lock()
	if f.peers == nil {
		f.peers = map[raft.ServerAddress]followerAnswer{}
	}
	f.peers[target] = followerAnswer{id: id, match: match, at: time.Now()}
	f.mu.Unlock()
}

// match returns the highest index the peer at target was last known to hold, and whether it has
// answered at all.
func (f *followerLog) match(target raft.ServerAddress) (uint64, bool) {
	if f == nil {
		return 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.peers[target]
	return a.match, ok
}

// Followers returns, on the leader, every other member of the latest configuration with what it
// last reported (a member that never answered has MatchIndex 0 and AnsweredAgoMs -1). Elsewhere
// it returns nil: only the leader sends AppendEntries.
func (n *Node) Followers() []FollowerProgress {
	if n.raft.State() != raft.Leader {
		return nil
	}
	last := n.raft.LastIndex()
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	now := time.Now()
	out := []FollowerProgress{}
	n.followers.mu.Lock()
	defer n.followers.mu.Unlock()
	for _, sv := range f.Configuration().Servers {
		if string(sv.ID) == n.cfg.SelfID {
			continue
		}
		p := FollowerProgress{ID: string(sv.ID), Addr: string(sv.Address), AnsweredAgoMs: -1}
		if a, ok := n.followers.peers[sv.Address]; ok {
			p.MatchIndex, p.AnsweredAgoMs = a.match, now.Sub(a.at).Milliseconds()
		}
		if last > p.MatchIndex {
			p.Lag = last - p.MatchIndex
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b FollowerProgress) int { return strings.Compare(a.ID, b.ID) })
	return out
}
