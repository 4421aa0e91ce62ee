package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"
)

// Stats is what happened during one reporting interval (or, after merging,
// during a whole run): completed operations, the messages and body bytes
// they carried, failed operations, and a latency histogram in microseconds.
type Stats struct {
	// Ops counts successful operations (send calls, or received batches).
	Ops uint64
	// Msgs counts messages in successful operations.
	Msgs uint64
	// Bytes counts message body bytes in successful operations.
	Bytes uint64
	// Errors counts failed operations.
	Errors uint64
	// Latency holds one sample per send call (producer) or per message
	// (consumer end-to-end), in microseconds.
	Latency Histogram
}

// Merge adds o into s.
func (s *Stats) Merge(o *Stats) {
	s.Ops += o.Ops
	s.Msgs += o.Msgs
	s.Bytes += o.Bytes
	s.Errors += o.Errors
	s.Latency.Merge(&o.Latency)
}

// Reset zeroes s.
func (s *Stats) Reset() {
	s.Ops, s.Msgs, s.Bytes, s.Errors = 0, 0, 0, 0
	s.Latency.Reset()
}

// Recorder collects Stats from many goroutines with little contention: it
// holds several independently locked shards, a writer picks one at random,
// and Drain merges and resets all of them. Nothing is lost at an interval
// boundary: each observation lands in exactly one Drain.
type Recorder struct {
	shards []recShard
	mask   uint32

	// slow, when > 0, logs every operation that took at least slow to slowOut.
	slow    time.Duration
	slowOut io.Writer

	// gaps measures the longest time without a successful operation (gap.go).
	gaps gapMeter
}

type recShard struct {
	mu sync.Mutex
	st Stats
	_  [64]byte // keep neighbouring shards' hot fields on separate cache lines
}

// NewRecorder returns a Recorder with a shard count suited to GOMAXPROCS.
func NewRecorder() *Recorder {
	n := 1
	for n < 4*runtime.GOMAXPROCS(0) {
		n <<= 1
	}
	return &Recorder{shards: make([]recShard, n), mask: uint32(n - 1)}
}

func (r *Recorder) shard() *recShard {
	return &r.shards[rand.Uint32()&r.mask]
}

// LogSlow makes RecordOp write one line to w for every operation that took at
// least over, with the wall-clock time it started: a tail that lines up with
// something periodic (a flush, a timer, the host) shows in those times. w must
// be safe for concurrent writes.
func (r *Recorder) LogSlow(w io.Writer, over time.Duration) {
	r.slow, r.slowOut = over, w
}

// RecordOp records one successful operation that carried msgs messages of
// bytes body bytes in total and took lat.
func (r *Recorder) RecordOp(lat time.Duration, msgs, bytes int) {
	if r.slow > 0 && lat >= r.slow {
		start := time.Now().Add(-lat)
		fmt.Fprintf(r.slowOut, "slow: %.3f ms, started %s\n", float64(lat.Microseconds())/1000, start.UTC().Format("15:04:05.000000"))
	}
	r.gaps.success(time.Now())
	s := r.shard()
	s.mu.Lock()
	s.st.Ops++
	s.st.Msgs += uint64(msgs)
	s.st.Bytes += uint64(bytes)
	s.st.Latency.Record(lat.Microseconds())
	s.mu.Unlock()
}

// RecordError records one failed operation.
func (r *Recorder) RecordError() {
	r.gaps.failure(time.Now())
	s := r.shard()
	s.mu.Lock()
	s.st.Errors++
	s.mu.Unlock()
}

// RecordBatch calls f with the Stats of one shard, locked, so that a whole
// batch (e.g. one latency sample per received message) costs one lock.
func (r *Recorder) RecordBatch(f func(st *Stats)) {
	s := r.shard()
	s.mu.Lock()
	f(&s.st)
	s.mu.Unlock()
}

// Drain moves everything recorded since the previous Drain into dst
// (which is reset first).
func (r *Recorder) Drain(dst *Stats) {
	dst.Reset()
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		dst.Merge(&s.st)
		s.st.Reset()
		s.mu.Unlock()
	}
}
