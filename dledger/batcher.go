package dledger

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"rocketraft/internal/sendtrace"
)

// Batcher defaults.
const (
	DefaultBatchMaxBytes    = 4 << 20
	DefaultBatchMaxItems    = 4096
	DefaultBatchMaxInFlight = 4
	DefaultBatchLinger      = 0 // no linger: in-flight entries alone provide the batching window
)

// Result is one item's part of an entry's FSM response.
type Result[R any] struct {
	Value R
	Err   error
}

// BatchCodec plugs an entry format into a Batcher. The broker plugs in the fsm codec:
//
//	dledger.BatchCodec[[][]byte, []storage.AppendResult]{
//		Encode: fsm.EncodeMessages,
//		Size:   func(recs [][]byte) (n int) { for _, r := range recs { n += len(r) }; return n },
//		Split: func(resp any, n int) ([]dledger.Result[[]storage.AppendResult], error) {
//			r, ok := resp.(*fsm.ApplyResult)
//			if !ok || len(r.Appends) != n {
//				return nil, fmt.Errorf("unexpected apply result %T", resp)
//			}
//			out := make([]dledger.Result[[]storage.AppendResult], n)
//			for i, a := range r.Appends {
//				out[i] = dledger.Result[[]storage.AppendResult]{Value: a.Results, Err: a.Err}
//			}
//			return out, nil
//		},
//	}
type BatchCodec[T, R any] struct {
	// Encode builds one Raft entry holding items in order.
	Encode func(items []T) []byte
	// Split divides the FSM's response to that entry into n results, in item order. An error
	// fails every item of the entry. (A response that is itself an error never reaches Split: it
	// fails every item.)
	Split func(resp any, n int) ([]Result[R], error)
	// Size estimates an item's encoded size, for BatchOptions.MaxBytes. Nil counts 0.
	Size func(item T) int
	// Trace, when set, returns the item's send trace (nil: not traced); the batcher marks the
	// milestones it sees and, once the entry has its outcome, copies in the entry's own
	// (package sendtrace) before answering the item.
	Trace func(item T) *sendtrace.Trace
	// Done answers the items submitted with SubmitSlot: the item knows who waits for it (a send
	// in flight), so no closure is made per submission.
	Done func(item T, r R, err error)
}

// BatchOptions bounds the entries a Batcher builds. Zero values take the DefaultBatch* constants.
type BatchOptions struct {
	MaxBytes    int           // entry size bound (an item larger than this travels alone)
	MaxItems    int           // items per entry
	MaxInFlight int           // entries applied but not yet committed and applied
	Linger      time.Duration // wait at most this for more items, only while another entry is in flight
}

// BatcherStats counts what a Batcher sent.
type BatcherStats struct {
	Entries uint64 `json:"entries"`
	Items   uint64 `json:"items"`
	Bytes   uint64 `json:"bytes"`
}

// Batcher is group commit: concurrent Submit calls are coalesced into one Raft entry holding
// whatever is pending, and up to MaxInFlight entries are in Raft at once (raft.Apply futures
// awaited in their own goroutines), so the batcher never waits on one entry's commit while items
// queue. Items are typed (T) so a caller can submit a whole batch send as one item and get one
// result (R) for it.
type Batcher[T, R any] struct {
	node  *Node
	codec BatchCodec[T, R]
	opts  BatchOptions

	mu     sync.Mutex
	queue  []*pending[T, R]
	bytes  int // sum of queued sizes
	closed bool

	wake     chan struct{} // cap 1: queue became non-empty or closed
	slots    chan struct{} // cap MaxInFlight
	inflight atomic.Int32
	loopDone chan struct{}
	entries  sync.WaitGroup

	nEntries, nItems, nBytes atomic.Uint64
}

type pending[T, R any] struct {
	item      T
	size      int
	taken     bool // moved into an entry (guarded by Batcher.mu)
	cancelled bool // caller gave up before it was taken (guarded by Batcher.mu)

	// Exactly one of done (Submit) and answer (SubmitSlot: the codec's Done) is set. An item
	// leaves the queue once, under Batcher.mu (taken, expired or failed at close), so it is
	// finished once.
	done     chan Result[R]
	answer   func(T, R, error)
	deadline time.Time // SubmitSlot: drop the item if it is still queued then
	trace    *sendtrace.Trace
}

// finish delivers the item's result to its caller.
func (p *pending[T, R]) finish(r Result[R]) {
	if p.answer != nil {
		p.answer(p.item, r.Value, r.Err)
		return
	}
	p.done <- r
}

// NewBatcher starts a batcher applying through node. Close it before shutting the node down.
func NewBatcher[T, R any](node *Node, codec BatchCodec[T, R], opts BatchOptions) *Batcher[T, R] {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultBatchMaxBytes
	}
	if opts.MaxItems <= 0 {
		opts.MaxItems = DefaultBatchMaxItems
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultBatchMaxInFlight
	}
	if codec.Size == nil {
		codec.Size = func(T) int { return 0 }
	}
	b := &Batcher[T, R]{
		node:     node,
		codec:    codec,
		opts:     opts,
		wake:     make(chan struct{}, 1),
		slots:    make(chan struct{}, opts.MaxInFlight),
		loopDone: make(chan struct{}),
	}
	go b.loop()
	return b
}

