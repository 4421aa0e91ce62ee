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

// validateRate checks --rate: pacing applies to the native client's blocking senders (sync and
// oneway modes), whose goroutines each wait for their slot.
func (c *ProduceConfig) validateRate() error {
	switch {
	case c.Rate < 0:
		return fmt.Errorf("rate must not be negative")
	case c.Rate > 0 && (c.Client != ClientNative || c.Mode == ModeAsync):
		return fmt.Errorf("--rate needs --client native and --mode sync or oneway")
	}
	return nil
}
