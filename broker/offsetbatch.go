package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/fsm"
)

// Offset batching defaults: a commitOffsets entry at most every offsetBatchInterval, or sooner
// once offsetBatchMaxEntries distinct queues are waiting.
const (
	offsetBatchInterval   = 100 * time.Millisecond
	offsetBatchMaxEntries = 1024
	offsetBatchTimeout    = 5 * time.Second
)

// seqRange is the commit sequence numbers (from, to].
type seqRange struct{ from, to uint64 }

// maxLostRanges bounds offsetBatcher.lost; a waiter older than the oldest range kept is assumed
// applied, which needs that many leadership losses while it waits.
const maxLostRanges = 64

type offsetKey struct {
	group, topic string
	queueID      int32
}

// offsetBatcher collects consumer-offset commits on the DLedger leader and proposes them as one
// fsm commitOffsets entry per interval (or per maxEntries distinct queues), so a busy group costs
// a few Raft entries per second, not one per commit. Commits to the same queue coalesce: only the
// latest value is proposed (the replicated apply overwrites, in log order).
//
// One entry is in flight at a time, so entries commit in the order the leader received the
// commits. QUERY_CONSUMER_OFFSET on the leader first waits until every commit queued before it
// has settled (its entry applied, or dropped with the leadership), kicking an immediate flush,
// and then answers from the replicated table only: a consumer reads back what it committed (the
// Go client sends a oneway update and queries right after it when it applies a reset), and a
// value any client has read is committed in Raft, so no reader sees a group's offset go back
// after a failover. Internal readers (transaction checks, POP) use committedOffset, which also
// sees the queued values.
//
// A oneway UPDATE_CONSUMER_OFFSET (how the Go and Java clients persist offsets) and a commit
// carried by a pull are taken when queued, before they are replicated; an UPDATE_CONSUMER_OFFSET
// that expects an answer is answered only once its entry is applied (waitCommitted), so every
// acknowledged commit survives a failover. If the leader dies, the
// commits of the last interval (plus the entry in flight) are lost, so a consumer may
// re-receive what it consumed in that window: at-least-once, as RocketMQ; its next persist (every
// 5 s) commits its whole offset table again. A proposal that fails (leadership lost) drops its
// commits the same way.
type offsetBatcher struct {
	propose    func(ctx context.Context, offs []fsm.OffsetCommit) error
	interval   time.Duration
	maxEntries int
	logger     hclog.Logger

	mu       sync.Mutex
	pending  map[offsetKey]int64
	inflight map[offsetKey]int64
	// queued counts commits ever queued (a commit's sequence number is the count after it);
	// taken is the count handed to proposals or dropped; settled the count whose entry was
	// applied or dropped; settledCh is closed (and replaced) whenever settled moves. lost holds
	// the sequence ranges that were dropped or whose proposal failed (leadership losses: few).
	queued, taken, settled uint64
	settledCh              chan struct{}
	lost                   []seqRange

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func newOffsetBatcher(propose func(context.Context, []fsm.OffsetCommit) error, interval time.Duration, maxEntries int, logger hclog.Logger) *offsetBatcher {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	ob := &offsetBatcher{
		propose: propose, interval: interval, maxEntries: maxEntries, logger: logger,
		pending: map[offsetKey]int64{}, kick: make(chan struct{}, 1), settledCh: make(chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go ob.run()
	return ob
}

// commit queues one offset for the next entry and returns its sequence number.
func (ob *offsetBatcher) commit(group, topic string, qid int32, off int64) uint64 {
	seq, _ := ob.enqueue(offsetKey{group, topic, qid}, off, nil)
	return seq
}

// commitAhead queues off like commit unless the queue's latest value (queued, in flight, else
// replicated(), read under the batcher's lock so no commit slips in between) is already beyond
// it; it reports whether it queued.
func (ob *offsetBatcher) commitAhead(group, topic string, qid int32, off int64, replicated func() (int64, bool)) bool {
	_, queued := ob.enqueue(offsetKey{group, topic, qid}, off, replicated)
	return queued
}

// commitAheadSeq is commitAhead returning the queued commit's sequence number too (0 when it
// did not queue), for a caller that waits for it to be replicated.
func (ob *offsetBatcher) commitAheadSeq(group, topic string, qid int32, off int64, replicated func() (int64, bool)) (uint64, bool) {
	return ob.enqueue(offsetKey{group, topic, qid}, off, replicated)
}

// enqueue queues off for k, unconditionally when replicated is nil, else only if it is not
// below k's latest value (see commitAhead), and kicks a flush once maxEntries queues wait.
func (ob *offsetBatcher) enqueue(k offsetKey, off int64, replicated func() (int64, bool)) (seq uint64, queued bool) {
	ob.mu.Lock()
	if replicated != nil {
		cur, ok := ob.latestLocked(k)
		if !ok {
			cur, ok = replicated()
		}
		if ok && off < cur {
			ob.mu.Unlock()
			return 0, false
		}
	}
	ob.pending[k] = off
	ob.queued++
	seq = ob.queued
	full := len(ob.pending) >= ob.maxEntries
	ob.mu.Unlock()
	if full {
		ob.kickFlush()
	}
	return seq, true
}

// errOffsetNotReplicated: the commit was dropped or its entry failed (leadership lost).
var errOffsetNotReplicated = errors.New("consumer offset commit not replicated: this broker stopped leading its group; commit it again")

// waitCommitted waits until the commit numbered seq is applied to the replicated table (a later
// commit of the same queue in the same entry counts), and reports when it was dropped instead.
func (ob *offsetBatcher) waitCommitted(ctx context.Context, seq uint64) error {
	if !ob.waitUntil(ctx, seq) {
		return fmt.Errorf("consumer offset commit not replicated yet: %w", ctx.Err())
	}
	ob.mu.Lock()
	defer ob.mu.Unlock()
	for _, r := range ob.lost {
		if seq > r.from && seq <= r.to {
			return errOffsetNotReplicated
		}
	}
	return nil
}

// markLost records (from, to] as dropped. Callers hold mu.
func (ob *offsetBatcher) markLost(from, to uint64) {
	if to <= from {
		return
	}
	ob.lost = append(ob.lost, seqRange{from, to})
	if len(ob.lost) > maxLostRanges {
		ob.lost = slices.Delete(ob.lost, 0, len(ob.lost)-maxLostRanges)
	}
}

func (ob *offsetBatcher) kickFlush() {
	select {
	case ob.kick <- struct{}{}:
	default:
	}
}

// settle marks every commit counted up to n as settled. Callers hold mu.
func (ob *offsetBatcher) settle(n uint64) {
	if n > ob.settled {
		ob.settled = n
		close(ob.settledCh)
		ob.settledCh = make(chan struct{})
	}
}

// waitSettled waits until every commit queued before the call has settled: applied to the
// replicated table, or dropped because this node stopped leading. It asks for an immediate flush
// rather than waiting for the interval, and gives up (false) when ctx ends.
func (ob *offsetBatcher) waitSettled(ctx context.Context) bool {
	ob.mu.Lock()
	target := ob.queued
	ob.mu.Unlock()
	return ob.waitUntil(ctx, target)
}

// waitUntil waits until settled reaches target, kicking flushes; false when ctx ends first.
func (ob *offsetBatcher) waitUntil(ctx context.Context, target uint64) bool {
	ob.mu.Lock()
	for ob.settled < target {
		ch := ob.settledCh
		ob.mu.Unlock()
		ob.kickFlush()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
		ob.mu.Lock()
	}
	ob.mu.Unlock()
	return true
}

// query returns the latest offset committed here that is not yet applied, if any.
func (ob *offsetBatcher) query(group, topic string, qid int32) (int64, bool) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	return ob.latestLocked(offsetKey{group, topic, qid})
}

// latestLocked is k's queued value, else its value in flight. Callers hold mu.
func (ob *offsetBatcher) latestLocked(k offsetKey) (int64, bool) {
	if off, ok := ob.pending[k]; ok {
		return off, true
	}
	off, ok := ob.inflight[k]
	return off, ok
}

func (ob *offsetBatcher) run() {
	defer close(ob.done)
	t := time.NewTicker(ob.interval)
	defer t.Stop()
	for {
		select {
		case <-ob.stop:
			return
		case <-t.C:
		case <-ob.kick:
		}
		ob.flush()
	}
}

// flush proposes everything pending as one entry and waits for it.
func (ob *offsetBatcher) flush() {
	ob.mu.Lock()
	if len(ob.pending) == 0 {
		ob.settle(ob.queued) // commits dropped while an entry was in flight
		ob.mu.Unlock()
		return
	}
	batch := ob.pending
	ob.pending, ob.inflight = map[offsetKey]int64{}, batch
	from, upTo := ob.taken, ob.queued
	ob.taken = upTo
	ob.mu.Unlock()

	offs := make([]fsm.OffsetCommit, 0, len(batch))
	for k, v := range batch {
		offs = append(offs, fsm.OffsetCommit{Group: k.group, Topic: k.topic, QueueID: k.queueID, Offset: v})
	}
	slices.SortFunc(offs, func(a, b fsm.OffsetCommit) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.QueueID, b.QueueID))
	})
	ctx, cancel := context.WithTimeout(context.Background(), offsetBatchTimeout)
	err := ob.propose(ctx, offs)
	cancel()
	if err != nil {
		ob.logger.Warn("consumer offsets not replicated; dropped (clients commit them again)", "offsets", len(offs), "error", err)
	}
	ob.mu.Lock()
	ob.inflight = nil
	if err != nil {
		ob.markLost(from, upTo)
	}
	ob.settle(upTo)
	ob.mu.Unlock()
}

// drop forgets every queued commit (this node is no longer the leader: its proposals would fail).
func (ob *offsetBatcher) drop() {
	ob.mu.Lock()
	n := len(ob.pending)
	clear(ob.pending)
	ob.markLost(ob.taken, ob.queued)
	ob.taken = ob.queued
	if ob.inflight == nil {
		ob.settle(ob.queued)
	} // else the flush in progress settles everything once its proposal fails
	ob.mu.Unlock()
	if n > 0 {
		ob.logger.Warn("leadership lost; queued consumer offsets dropped (clients commit them again)", "offsets", n)
	}
}

// close stops the loop and proposes what is still queued (a clean shutdown loses no commit
// while this node is still the leader).
func (ob *offsetBatcher) close() {
	ob.once.Do(func() {
		close(ob.stop)
		<-ob.done
		ob.flush()
	})
}
