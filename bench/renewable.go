package bench

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// renewable holds what a run's sends go through (a native route, an official-client producer)
// and replaces it with a fresh one when a send finds it leads to a dead broker (reroute.go). Many
// sends fail together when a broker dies; one renewal per generation, and at most one per
// minRenewInterval, serves them all.
type renewable[T any] struct {
	mu       sync.Mutex
	v        T
	gen      uint64
	renewed  time.Time
	fresh    func() (T, error)
	replaced func(old T) // called with the lock held once a fresh value is in place; may be nil
	what     string      // names the value in the log line of a failed renewal
	log      io.Writer
}

// get returns the current value and its generation.
func (r *renewable[T]) get() (T, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.v, r.gen
}

// renew replaces the value of generation gen by a fresh one, unless that happened already or a
// renewal ran less than minRenewInterval ago. A failed renewal keeps the old value: the next
// failure on it tries again.
func (r *renewable[T]) renew(gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gen != gen || time.Since(r.renewed) < minRenewInterval {
		return
	}
	r.renewed = time.Now()
	v, err := r.fresh()
	if err != nil {
		fmt.Fprintf(r.log, "fresh %s after a dead broker address: %v\n", r.what, err)
		return
	}
	old := r.v
	r.v, r.gen = v, r.gen+1
	if r.replaced != nil {
		r.replaced(old)
	}
}
