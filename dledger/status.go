package dledger

import (
	"time"
)

// Status is a point-in-time view of a node for mqadmin and the HTTP status page.
type Status struct {
	Group        string `json:"group"`
	ID           string `json:"id"`
	Addr         string `json:"addr"`
	State        string `json:"state"`       // Follower, Candidate, Leader, Shutdown
	LeaderReady  bool   `json:"leaderReady"` // leader and everything committed before its term applied
	Term         uint64 `json:"term"`
	LastLogIndex uint64 `json:"lastLogIndex"`
	CommitIndex  uint64 `json:"commitIndex"`
	AppliedIndex uint64 `json:"appliedIndex"`
	LeaderID     string `json:"leaderId"`
	LeaderAddr   string `json:"leaderAddr"`
	// LastContact is when a follower last heard from the leader (zero if never; a leader reports
	// now).
	LastContact   time.Time      `json:"lastContact"`
	Configuration []ServerStatus `json:"configuration"`
	// LogCacheEntries and LogCacheBytes are what the in-memory cache of the newest log entries
	// holds (dLegerLogCacheMB bounds it).
	LogCacheEntries int `json:"logCacheEntries"`
	LogCacheBytes   int `json:"logCacheBytes"`
	// LogStoreMismatch is why this node refuses its leader's entries, while it does: the leader
	// proposes on the other kind of Raft log store (storeguard.go). The node stays behind until an
	// operator gives the group one dLegerLogStore.
	LogStoreMismatch string `json:"logStoreMismatch,omitempty"`
}

// ServerStatus is one member of the latest configuration (possibly not yet committed).
type ServerStatus struct {
	ID       string `json:"id"`
	Addr     string `json:"addr"`
	Suffrage string `json:"suffrage"` // Voter, Nonvoter, Staging
}

// Status reports the node's Raft state.
func (n *Node) Status() Status {
	r := n.raft
	s := Status{
		Group:        n.cfg.Group,
		ID:           n.cfg.SelfID,
		Addr:         n.Addr(),
		State:        r.State().String(),
		LeaderReady:  n.leaderReady.Load(),
		Term:         r.CurrentTerm(),
		LastLogIndex: r.LastIndex(),
		LastContact:  r.LastContact(),
	}
	var fsmApplied uint64
	if n.fsmApplied != nil {
		fsmApplied = n.fsmApplied.AppliedIndex()
	}
	s.CommitIndex, s.AppliedIndex = reportedIndexes(r.CommitIndex(), r.AppliedIndex(), fsmApplied)
	s.LeaderID, s.LeaderAddr = n.Leader()
	if s.State == "Leader" {
		s.LastContact = time.Now()
	}
	if n.cache != nil {
		if first, last, size := n.cache.cached(); first != 0 {
			s.LogCacheEntries, s.LogCacheBytes = int(last-first+1), size
		}
	}
	if n.guard.refusing != nil {
		s.LogStoreMismatch = n.guard.refusal()
	}
	if f := r.GetConfiguration(); f.Error() == nil {
		for _, sv := range f.Configuration().Servers {
			s.Configuration = append(s.Configuration, ServerStatus{ID: string(sv.ID), Addr: string(sv.Address), Suffrage: sv.Suffrage.String()})
		}
	}
	return s
}

// appliedIndexer is a state machine that knows the index of the last entry whose effects it holds,
// restored from its own storage when the node starts (fsm.FSM does).
type appliedIndexer interface {
	AppliedIndex() uint64
}

// reportedIndexes returns the commit and applied indexes a status shows. After a restart Raft's
// own indexes start from the last snapshot (commit 0 with none) until the leader's first
// heartbeat and the replay of the log catch up, while a state machine that persists its
// progress already holds every entry up to fsmApplied: the status reports that, and a commit
// index not below it (an entry is applied only once committed).
func reportedIndexes(raftCommit, raftApplied, fsmApplied uint64) (commit, applied uint64) {
	applied = max(raftApplied, fsmApplied)
	return max(raftCommit, applied), applied
}
