package broker

import (
	"cmp"
	"context"
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
// commits. Until its entry is applied a commit stays visible through query (pending, then in
// flight), which the leader's QUERY_CONSUMER_OFFSET consults before the replicated table: a
// consumer reads back what it committed at once, and never a value older than the table's
// (the table only ever receives values that went through here first).
//
// A commit is acknowledged when queued, before it is replicated, as RocketMQ answers
// UPDATE_CONSUMER_OFFSET before persisting. If the leader dies, the commits of the last interval
// (plus the entry in flight) are lost, so a consumer may re-receive what it consumed in that
// window: at-least-once, as RocketMQ. A proposal that fails (leadership lost) drops its commits;
// the client commits its whole offset table again within its persist interval (5 s).
type offsetBatcher struct {
	propose    func(ctx context.Context, offs []fsm.OffsetCommit) error
	interval   time.Duration
	maxEntries int
	logger     hclog.Logger

	mu       sync.Mutex
	pending  map[offsetKey]int64
	inflight map[offsetKey]int64

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
		pending: map[offsetKey]int64{}, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go ob.run()
	return ob
}

// commit queues one offset for the next entry.
func (ob *offsetBatcher) commit(group, topic string, qid int32, off int64) {
	ob.mu.Lock()
	ob.pending[offsetKey{group, topic, qid}] = off
	full := len(ob.pending) >= ob.maxEntries
	ob.mu.Unlock()
	if full {
		select {
		case ob.kick <- struct{}{}:
		default:
		}
	}
}

// query returns the latest offset committed here that is not yet applied, if any.
func (ob *offsetBatcher) query(group, topic string, qid int32) (int64, bool) {
	k := offsetKey{group, topic, qid}
	ob.mu.Lock()
	defer ob.mu.Unlock()
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
		ob.mu.Unlock()
		return
	}
	batch := ob.pending
	ob.pending, ob.inflight = map[offsetKey]int64{}, batch
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
	ob.mu.Unlock()
}

// drop forgets every queued commit (this node is no longer the leader: its proposals would fail).
func (ob *offsetBatcher) drop() {
	ob.mu.Lock()
	n := len(ob.pending)
	clear(ob.pending)
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
