package dledger

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Raft's own log lines about a peer that does not answer: while a follower is down the leader
// writes "failed to heartbeat to" and "failed to appendEntries to" several times a second, and a
// candidate "failed to make requestVote RPC" at every election. peerLog collapses them, per
// peer: one WARN at the first failure, a WARN summary with the count every peerLogSummaryEvery
// while the failures go on, and an INFO when the peer answers again (the leader pipelines to it
// once more) or nothing failed against it for peerLogQuietAfter. The few ERROR lines raft writes
// for an ordinary change of leader or a follower that needs a snapshot (warnInstead) are
// written at WARN. Every other line passes through unchanged: an ERROR from raft is then
// something an operator must look at (its log store, snapshots, state files;
// docs/operations.md "Log levels").

// peerFailureMsgs are the hashicorp/raft messages peerLog collapses (raft's replication.go and
// raft.go in v1.8); the peer is the "peer" or "target" argument.
var peerFailureMsgs = map[string]bool{
	"failed to heartbeat to":                  true,
	"failed to appendEntries to":              true,
	"failed to pipeline appendEntries":        true,
	"failed to start pipeline replication to": true,
	"failed to make requestVote RPC":          true,
	"failed to send snapshot to":              true,
	"failed to install snapshot":              true, // only the leader's line names a peer
}

// peerWarnMsg is raft's ERROR line for the expected end of a leadership, not a fault of this
// node: a leader that was paused, cut off or outvoted learns from a follower that a newer term
// began (raft's replication.go). The node steps down and follows the new leader by itself.
const peerWarnMsg = "peer has newer term, stopping replication"

// logNotFoundMsg is raft's ERROR line for an entry missing from the log store. With
// raft.ErrLogNotFound on the leader's replication path it means a follower (a new node, or one
// down for long) needs entries already compacted into a snapshot, and raft sends it that
// snapshot next. raft's other callers of this line panic right after it, so the panic still
// reports a log store that lost an entry it must have.
const logNotFoundMsg = "failed to get log"

// warnInstead reports whether a raft ERROR line is an expected event that is written at WARN.
func warnInstead(msg string, args []any) bool {
	switch msg {
	case peerWarnMsg:
		return true
	case logNotFoundMsg:
		err, _ := argValue(args, "error").(error)
		return errors.Is(err, raft.ErrLogNotFound)
	}
	return false
}

// argValue returns the value of key in hclog's alternating key/value args, or nil.
func argValue(args []any, key string) any {
	for i := 0; i+1 < len(args); i += 2 {
		if k, _ := args[i].(string); k == key {
			return args[i+1]
		}
	}
	return nil
}

// peerRecoveredMsg is raft's INFO line when it starts pipelining to a follower again, which it
// does only after an AppendEntries to that follower succeeded.
const peerRecoveredMsg = "pipelining replication"

const (
	peerLogSummaryEvery = 30 * time.Second
	peerLogQuietAfter   = 10 * time.Second
)

// peerLog is the hclog.Logger given to raft. Loggers derived from it (Named, With) share its
// per-peer state.
type peerLog struct {
	hclog.Logger
	st *peerLogState
}

// peerLogState is the per-peer failure bookkeeping behind a peerLog.
type peerLogState struct {
	mu           sync.Mutex
	peers        map[string]*peerFailures
	summaryEvery time.Duration
	quietAfter   time.Duration
	now          func() time.Time
	timer        *time.Timer // quiet check, armed while some peer is failing
	closed       bool
	out          hclog.Logger // where the quiet check writes
}

// peerFailures is one failing peer's record.
type peerFailures struct {
	first, last, summarized time.Time
	total, sinceSummary     int
	lastMsg                 string
	lastErr                 any
}

// newPeerLog wraps l (raft's logger) with the per-peer failure filter.
func newPeerLog(l hclog.Logger) *peerLog {
	return &peerLog{Logger: l, st: &peerLogState{
		peers: map[string]*peerFailures{}, summaryEvery: peerLogSummaryEvery, quietAfter: peerLogQuietAfter, now: time.Now, out: l,
	}}
}

// close stops the quiet check; the node calls it at shutdown. A nil peerLog is a no-op.
func (p *peerLog) close() {
	if p == nil {
		return
	}
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.closed = true
	if p.st.timer != nil {
		p.st.timer.Stop()
	}
}

// Error collapses per-peer failures, writes the expected events of warnInstead at WARN and
// passes every other ERROR through.
func (p *peerLog) Error(msg string, args ...any) {
	switch {
	case p.collapse(msg, args):
	case warnInstead(msg, args):
		p.Logger.Warn(msg, args...)
	default:
		p.Logger.Error(msg, args...)
	}
}

func (p *peerLog) Warn(msg string, args ...any) {
	if !p.collapse(msg, args) {
		p.Logger.Warn(msg, args...)
	}
}

