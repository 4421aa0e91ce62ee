package dledger

import (
	"sync"

	"github.com/hashicorp/raft"

	"rocketraft/internal/sendtrace"
)

// nodeTrace is a node's part of send tracing (Config.SendTrace, package sendtrace): the
// milestones of its entries as leader and of the AppendEntries it handles as follower, recorded
// by Raft index, and the follower's completed AppendEntries traces. A nil *nodeTrace records
// nothing.
type nodeTrace struct {
	entries  *sendtrace.Entries   // as leader: written, replicated, synced, applying, applied
	follower *sendtrace.Entries   // as follower, by an AppendEntries' last index: storing, written, synced
	appends  *sendtrace.Collector // as follower: completed AppendEntries
}

func newNodeTrace() *nodeTrace {
	return &nodeTrace{entries: sendtrace.NewEntries(), follower: sendtrace.NewEntries(), appends: sendtrace.NewCollector(sendtrace.FollowerStages)}
}

// leaderEntries is nil when tracing is off.
func (t *nodeTrace) leaderEntries() *sendtrace.Entries {
	if t == nil {
		return nil
	}
	return t.entries
}

// followerEntries is nil when tracing is off.
func (t *nodeTrace) followerEntries() *sendtrace.Entries {
	if t == nil {
		return nil
	}
	return t.follower
}

// appendTrace is a follower's trace of one AppendEntries that carried entries, the last of
// which is index (0: not traced).
type appendTrace struct {
	sendtrace.Trace
	index uint64
}

// appended completes a follower's trace of one AppendEntries once its answer is on the
// connection.
func (t *nodeTrace) appended(tr *appendTrace) {
	if t == nil || tr.index == 0 {
		return
	}
	t.follower.Fill(tr.index, &tr.Trace)
	tr.Mark(sendtrace.FollowerAnswered)
	t.appends.Add(&tr.Trace)
}

// markRange marks every entry of logs as having reached s.
func markLogs(e *sendtrace.Entries, logs []*raft.Log, s sendtrace.Stage) {
	if e == nil || len(logs) == 0 {
		return
	}
	e.MarkRange(logs[0].Index, logs[len(logs)-1].Index, s)
}

// FollowerTrace reports this node's AppendEntries traces as follower (empty unless
// Config.SendTrace; a nil node has none).
func (n *Node) FollowerTrace() sendtrace.Report {
	if n == nil || n.trace == nil {
		return sendtrace.Report{Stages: sendtrace.FollowerStages}
	}
	return n.trace.appends.Report()
}

// ResetTrace forgets the follower traces kept so far (a benchmark's warm-up).
func (n *Node) ResetTrace() {
	if n != nil && n.trace != nil {
		n.trace.appends.Reset()
	}
}

// SendTraced reports whether sends through this node are traced (Config.SendTrace).
func (n *Node) SendTraced() bool { return n != nil && n.trace != nil }

// tracedPipeline marks, as each pipelined AppendEntries answer arrives, its entries as
// replicated. The answers are relayed through one goroutine per pipeline, so tracing adds one
// hand-off to the path it measures; without tracing the pipeline is not wrapped.
type tracedPipeline struct {
	raft.AppendPipeline
	out       chan raft.AppendFuture
	closed    chan struct{}
	closeOnce sync.Once
}

func newTracedPipeline(p raft.AppendPipeline, e *sendtrace.Entries) *tracedPipeline {
	tp := &tracedPipeline{AppendPipeline: p, out: make(chan raft.AppendFuture), closed: make(chan struct{})}
	go tp.relay(e)
	return tp
}

// relay passes the pipeline's answers on until Close (the library never closes its channel).
func (p *tracedPipeline) relay(e *sendtrace.Entries) {
	in := p.AppendPipeline.Consumer()
	for {
		select {
		case f := <-in:
			if f.Error() == nil {
				if req, resp := f.Request(), f.Response(); req != nil && resp != nil && resp.Success {
					markLogs(e, req.Entries, sendtrace.Replicated)
				}
			}
			select {
			case p.out <- f:
			case <-p.closed:
				return
			}
		case <-p.closed:
			return
		}
	}
}

// Consumer returns the relayed answers.
func (p *tracedPipeline) Consumer() <-chan raft.AppendFuture { return p.out }

// Close stops the relay and closes the pipeline.
func (p *tracedPipeline) Close() error {
	p.closeOnce.Do(func() { close(p.closed) })
	return p.AppendPipeline.Close()
}
