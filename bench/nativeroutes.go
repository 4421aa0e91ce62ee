package bench

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// nativeRoutes holds the queues the native producer sends to and replaces them with a fresh
// route from the name server when a send finds a dead broker address (reroute.go).
type nativeRoutes struct {
	mu      sync.Mutex
	qs      []nativeQueue
	gen     uint64
	renewed time.Time
	fetch   func() ([]nativeQueue, error)
	log     io.Writer
}

func newNativeRoutes(qs []nativeQueue, fetch func() ([]nativeQueue, error), log io.Writer) *nativeRoutes {
	return &nativeRoutes{qs: qs, fetch: fetch, log: log}
}

// get returns the current queues (never empty) and their generation.
func (r *nativeRoutes) get() ([]nativeQueue, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.qs, r.gen
}

// renew fetches a fresh route unless generation gen was replaced already or a fetch ran less
// than minRenewInterval ago. A failed fetch, or one without a writable queue, keeps the old
// queues (the next dead-address failure tries again).
func (r *nativeRoutes) renew(gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gen != gen || time.Since(r.renewed) < minRenewInterval {
		return
	}
	r.renewed = time.Now()
	qs, err := r.fetch()
	if err != nil || len(qs) == 0 {
		fmt.Fprintf(r.log, "fresh route after a dead broker address: %v\n", err)
		return
	}
	r.qs, r.gen = qs, r.gen+1
}
