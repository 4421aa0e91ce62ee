package bench

import (
	"sync/atomic"
	"time"
)

// gapResolution is how precisely a gapMeter measures: a success within this long of the previous
// recorded one is not written down, so that hundreds of thousands of operations a second from
// many goroutines do not all write one shared word.
const gapResolution = time.Millisecond

// gapMeter measures the longest time a run went without a successful operation: between two
// successes, and from the last success to the end of the run when operations failed after it (a
// broker that never came back). It is what a user of a failover sees as the pause.
type gapMeter struct {
	lastOK   atomic.Int64 // UnixNano of the latest recorded success; 0 before the first
	lastFail atomic.Int64 // UnixNano of the latest failure
	longest  atomic.Int64 // nanoseconds
}

// success records a successful operation that completed at now.
func (g *gapMeter) success(now time.Time) {
	t := now.UnixNano()
	last := g.lastOK.Load()
	if last != 0 && t-last < int64(gapResolution) {
		return
	}
	if prev := g.lastOK.Swap(t); prev != 0 {
		g.note(t - prev)
	}
}

// failure records a failed operation at now.
func (g *gapMeter) failure(now time.Time) { g.lastFail.Store(now.UnixNano()) }

// note raises longest to d if d is longer.
func (g *gapMeter) note(d int64) {
	for {
		cur := g.longest.Load()
		if d <= cur || g.longest.CompareAndSwap(cur, d) {
			return
		}
	}
}

// Longest returns the longest gap up to end (the end of the run): between successes, or from the
// last success to end if something failed after it.
func (g *gapMeter) Longest(end time.Time) time.Duration {
	longest := g.longest.Load()
	if last := g.lastOK.Load(); last != 0 && g.lastFail.Load() > last {
		longest = max(longest, end.UnixNano()-last)
	}
	return time.Duration(longest)
}

// LongestGap returns the longest time up to end without a successful operation (see gapMeter).
func (r *Recorder) LongestGap(end time.Time) time.Duration { return r.gaps.Longest(end) }