// Submit queues item for the next entry and waits for its result: its part of the FSM response
// once the entry is committed and applied on this node, or the error that failed the entry
// (*NotLeaderError, ErrLeadershipLost, ...) or the item. If ctx ends before the item was put in an
// entry it is dropped (never applied); after that, ctx.Err() is returned but the item may commit.
func (b *Batcher[T, R]) Submit(ctx context.Context, item T) (R, error) {
	if err := ctx.Err(); err != nil {
		var zero R
		return zero, err
	}
	p := &pending[T, R]{item: item, size: b.codec.Size(item), done: make(chan Result[R], 1)}
	if !b.enqueue(p) {
		var zero R
		return zero, ErrShutdown
	}
	select {
	case r := <-p.done:
		return r.Value, r.Err
	case <-ctx.Done():
		b.cancel(p)
		var zero R
		return zero, ctx.Err()
	}
}

// Slot is the batcher's record of one item submitted with SubmitSlot. The caller keeps it in the
// item's own in-flight state, sparing an allocation per item. A Slot serves one submission: the
// batcher holds it until the item is answered.
type Slot[T, R any] struct{ p pending[T, R] }

// SubmitSlot is Submit without a waiting goroutine: it queues item, its record in s, and returns
// at once, and the codec's Done is called exactly once with the item and what Submit would have
// returned. If the item is still queued at deadline (every in-flight slot busy with entries that
// do not commit), it is dropped, never applied, and answered context.DeadlineExceeded; once in
// an entry, its answer is the entry's outcome, which Raft always delivers (commit, lost
// leadership, shutdown). Done runs on the goroutine that saw the entry's outcome (one call after
// another for the items of an entry), on the batcher's goroutine (expired), or before SubmitSlot
// returns (batcher closed), so it must not block: a server answers a request from it and moves
// on. A zero deadline never expires. A deadline instead of a context spares a timer per item.
func (b *Batcher[T, R]) SubmitSlot(deadline time.Time, item T, s *Slot[T, R]) {
	s.p = pending[T, R]{item: item, size: b.codec.Size(item), answer: b.codec.Done, deadline: deadline}
	if !b.enqueue(&s.p) {
		s.p.finish(Result[R]{Err: ErrShutdown})
	}
}

// enqueue queues p for the next entry; false if the batcher is closed.
func (b *Batcher[T, R]) enqueue(p *pending[T, R]) bool {
	if b.codec.Trace != nil {
		p.trace = b.codec.Trace(p.item)
		p.trace.Mark(sendtrace.Queued)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return false
	}
	b.queue = append(b.queue, p)
	b.bytes += p.size
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return true
}

// cancel drops p from the next entry if it was not yet put in one.
func (b *Batcher[T, R]) cancel(p *pending[T, R]) {
	b.mu.Lock()
	if !p.taken {
		p.cancelled = true
	}
	b.mu.Unlock()
}

// Stats returns counters since NewBatcher.
func (b *Batcher[T, R]) Stats() BatcherStats {
	return BatcherStats{Entries: b.nEntries.Load(), Items: b.nItems.Load(), Bytes: b.nBytes.Load()}
}

// batcherCloseWait bounds Close's wait for in-flight entries (a variable for the tests). Raft
// answers each one on commit or when leadership is lost, but not one it never dequeued
// (shutdown.go): a stopping broker must not wait on that.
var batcherCloseWait = 3 * time.Second

