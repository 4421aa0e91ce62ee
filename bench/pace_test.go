package bench

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPacerSpacesSends: 4 goroutines sharing a 200 msg/s pacer take 20 slots over about 100 ms
// (bounds with headroom for a loaded machine), and a stopped run ends the wait.
func TestPacerSpacesSends(t *testing.T) {
	p := newPacer(200)
	var stopped atomic.Bool
	var taken atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				if p.wait(1, &stopped) {
					taken.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if el := time.Since(start); el < 90*time.Millisecond || taken.Load() != 20 {
		t.Fatalf("20 slots at 200/s took %s (want >= 90 ms), %d taken", el, taken.Load())
	}
	stopped.Store(true)
	if p.wait(1, &stopped) {
		t.Fatal("wait reported a run going after stop")
	}
	if newPacer(0) != nil {
		t.Fatal("rate 0 must not pace")
	}
}

// TestPacerReserve: an asynchronous slot's reservations at 1000 msg/s come 1 ms apart, the
// first at once, and a nil pacer never delays.
func TestPacerReserve(t *testing.T) {
	p := newPacer(1000)
	if d := p.reserve(1); d > time.Millisecond {
		t.Fatalf("first slot in %s, want at once", d)
	}
	p.reserve(8)
	if d := p.reserve(1); d < 7*time.Millisecond || d > 9*time.Millisecond {
		t.Fatalf("slot after nine messages at 1000/s in %s, want about 9 ms", d)
	}
	var none *pacer
	if d := none.reserve(100); d != 0 {
		t.Fatalf("nil pacer delayed %s", d)
	}
}

func TestValidateRate(t *testing.T) {
	for _, c := range []struct {
		cfg ProduceConfig
		ok  bool
	}{
		{ProduceConfig{Rate: 0}, true},
		{ProduceConfig{Rate: -1}, false},
		{ProduceConfig{Rate: 10, Mode: ModeSync, Common: Common{Client: ClientNative}}, true},
		{ProduceConfig{Rate: 10, Mode: ModeAsync, Common: Common{Client: ClientNative}}, true},
		{ProduceConfig{Rate: 10, Mode: ModeSync, Common: Common{Client: ClientOfficial}}, false},
	} {
		if err := c.cfg.validateRate(); (err == nil) != c.ok {
			t.Errorf("%+v: err %v, want ok=%v", c.cfg, err, c.ok)
		}
	}
}

func TestReadFromAndParseAddrs(t *testing.T) {
	qs := readFrom([]nativeQueue{{addr: "a:1"}, {addr: "a:1"}}, "b:2")
	if qs[0].addr != "b:2" || qs[1].addr != "b:2" {
		t.Fatalf("readFrom: %+v", qs)
	}
	if qs = readFrom([]nativeQueue{{addr: "a:1"}}, ""); qs[0].addr != "a:1" {
		t.Fatalf("readFrom with no address changed the queue: %+v", qs)
	}
	if got := ParseAddrs(" a:1;b:2,, ;c:3"); len(got) != 3 || got[2] != "c:3" {
		t.Fatalf("ParseAddrs: %q", got)
	}
	if _, err := ParseUnixNanos("x"); err == nil {
		t.Fatal("ParseUnixNanos accepted x")
	}
	if ts, err := ParseUnixNanos("1000000000"); err != nil || ts.Unix() != 1 {
		t.Fatalf("ParseUnixNanos: %v %v", ts, err)
	}
}
