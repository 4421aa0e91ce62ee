package remoting

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for the resource bounds a Server applies to its connections before any request is
// authenticated (ServerConfig). None is reached by RocketMQ clients in normal use: they bound
// what only a peer that floods, never reads its answers or announces frames it does not send
// could otherwise make the process hold.
const (
	// DefaultMaxConnections bounds the open connections of a server.
	DefaultMaxConnections = 10000
	// DefaultMaxPendingRequests bounds the requests of one connection that are read but not yet
	// answered (being served, waiting for an entry to commit, or answered but not yet written
	// to the socket). At the bound the connection stops reading until answers leave.
	DefaultMaxPendingRequests = 1024
	// DefaultMaxPendingBytes bounds the frame bytes of one connection's pending requests.
	DefaultMaxPendingBytes = 64 << 20
	// DefaultMaxQueuedBytes bounds the bytes queued for writing on one connection: a peer that
	// does not read its answers stops being read once this much waits for it.
	DefaultMaxQueuedBytes = 64 << 20
	// DefaultReadBudget bounds the bytes of requests being read, decoded and handled across all
	// connections of a server.
	DefaultReadBudget = 512 << 20
	// DefaultReadBudgetWait is how long a frame waits for read budget before its connection is
	// closed.
	DefaultReadBudgetWait = 10 * time.Second
)

// ErrBudgetExhausted ends a connection whose frame waited too long for read budget.
var ErrBudgetExhausted = errors.New("remoting: read budget exhausted")

// budget is a semaphore of bytes shared by a server's connections: a frame's buffer is charged
// as it grows and released once its request has been handled.
type budget struct {
	avail   atomic.Int64
	waiters atomic.Int32
	wait    time.Duration

	mu   sync.Mutex
	free chan struct{} // closed (and replaced) when bytes are released while someone waits
}

func newBudget(total int64, wait time.Duration) *budget {
	b := &budget{wait: wait, free: make(chan struct{})}
	b.avail.Store(total)
	return b
}

func (b *budget) tryAcquire(n int64) bool {
	for {
		a := b.avail.Load()
		if a < n {
			return false
		}
		if b.avail.CompareAndSwap(a, a-n) {
			return true
		}
	}
}

// acquire takes n bytes, waiting up to b.wait for them, or until done is closed.
func (b *budget) acquire(n int64, done <-chan struct{}) error {
	if b.tryAcquire(n) {
		return nil
	}
	b.waiters.Add(1)
	defer b.waiters.Add(-1)
	timer := time.NewTimer(b.wait)
	defer timer.Stop()
	for {
		b.mu.Lock()
		free := b.free
		b.mu.Unlock()
		if b.tryAcquire(n) {
			return nil
		}
		select {
		case <-free:
		case <-done:
			return ErrConnClosed
		case <-timer.C:
			return fmt.Errorf("no read budget for %d more bytes within %v: %w", n, b.wait, ErrBudgetExhausted)
		}
	}
}

// release returns n bytes and wakes whoever waits for them.
func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.avail.Add(n)
	if b.waiters.Load() > 0 {
		b.mu.Lock()
		close(b.free)
		b.free = make(chan struct{})
		b.mu.Unlock()
	}
}

// limits are the per-connection bounds (zero: unbounded, as on client connections).
type limits struct {
	maxPending      int64
	maxPendingBytes int64
	maxQueuedBytes  int64
	writeTimeout    time.Duration
	budget          *budget
}

// flow is a connection's accounting against its limits.
type flow struct {
	pending      atomic.Int64 // requests read and not yet answered on the socket
	pendingBytes atomic.Int64 // their frame bytes
	queuedBytes  atomic.Int64 // bytes waiting in the write queue
	wake         chan struct{}
	waiting      atomic.Bool // the reader waits for room: releases must wake it
	paused       atomic.Bool // logged once per connection
}

// full reports whether the connection must stop reading requests for now.
func (c *Conn) full() bool {
	l := &c.limits
	return l.maxPending > 0 && c.flow.pending.Load() >= l.maxPending ||
		l.maxPendingBytes > 0 && c.flow.pendingBytes.Load() >= l.maxPendingBytes ||
		l.maxQueuedBytes > 0 && c.flow.queuedBytes.Load() >= l.maxQueuedBytes
}

// waitRoom blocks the reader while the connection is full (back-pressure: the peer's further
// requests wait in its socket), returning false once the connection is closed. A peer that never
// reads its answers is closed by the write deadline (writeLoop).
func (c *Conn) waitRoom() bool {
	for c.full() {
		if !c.flow.paused.Swap(true) {
			c.logger.Info("pausing reads: the peer has too many unanswered requests or unread answers",
				"remote", c.RemoteAddr(), "pending", c.flow.pending.Load(), "queued_bytes", c.flow.queuedBytes.Load())
		}
		// Announce the wait, then look again: a release between the first look and the
		// announcement is seen here, one after it signals.
		c.flow.waiting.Store(true)
		if !c.full() {
			c.flow.waiting.Store(false)
			break
		}
		select {
		case <-c.flow.wake:
		case <-c.closed:
			return false
		}
		c.flow.waiting.Store(false)
	}
	return true
}

// signal wakes the reader if it waits for room.
func (c *Conn) signal() {
	if !c.flow.waiting.Load() {
		return
	}
	select {
	case c.flow.wake <- struct{}{}:
	default:
	}
}

// begin counts a request read from the peer as pending.
func (c *Conn) begin(req *Command) {
	c.flow.pending.Add(1)
	c.flow.pendingBytes.Add(int64(req.size))
}

// finish frees a request's pending slot: its answer was written, or it has none.
func (c *Conn) finish(size int) {
	c.flow.pending.Add(-1)
	c.flow.pendingBytes.Add(-int64(size))
	c.signal()
}

// releaseBudget returns what req charged to the server's read budget.
func (c *Conn) releaseBudget(req *Command) {
	if c.limits.budget != nil && req.held > 0 {
		c.limits.budget.release(int64(req.held))
		req.held = 0
	}
}

// frameReserve charges a frame's buffer growth to the read budget, adding it to *charged.
type frameReserve struct {
	c       *Conn
	charged int
}

func (r *frameReserve) reserve(n int) error {
	if err := r.c.limits.budget.acquire(int64(n), r.c.closed); err != nil {
		return err
	}
	r.charged += n
	return nil
}
