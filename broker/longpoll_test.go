package broker

import (
	"math"
	"testing"
	"time"
)

// A client's suspendTimeoutMillis / pollTime is held at most MaxSuspend: the 24.8 days of
// math.MaxInt32 ms (and larger, and negative values) cannot park a request beyond it, while the
// 15-30 s clients ask for are kept.
func TestCapSuspend(t *testing.T) {
	for _, c := range []struct {
		ms   int64
		want time.Duration
	}{
		{0, 0}, {-5, 0}, {15000, 15 * time.Second}, {30000, 30 * time.Second}, {60000, MaxSuspend},
		{math.MaxInt32, MaxSuspend}, {math.MaxInt64, MaxSuspend}, {math.MinInt64, 0},
	} {
		if got := capSuspend(c.ms); got != c.want {
			t.Errorf("capSuspend(%d) = %v, want %v", c.ms, got, c.want)
		}
	}
	if MaxSuspend > time.Minute {
		t.Fatalf("MaxSuspend %v is over a minute", MaxSuspend)
	}
}
