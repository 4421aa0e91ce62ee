package dledger

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// One proposal path. Every entry this node proposes (Node.Apply, Batcher) goes through propose,
// so that a Config.Sequencer sees entries in exactly the order they enter Raft's log: the
// sequencer stamps and raft.Apply hands off under one node-wide lock (Node.proposeMu), and the
// lock is released as soon as the hand-off returns, so entries stay pipelined (the Batcher's
// in-flight entries are awaited outside it).

// proposeBarrierWait bounds the sequencer's barrier when the proposal has no bound of its own
// (Node.Apply without a deadline).
const proposeBarrierWait = applyEnqueueTimeout

// propose hands data to Raft as one entry, with timeout bounding the hand-off (0: none). Without
// a Sequencer it is raft.Apply. With one, data is stamped first (a Stamp error fails the returned
// future and data never reaches Raft), and the returned future tells the Sequencer (Lost) when
// the entry failed in Raft instead of being applied.
func (n *Node) propose(data []byte, timeout time.Duration) raft.ApplyFuture {
	// Extensions: which kind of leader proposed it (storeguard.go).
	entry := raft.Log{Data: data, Extensions: EntryExtensions(n.cfg.LogStore)}
	seq := n.cfg.Sequencer
	if seq == nil {
		return n.raft.ApplyLog(entry, timeout)
	}
	n.proposeMu.Lock()
	defer n.proposeMu.Unlock()
	barrier := func() error { return n.proposalBarrier(timeout) }
	if err := seq.Stamp(data, n.raft.CurrentTerm(), barrier); err != nil {
		return errorFuture{err: fmt.Errorf("dledger: stamp entry: %w", err)}
	}
	return &stampedFuture{ApplyFuture: n.raft.ApplyLog(entry, timeout), seq: seq}
}

// proposalBarrier waits until every entry already in the log is applied on this node, for at most
// timeout (proposeBarrierWait when 0). Raft's errors (raft.ErrNotLeader, ...) are returned as
// they are, for translate.
func (n *Node) proposalBarrier(timeout time.Duration) error {
	if timeout <= 0 {
		timeout = proposeBarrierWait
	}
	deadline := time.Now().Add(timeout)
	f := n.raft.Barrier(timeout)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-n.stop:
		return raft.ErrRaftShutdown
	case <-t.C:
		return fmt.Errorf("dledger: barrier not applied within %v: %w", timeout, raft.ErrEnqueueTimeout)
	}
}

// stampedFuture is the future of an entry a Sequencer stamped: the first Error that is not nil
// (the entry was not applied: not enqueued in time, not the leader, leadership lost, shut down)
// calls the Sequencer's Lost, before the caller sees it.
type stampedFuture struct {
	raft.ApplyFuture
	seq  Sequencer
	lost atomic.Bool
}

// Error returns the entry's outcome, telling the Sequencer once when it failed.
func (f *stampedFuture) Error() error {
	err := f.ApplyFuture.Error()
	if err != nil && f.lost.CompareAndSwap(false, true) {
		f.seq.Lost()
	}
	return err
}

// errorFuture is a proposal that failed before reaching Raft.
type errorFuture struct{ err error }

// Error returns the failure.
func (f errorFuture) Error() error { return f.err }

// Index is 0: the entry has none.
func (f errorFuture) Index() uint64 { return 0 }

// Response is nil: nothing was applied.
func (f errorFuture) Response() any { return nil }
