package bench

import (
	"fmt"
	"sync/atomic"
	"time"
)

// pacer spaces the sends of a run evenly at a fixed rate (--rate), shared by every sending
// goroutine, so that a run holds a chosen load (e.g. half of the peak, to read end-to-end latency
// at moderate load: scripts/figures.sh) instead of as much as the senders can push. It is open
// loop: each send takes the next slot on a fixed schedule, so a stall is followed by the sends
// it delayed, as a steady stream of clients would do. A nil pacer does not wait.
type pacer struct {
	interval int64        // ns between two messages
	next     atomic.Int64 // unix ns of the next free slot
}

// newPacer returns a pacer for rate messages a second, or nil when rate is 0 (no pacing).
func newPacer(rate float64) *pacer {
	if rate <= 0 {
		return nil
	}
	p := &pacer{interval: max(int64(float64(time.Second)/rate), 1)}
	p.next.Store(time.Now().UnixNano())
	return p
}

// reserve takes the slot of the caller's next n messages and returns how long until it comes
// (<= 0: now). The asynchronous sender uses it to start a send later from a timer instead of
// blocking a goroutine.
func (p *pacer) reserve(n int) time.Duration {
	if p == nil {
		return 0
	}
	step := p.interval * int64(n)
	return time.Until(time.Unix(0, p.next.Add(step)-step))
}

// wait blocks until the slot of the caller's next n messages has come and reports whether the
// run is still going (false once stopped is set, checked at least every 100 ms).
func (p *pacer) wait(n int, stopped *atomic.Bool) bool {
	if p == nil {
		return !stopped.Load()
	}
	step := p.interval * int64(n)
	slot := p.next.Add(step) - step
	for {
		if stopped.Load() {
			return false
		}
		d := time.Until(time.Unix(0, slot))
		if d <= 0 {
			return true
		}
		time.Sleep(min(d, 100*time.Millisecond))
	}
}

// validateRate checks --rate: pacing applies to the native client, whose blocking senders (sync
// and oneway modes) each wait for their slot and whose asynchronous slots (async mode) start
// their next send at its slot, with at most --concurrency in flight.
func (c *ProduceConfig) validateRate() error {
	switch {
	case c.Rate < 0:
		return fmt.Errorf("rate must not be negative")
	case c.Rate > 0 && c.Client != ClientNative:
		return fmt.Errorf("--rate needs --client native")
	}
	return nil
}
