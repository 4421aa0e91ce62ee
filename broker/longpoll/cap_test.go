package longpoll

import (
	"math"
	"testing"
	"time"

	"rocketraft/config"
)

// A client's suspendTimeoutMillis / pollTime is held at most longPollingMaxMillis (60 s): the 24.8 days of
// math.MaxInt32 ms (and larger, and negative values) cannot park a request beyond it, while the
// 15-30 s clients ask for are kept.
func TestCapSuspend(t *testing.T) {
	maxMs := config.NewBroker().LongPollingMaxMillis
	if maxMs != 60000 {
		t.Fatalf("default longPollingMaxMillis %d, want 60000", maxMs)
	}
	for _, c := range []struct {
		ms   int64
		want time.Duration
	}{
		{0, 0}, {-5, 0}, {15000, 15 * time.Second}, {30000, 30 * time.Second}, {60000, time.Minute},
		{math.MaxInt32, time.Minute}, {math.MaxInt64, time.Minute}, {math.MinInt64, 0},
	} {
		if got := CapSuspend(c.ms, maxMs); got != c.want {
			t.Errorf("CapSuspend(%d) = %v, want %v", c.ms, got, c.want)
		}
	}
}
