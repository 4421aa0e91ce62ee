package dledger

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Bounds on the terms inbound RPCs may carry.
//
// hashicorp/raft adopts any higher term it is sent and keeps it for good (it is persisted), so
// one forged RequestVote with term 2^64-1 left a group whose every later election wrapped to
// term 0 and was refused. A term only ever grows by one per election, so a peer far ahead of us
// is not a peer; a node that really fell far behind still catches up, because the answers to its
// own (pre-)vote requests carry the group's term and answers are not gated.
const (
	// maxTermJump is how far ahead of this node's current term an RPC's term may be.
	maxTermJump = 1000
	// maxTerm is the highest term accepted at all: 2^62 elections are out of reach, and terms
	// stay far from wrapping.
	maxTerm = 1 << 62
)

// raftView is what the gate reads of Raft: atomics and a read lock, nothing that waits for
// Raft's main loop (*raft.Raft implements it).
type raftView interface {
	CurrentTerm() uint64
	LeaderWithID() (raft.ServerAddress, raft.ServerID)
	GetConfiguration() raft.ConfigurationFuture
}

// rpcGate checks each inbound RPC against this node's Raft state before Raft sees it
// (inbound.go). It applies whether or not peer authentication is on:
//
//   - a term beyond maxTerm, or more than maxTermJump ahead of ours, is refused (a fresh node
//     with term 0 accepts any term up to maxTerm: it may join a group that is long past 1000);
//   - TimeoutNow ("campaign now", which makes Raft ignore its leader) is honoured only from the
//     leader this node follows; this node's own fast-failover campaign does not come through
//     here (inbound.local);
//   - a RequestVote flagged LeadershipTransfer (which makes voters ignore the leader they have)
//     keeps the flag only when its term is exactly ours plus one (the transfer target campaigns
//     right after the leader's TimeoutNow) and its candidate is a voter; otherwise it is an
//     ordinary vote request, which Raft refuses while it has a leader.
//
// The AppendEntries hot path costs one atomic load of the term.
type rpcGate struct {
	view atomic.Pointer[raftViewBox]
	warn *limitedLog
}

type raftViewBox struct{ raftView }

// attach starts gating against v (Open calls it once Raft exists; until then RPCs are refused,
// which the peers retry).
func (g *rpcGate) attach(v raftView) { g.view.Store(&raftViewBox{v}) }

func (g *rpcGate) check(cmd any, remote string) error {
	b := g.view.Load()
	if b == nil {
		return fmt.Errorf("raft is starting")
	}
	v := b.raftView
	switch req := cmd.(type) {
	case *raft.AppendEntriesRequest:
		return g.checkTerm("AppendEntries", req.Term, v.CurrentTerm(), req.ID, remote)
	case *raft.RequestPreVoteRequest:
		return g.checkTerm("RequestPreVote", req.Term, v.CurrentTerm(), req.ID, remote)
	case *raft.InstallSnapshotRequest:
		return g.checkTerm("InstallSnapshot", req.Term, v.CurrentTerm(), req.ID, remote)
	case *raft.RequestVoteRequest:
		cur := v.CurrentTerm()
		if err := g.checkTerm("RequestVote", req.Term, cur, req.ID, remote); err != nil {
			return err
		}
		switch {
		case !req.LeadershipTransfer:
		case req.Term <= cur:
			// A late copy of a transfer's vote request: this node already holds its term (the
			// new leader's heartbeat came first). The flag only matters for a new term, so it
			// goes quietly; a warning here would cry wolf on every slow genuine transfer.
			req.LeadershipTransfer = false
		default:
			if why := transferVoteProblem(v, req, cur); why != "" {
				g.warn.Warn("transfer", "leadership-transfer flag dropped from a vote request: "+why,
					"remote", remote, "candidate", string(req.ID), "term", req.Term, "currentTerm", cur)
				req.LeadershipTransfer = false
			}
		}
	case *raft.TimeoutNowRequest:
		if _, leader := v.LeaderWithID(); leader == "" || string(req.ID) != string(leader) {
			g.warn.Warn("timeoutnow", "TimeoutNow refused: not from the leader this node follows",
				"remote", remote, "from", string(req.ID), "leader", string(leader))
			return fmt.Errorf("TimeoutNow from %q refused: this node's leader is %q", req.ID, leader)
		}
	}
	return nil
}

func (g *rpcGate) checkTerm(rpc string, term, cur uint64, id []byte, remote string) error {
	var err error
	switch {
	case term >= maxTerm:
		err = fmt.Errorf("%s term %d refused: beyond the ceiling %d", rpc, term, uint64(maxTerm))
	case cur > 0 && term > cur && term-cur > maxTermJump:
		err = fmt.Errorf("%s term %d refused: more than %d ahead of this node's term %d", rpc, term, maxTermJump, cur)
	default:
		return nil
	}
	g.warn.Warn("term", "raft RPC refused: its term is out of bounds", "remote", remote, "from", string(id), "rpc", rpc, "term", term, "currentTerm", cur)
	return err
}

// transferVoteProblem says why a vote request's LeadershipTransfer flag cannot be genuine
// ("" = it can).
func transferVoteProblem(v raftView, req *raft.RequestVoteRequest, cur uint64) string {
	if req.Term != cur+1 {
		return fmt.Sprintf("term %d is not this node's term + 1", req.Term)
	}
	f := v.GetConfiguration()
	if f.Error() != nil {
		return "no configuration"
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == string(req.ID) {
			if s.Suffrage == raft.Voter {
				return ""
			}
			return "the candidate is not a voter"
		}
	}
	return "the candidate is not a member"
}

// limitedLog logs a warning of each kind at most once per interval, counting the ones it
// drops, so a flood of refused RPCs cannot flood the log.
type limitedLog struct {
	log      hclog.Logger
	interval time.Duration

	mu    sync.Mutex
	kinds map[string]*limitState
}

type limitState struct {
	next    time.Time
	dropped int
}

func newLimitedLog(log hclog.Logger, interval time.Duration) *limitedLog {
	return &limitedLog{log: log, interval: interval, kinds: map[string]*limitState{}}
}

// Warn logs msg unless a message of kind was logged less than interval ago.
func (l *limitedLog) Warn(kind, msg string, args ...any) {
	now := time.Now()
	l.mu.Lock()
	st := l.kinds[kind]
	if st == nil {
		st = &limitState{}
		l.kinds[kind] = st
	}
	if now.Before(st.next) {
		st.dropped++
		l.mu.Unlock()
		return
	}
	dropped := st.dropped
	st.dropped, st.next = 0, now.Add(l.interval)
	l.mu.Unlock()
	if dropped > 0 {
		args = append(args, "alikeSuppressed", dropped)
	}
	l.log.Warn(msg, args...)
}