// Close fails queued items with ErrShutdown and waits for in-flight entries to finish, at most
// batcherCloseWait; entries still in flight then are answered when Raft answers them (on
// Node.Shutdown, ErrShutdown) and Close reports how many it left.
func (b *Batcher[T, R]) Close() {
	b.mu.Lock()
	first := !b.closed
	b.closed = true
	b.mu.Unlock()
	if first {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
	done := make(chan struct{})
	go func() {
		<-b.loopDone
		b.entries.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(batcherCloseWait):
		b.node.cfg.Logger.Warn("batcher closed with entries still in flight in Raft", "inflight", b.inflight.Load(), "waited", batcherCloseWait)
	}
}

// loop builds entries: wait for items, wait for an in-flight slot, linger if allowed, take a batch,
// apply it.
func (b *Batcher[T, R]) loop() {
	defer close(b.loopDone)
	for {
		closed, empty := b.state()
		switch {
		case closed:
			b.failQueued()
			return
		case empty:
			<-b.wake // Submit and Close signal after changing the state
			continue
		}
		b.waitSlot() // blocks while MaxInFlight entries are out; the queue grows meanwhile
		b.linger()
		batch := b.take()
		if len(batch) == 0 { // all cancelled
			<-b.slots
			continue
		}
		b.send(batch)
	}
}

// expiryCheck is how often queued items' deadlines are checked while every slot is busy.
const expiryCheck = 50 * time.Millisecond

// waitSlot takes an in-flight slot; while every slot is busy it drops queued items whose
// deadline passed, every expiryCheck.
func (b *Batcher[T, R]) waitSlot() {
	select {
	case b.slots <- struct{}{}:
		return
	default:
	}
	t := time.NewTimer(expiryCheck)
	defer t.Stop()
	for {
		select {
		case b.slots <- struct{}{}:
			return
		case <-t.C:
			b.expire()
			t.Reset(expiryCheck)
		}
	}
}

// expire removes queued items whose deadline passed and answers them.
func (b *Batcher[T, R]) expire() {
	now := time.Now()
	var expired []*pending[T, R]
	b.mu.Lock()
	kept := b.queue[:0]
	for _, p := range b.queue {
		if !p.deadline.IsZero() && now.After(p.deadline) {
			b.bytes -= p.size
			expired = append(expired, p)
			continue
		}
		kept = append(kept, p)
	}
	clear(b.queue[len(kept):])
	b.queue = kept
	b.mu.Unlock()
	for _, p := range expired {
		p.finish(Result[R]{Err: context.DeadlineExceeded})
	}
}

func (b *Batcher[T, R]) state() (closed, empty bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed, len(b.queue) == 0
}

// linger waits up to Linger for the queue to fill, but only while another entry is in flight.
func (b *Batcher[T, R]) linger() {
	if b.opts.Linger <= 0 || b.inflight.Load() == 0 {
		return
	}
	t := time.NewTimer(b.opts.Linger)
	defer t.Stop()
	for !b.full() {
		select {
		case <-t.C:
			return
		case <-b.wake:
		}
	}
}

func (b *Batcher[T, R]) full() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed || len(b.queue) >= b.opts.MaxItems || b.bytes >= b.opts.MaxBytes
}

// take removes the next batch from the queue, skipping cancelled items.
func (b *Batcher[T, R]) take() []*pending[T, R] {
	b.mu.Lock()
	defer b.mu.Unlock()
	var batch []*pending[T, R]
	size, i := 0, 0
	for ; i < len(b.queue) && len(batch) < b.opts.MaxItems; i++ {
		p := b.queue[i]
		if p.cancelled {
			b.bytes -= p.size
			continue
		}
		if len(batch) > 0 && size+p.size > b.opts.MaxBytes {
			break
		}
		p.taken = true
		size += p.size
		b.bytes -= p.size
		batch = append(batch, p)
	}
	n := copy(b.queue, b.queue[i:])
	clear(b.queue[n:])
	b.queue = b.queue[:n]
	return batch
}

// send applies one entry and hands its completion to a goroutine that owns the slot.
func (b *Batcher[T, R]) send(batch []*pending[T, R]) {
	items := make([]T, len(batch))
	for i, p := range batch {
		items[i] = p.item
		p.trace.Mark(sendtrace.Proposed)
	}
	data := b.codec.Encode(items)
	b.nEntries.Add(1)
	b.nItems.Add(uint64(len(batch)))
	b.nBytes.Add(uint64(len(data)))
	b.inflight.Add(1)
	b.entries.Add(1)
	f := b.node.propose(data, applyEnqueueTimeout)
	if b.codec.Trace != nil {
		for _, p := range batch {
			p.trace.Mark(sendtrace.Handed)
		}
	}
	go func() {
		defer func() {
			b.inflight.Add(-1)
			<-b.slots
			b.entries.Done()
			select { // the queue may have grown while every slot was busy
			case b.wake <- struct{}{}:
			default:
			}
		}()
		b.complete(batch, f)
	}()
}

// applyEnqueueTimeout bounds raft.Apply's hand-off to the Raft goroutine.
const applyEnqueueTimeout = 10 * time.Second

// complete waits for the entry and delivers each item's result.
func (b *Batcher[T, R]) complete(batch []*pending[T, R], f raft.ApplyFuture) {
	results, err := b.outcome(f, len(batch))
	if b.codec.Trace != nil && err == nil {
		idx, entries := f.Index(), b.node.trace.leaderEntries()
		for _, p := range batch {
			if p.trace != nil {
				entries.Fill(idx, p.trace)
				p.trace.Mark(sendtrace.Answered)
			}
		}
	}
	for i, p := range batch {
		if err != nil {
			p.finish(Result[R]{Err: err})
		} else {
			p.finish(results[i])
		}
	}
}

func (b *Batcher[T, R]) outcome(f raft.ApplyFuture, n int) ([]Result[R], error) {
	if err := f.Error(); err != nil {
		return nil, b.node.translate(err)
	}
	resp := f.Response()
	if err, ok := resp.(error); ok {
		return nil, err
	}
	results, err := b.codec.Split(resp, n)
	if err == nil && len(results) != n {
		err = fmt.Errorf("dledger: split returned %d results for %d items", len(results), n)
	}
	return results, err
}

// failQueued answers every queued item with ErrShutdown.
func (b *Batcher[T, R]) failQueued() {
	b.mu.Lock()
	q := b.queue
	b.queue, b.bytes = nil, 0
	b.mu.Unlock()
	for _, p := range q {
		p.finish(Result[R]{Err: ErrShutdown})
	}
}
