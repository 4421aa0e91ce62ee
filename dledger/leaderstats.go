package dledger

import (
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// LeaderStats are this node's view of leadership over time, for metrics: how often the group's
// leader changed and how long the last failover took.
type LeaderStats struct {
	// Changes counts the leaders this node has learned of since it started, the first one
	// included: a new leader id, or the same one again after a leaderless spell.
	Changes uint64
	// LastFailover is how long the group was without a leader the last time it lost one, as
	// this node saw it: from its last contact with the old leader (or, without one, from when
	// it noticed the loss) until it learned of the new leader. Zero until a leader has been
	// lost and replaced. Only nodes that noticed the group leaderless measure it; the new
	// leader always does (it campaigned).
	LastFailover time.Duration
	// LeaderlessSince is when this node noticed the group without a leader; zero while one is
	// known.
	LeaderlessSince time.Time
}

// leaderStats is the state behind LeaderStats, written by watchLeaderChanges only.
type leaderStats struct {
	changes        atomic.Uint64
	lastFailoverNs atomic.Int64
	leaderlessAt   atomic.Int64 // unix ns of the loss's start (last contact); 0 while a leader is known
	hadLeader      bool         // a leader has been known since start (watchLeaderChanges only)
	leader         raft.ServerID
}

// LeaderStats returns the figures gathered since the node opened.
func (n *Node) LeaderStats() LeaderStats {
	s := LeaderStats{
		Changes:      n.lstats.changes.Load(),
		LastFailover: time.Duration(n.lstats.lastFailoverNs.Load()),
	}
	if at := n.lstats.leaderlessAt.Load(); at != 0 {
		s.LeaderlessSince = time.Unix(0, at)
	}
	return s
}

// watchLeaderChanges follows raft's leader observations (registered in Open) until shutdown.
// Observations are dropped rather than block Raft when this goroutine lags; the next one
// carries the current leader, so only intermediate flips can be missed.
func (n *Node) watchLeaderChanges(ch <-chan raft.Observation) {
	defer n.observerWG.Done()
	if _, id := n.raft.LeaderWithID(); id != "" {
		n.noteLeader(id, time.Now()) // elected before the observer was registered
	}
	for {
		select {
		case <-n.stop:
			return
		case o := <-ch:
			if lo, ok := o.Data.(raft.LeaderObservation); ok {
				n.noteLeader(lo.LeaderID, time.Now())
			}
		}
	}
}

// noteLeader updates the stats for an observed leader id ("" = none) seen at now.
func (n *Node) noteLeader(id raft.ServerID, now time.Time) {
	s := &n.lstats
	if id == "" {
		if s.hadLeader && s.leaderlessAt.Load() == 0 {
			start := now
			if lc := n.raft.LastContact(); !lc.IsZero() && lc.Before(now) {
				start = lc
			}
			s.leaderlessAt.Store(start.UnixNano())
		}
		return
	}
	lostAt := s.leaderlessAt.Swap(0)
	if id == s.leader && lostAt == 0 && s.hadLeader {
		return // the same leader, no spell without one in between
	}
	s.changes.Add(1)
	if lostAt != 0 {
		s.lastFailoverNs.Store(now.UnixNano() - lostAt)
	}
	s.hadLeader, s.leader = true, id
}