func (p *peerLog) Info(msg string, args ...any) {
	if msg == peerRecoveredMsg {
		p.recovered(args)
	}
	p.Logger.Info(msg, args...)
}

func (p *peerLog) Log(level hclog.Level, msg string, args ...any) {
	switch level {
	case hclog.Error:
		p.Error(msg, args...)
	case hclog.Warn:
		p.Warn(msg, args...)
	case hclog.Info:
		p.Info(msg, args...)
	default:
		p.Logger.Log(level, msg, args...)
	}
}

func (p *peerLog) Named(name string) hclog.Logger {
	return &peerLog{Logger: p.Logger.Named(name), st: p.st}
}

func (p *peerLog) ResetNamed(name string) hclog.Logger {
	return &peerLog{Logger: p.Logger.ResetNamed(name), st: p.st}
}

func (p *peerLog) With(args ...any) hclog.Logger {
	return &peerLog{Logger: p.Logger.With(args...), st: p.st}
}

// peerOf returns the peer named by the "peer" or "target" argument, as its address.
func peerOf(args []any) (string, any, bool) {
	var peer string
	var errVal any
	for i := 0; i+1 < len(args); i += 2 {
		k, _ := args[i].(string)
		switch k {
		case "peer", "target":
			switch v := args[i+1].(type) {
			case raft.Server:
				peer = string(v.Address)
			case raft.ServerAddress:
				peer = string(v)
			default:
				peer = fmt.Sprint(v)
			}
		case "error":
			errVal = args[i+1]
		}
	}
	return peer, errVal, peer != ""
}

// collapse records a known per-peer failure and logs what is due (the first WARN or a
// summary); it reports whether msg was such a failure (and so must not be logged as is).
func (p *peerLog) collapse(msg string, args []any) bool {
	if !peerFailureMsgs[msg] {
		return false
	}
	peer, errVal, ok := peerOf(args)
	if !ok {
		return false
	}
	st := p.st
	st.mu.Lock()
	now := st.now()
	f := st.peers[peer]
	if f == nil {
		f = &peerFailures{first: now, summarized: now}
		st.peers[peer] = f
		st.armLocked()
	}
	f.total++
	f.sinceSummary++
	f.last, f.lastMsg, f.lastErr = now, msg, errVal
	first := f.total == 1
	var summary []any
	if !first && now.Sub(f.summarized) >= st.summaryEvery {
		summary = []any{"peer", peer, "failures", f.sinceSummary, "total", f.total, "for", now.Sub(f.first).Round(time.Second), "last", msg, "error", errVal}
		f.summarized, f.sinceSummary = now, 0
	}
	st.mu.Unlock()
	switch {
	case first:
		p.Logger.Warn("peer does not answer; further failed RPCs to it are counted and summarized every "+st.summaryEvery.String(),
			"peer", peer, "rpc", msg, "error", errVal)
	case summary != nil:
		p.Logger.Warn("peer still does not answer", summary...)
	}
	return true
}

// recovered logs an INFO when a failing peer is replicated to again.
func (p *peerLog) recovered(args []any) {
	peer, _, ok := peerOf(args)
	if !ok {
		return
	}
	p.st.mu.Lock()
	f := p.st.peers[peer]
	delete(p.st.peers, peer)
	now := p.st.now()
	p.st.mu.Unlock()
	if f != nil {
		p.Logger.Info("peer answers again", "peer", peer, "failures", f.total, "down_for", now.Sub(f.first).Round(time.Millisecond))
	}
}

// armLocked starts the quiet check if it is not running. Caller holds mu.
func (st *peerLogState) armLocked() {
	if st.closed || st.timer != nil {
		return
	}
	st.timer = time.AfterFunc(st.quietAfter, st.quietCheck)
}

// quietCheck ends the record of every peer nothing failed against for quietAfter (raft stopped
// contacting it, or it answers again on a path that logs nothing), with an INFO, and re-arms
// itself while records remain.
func (st *peerLogState) quietCheck() {
	type done struct {
		peer string
		f    *peerFailures
	}
	var ended []done
	st.mu.Lock()
	now := st.now()
	for peer, f := range st.peers {
		if now.Sub(f.last) >= st.quietAfter {
			ended = append(ended, done{peer, f})
			delete(st.peers, peer)
		}
	}
	st.timer = nil
	if len(st.peers) > 0 && !st.closed {
		st.timer = time.AfterFunc(st.quietAfter, st.quietCheck)
	}
	out := st.out
	st.mu.Unlock()
	for _, d := range ended {
		out.Info("no failed RPC to peer for "+st.quietAfter.String()+" (it answers again, or nothing contacts it now)",
			"peer", d.peer, "failures", d.f.total, "over", d.f.last.Sub(d.f.first).Round(time.Millisecond))
	}
}
