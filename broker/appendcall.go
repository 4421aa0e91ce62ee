package broker

import (
	"time"

	"rocketraft/metrics"
	"rocketraft/storage"
)

// appendCall is one asynchronous append (asyncCommitLog): the records, what this node learns
// with them, and who hears the outcome. The caller embeds it in its own in-flight state and each
// commit log on the way sets the fields it needs on it, rather than wrapping the callback in a
// closure of its own: a send in flight is one object of the sender's, the batcher's slot
// included, where the callbacks, the proposal and the slot were seven more (an allocation costs
// about 0.8 % of a leader's CPU at 2048 sends in flight).
type appendCall struct {
	// proposal is what the Raft batcher takes (raftgroup.go); its records and scans (the send
	// plan's read of their properties, or nil) are the caller's.
	proposal
	// deadline drops the records if they still wait to be proposed then
	// (context.DeadlineExceeded).
	deadline time.Time
	// received is when the send request was decoded (a sendtrace stamp; 0: not traced).
	received int64
	// done hears the outcome exactly once, and must not block.
	done appendDone
	// timer is timedCommitLog's histogram (nil: not timed), start when the append began
	// (monoNow).
	timer *metrics.Histogram
	start time.Duration
	// slot is the Raft batcher's record of the proposal while it is queued and in an entry.
	slot appendSlot
}

// appendDone is who waits for an appendCall.
type appendDone interface {
	appended(results []storage.AppendResult, err error)
}

// finish hands the outcome on, timing a successful append first.
func (c *appendCall) finish(results []storage.AppendResult, err error) {
	if c.timer != nil && err == nil {
		c.timer.ObserveDuration(monoNow() - c.start)
	}
	c.done.appended(results, err)
}

// monoBase anchors monoNow.
var monoBase = time.Now()

// monoNow is the time since the process started, from the monotonic clock alone: time.Now reads
// the wall clock too, two clock reads where a duration needs one (about 0.1 us each on the
// virtual machines the benchmarks run on, on every send).
func monoNow() time.Duration { return time.Since(monoBase) }
