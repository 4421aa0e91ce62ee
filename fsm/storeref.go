package fsm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"rocketraft/storage"
)

// ErrNoStore: the FSM has no open store because a restore failed after closing the old one
// (the log says why). Apply panics in that state; readers get this error instead.
var ErrNoStore = errors.New("fsm: no store is open (a snapshot restore failed to reopen it)")

// ErrReadersHoldStore: Restore (or Close) waited DrainTimeout for readers to release the store
// and gave up rather than unmap memory they may still read. A Restore that fails with it left
// the current store in place; Raft retries the snapshot.
var ErrReadersHoldStore = errors.New("fsm: readers still hold the store")

// retiring is added to storeRef.refs when the store is being replaced: a count at or above it
// refuses new readers, and the count below it is the readers still holding the store.
const retiring = int64(1) << 62

// DefaultDrainTimeout is how long Restore and Close wait for readers to release the store
// (Config.DrainTimeout). Readers hold it for one request's reads, microseconds to a few
// milliseconds; a reader still there after this long is stuck, and unmapping under it could
// crash the process.
const DefaultDrainTimeout = 30 * time.Second

// drainLogEvery is how often a drain that takes long is logged.
const drainLogEvery = time.Second

// storeRef is one opened store with the count of readers holding it. Readers take and give back
// references with atomics only (Acquire, release): no lock on the read path. Restore and Close
// retire the ref (no new readers), wait until the count drops to zero (drained), and only then
// close the store; readers that came meanwhile wait for replaced and take whatever the FSM
// published after it.
type storeRef struct {
	s    *storage.Store
	refs atomic.Int64
	// drained is closed once the ref is retired and no reader holds it.
	drained   chan struct{}
	drainOnce sync.Once
	// replaced is closed once the FSM has published what follows this ref (a new store, the
	// same store in a fresh ref after an abandoned restore, or nil).
	replaced chan struct{}
	// release gives one reference back; built once so that Acquire does not allocate.
	release func()
}

func newStoreRef(s *storage.Store) *storeRef {
	r := &storeRef{s: s, drained: make(chan struct{}), replaced: make(chan struct{})}
	r.release = func() {
		if r.refs.Add(-1) == retiring {
			r.drainOnce.Do(func() { close(r.drained) })
		}
	}
	return r
}

// retire refuses new readers; drained is closed once the current ones have released.
func (r *storeRef) retire() {
	if r.refs.Add(retiring) == retiring {
		r.drainOnce.Do(func() { close(r.drained) })
	}
}

// holders is how many readers hold a retired ref.
func (r *storeRef) holders() int64 { return r.refs.Load() - retiring }

// Acquire returns the current store for reading and the function that gives it back: call
// release exactly once, as soon as the reads are done (not while waiting for anything else,
// such as a parked long-polling pull). Until then the store stays open and mapped, even if a
// snapshot Restore replaces it meanwhile: Restore waits for every holder before closing it.
// Do not Acquire again while holding a reference (pass the store down instead): a restore
// waiting in between would wait for the outer holder. Never append to the store directly.
//
// While a restore swaps the store, Acquire waits for the new one (or for ctx). It fails with
// ErrClosed once the FSM is closed, ErrNoStore if a restore could not reopen the store, or
// ctx's error; all are retryable from a client's point of view (another replica may serve).
//
// The fast path is an atomic load and two atomic adds (one in release), without allocation.
func (f *FSM) Acquire(ctx context.Context) (s *storage.Store, release func(), err error) {
	if d := f.divergence.Load(); d != nil {
		return nil, nil, fmt.Errorf("%w: %s; it serves no reads", ErrDiverged, d)
	}
	for {
		r := f.current.Load()
		if r == nil {
			if f.isClosed.Load() {
				return nil, nil, ErrClosed
			}
			return nil, nil, ErrNoStore
		}
		if r.refs.Add(1) < retiring {
			return r.s, r.release, nil
		}
		r.release() // retired: wait for its successor
		select {
		case <-r.replaced:
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("fsm: waiting for the store a snapshot restore is installing: %w", ctx.Err())
		}
	}
}

// publish makes st (nil: none) the store readers get, and wakes readers waiting for the
// previous one. Hold f.mu.
func (f *FSM) publish(st *storage.Store) {
	var next *storeRef
	if st != nil {
		next = newStoreRef(st)
	}
	if old := f.current.Swap(next); old != nil {
		close(old.replaced)
	}
}

// drainReaders retires the current ref and waits, up to DrainTimeout and logging every second,
// until no reader holds it. On success the ref stays retired (readers wait) until the caller
// publishes a successor. On timeout it publishes the same store in a fresh ref, so readers
// carry on with it, and returns ErrReadersHoldStore: the caller must not close the store. Hold
// f.mu.
func (f *FSM) drainReaders(why string) error {
	r := f.current.Load()
	if r == nil {
		return nil
	}
	r.retire()
	select {
	case <-r.drained:
		return nil
	default:
	}
	began := time.Now()
	deadline := time.NewTimer(f.drainTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(drainLogEvery)
	defer tick.Stop()
	for {
		select {
		case <-r.drained:
			f.log.Info("readers released the store", "for", why, "waited", time.Since(began).Round(time.Millisecond))
			return nil
		case <-tick.C:
			f.log.Warn("waiting for readers to release the store", "for", why, "readers", r.holders(), "waited", time.Since(began).Round(time.Millisecond), "limit", f.drainTimeout)
		case <-deadline.C:
			n := r.holders()
			f.log.Error("readers still hold the store; giving up rather than unmap it under them", "for", why, "readers", n, "waited", time.Since(began).Round(time.Millisecond))
			f.publish(r.s)
			return fmt.Errorf("%w: %d readers after %v (%s)", ErrReadersHoldStore, n, f.drainTimeout, why)
		}
	}
}
