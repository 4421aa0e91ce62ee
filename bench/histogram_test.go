package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

func TestBucketIndexRoundTrip(t *testing.T) {
	prev := -1
	for _, v := range []int64{0, 1, 2, 127, 128, 255, 256, 257, 258, 511, 512, 1000, 1 << 20, 123456789, HistogramMaxValue} {
		i := bucketIndex(v)
		if i < 0 || i >= histNumBuckets {
			t.Fatalf("bucketIndex(%d) = %d out of range [0,%d)", v, i, histNumBuckets)
		}
		if i < prev {
			t.Fatalf("bucketIndex not monotonic at %d", v)
		}
		prev = i
		lo, hi := bucketRange(i)
		if v < lo || v > hi {
			t.Fatalf("value %d not in its bucket %d range [%d,%d]", v, i, lo, hi)
		}
		if v >= 1 && float64(hi-lo) > float64(v)/histSubCount {
			t.Fatalf("bucket of %d too wide: [%d,%d]", v, lo, hi)
		}
	}
	// Every bucket's range starts right after the previous one ends.
	_, prevHi := bucketRange(0)
	for i := 1; i < histNumBuckets; i++ {
		lo, hi := bucketRange(i)
		if lo != prevHi+1 || hi < lo {
			t.Fatalf("bucket %d = [%d,%d] does not follow %d", i, lo, hi, prevHi)
		}
		if bucketIndex(lo) != i || bucketIndex(hi) != i {
			t.Fatalf("bucket %d bounds map to %d/%d", i, bucketIndex(lo), bucketIndex(hi))
		}
		prevHi = hi
	}
	if prevHi != HistogramMaxValue {
		t.Fatalf("last bucket ends at %d, want %d", prevHi, HistogramMaxValue)
	}
}

func TestHistogramEmpty(t *testing.T) {
	var h Histogram
	if h.Count() != 0 || h.Quantile(0.5) != 0 || h.Max() != 0 || h.Mean() != 0 {
		t.Fatal("empty histogram should report zeros")
	}
}

func TestHistogramExactSmallValues(t *testing.T) {
	var h Histogram
	for v := int64(1); v <= 100; v++ {
		h.Record(v)
	}
	cases := map[float64]int64{0: 1, 0.01: 1, 0.5: 50, 0.9: 90, 0.99: 99, 0.999: 100, 1: 100}
	for q, want := range cases {
		if got := h.Quantile(q); got != want {
			t.Errorf("Quantile(%v) = %d, want %d", q, got, want)
		}
	}
	if h.Count() != 100 || h.Min() != 1 || h.Max() != 100 || h.Mean() != 50.5 {
		t.Errorf("count/min/max/mean = %d/%d/%d/%v", h.Count(), h.Min(), h.Max(), h.Mean())
	}
}

// TestHistogramAgainstSort compares quantiles with exact ones from sorted
// samples of a heavy-tailed distribution.
func TestHistogramAgainstSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	samples := make([]int64, 200000)
	for i := range samples {
		v := int64(math.Exp(r.NormFloat64()*1.5+7)) + r.Int64N(50) // ~1ms lognormal, µs
		samples[i] = v
		h.Record(v)
	}
	slices.Sort(samples)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 0.9999} {
		idx := int(math.Ceil(q*float64(len(samples)))) - 1
		exact := samples[idx]
		got := h.Quantile(q)
		if got < exact || float64(got-exact) > float64(exact)/histSubCount+1 {
			t.Errorf("q=%v: got %d, exact %d (allowed +%.1f%%)", q, got, exact, 100.0/histSubCount)
		}
	}
	if h.Max() != samples[len(samples)-1] || h.Min() != samples[0] {
		t.Errorf("min/max %d/%d, want %d/%d", h.Min(), h.Max(), samples[0], samples[len(samples)-1])
	}
}

func TestHistogramClampAndNegative(t *testing.T) {
	var h Histogram
	h.Record(-5)
	h.Record(math.MaxInt64)
	if h.Min() != 0 {
		t.Errorf("negative value should record as 0, min=%d", h.Min())
	}
	if h.Max() != math.MaxInt64 {
		t.Errorf("max should stay exact, got %d", h.Max())
	}
	if got := h.Quantile(0.5); got != 0 {
		t.Errorf("p50 = %d, want 0", got)
	}
	// The clamped value sits in the last bucket, whose top is reported.
	if got := h.Quantile(0.75); got != HistogramMaxValue {
		t.Errorf("p75 = %d, want %d", got, HistogramMaxValue)
	}
	if got := h.Quantile(1); got != math.MaxInt64 {
		t.Errorf("p100 = %d, want the exact max", got)
	}
}

func TestHistogramMergeReset(t *testing.T) {
	var a, b, all Histogram
	for i := int64(0); i < 1000; i++ {
		a.Record(i)
		b.Record(i * 1000)
		all.Record(i)
		all.Record(i * 1000)
	}
	a.Merge(&b)
	for _, q := range []float64{0.1, 0.5, 0.99} {
		if a.Quantile(q) != all.Quantile(q) {
			t.Errorf("merged q=%v %d != %d", q, a.Quantile(q), all.Quantile(q))
		}
	}
	if a.Count() != 2000 || a.Max() != 999000 || a.Min() != 0 {
		t.Errorf("merged count/min/max = %d/%d/%d", a.Count(), a.Min(), a.Max())
	}
	var empty Histogram
	a.Merge(&empty)
	if a.Count() != 2000 {
		t.Error("merging an empty histogram changed the count")
	}
	empty.Merge(&b)
	if empty.Min() != 0 || empty.Max() != 999000 {
		t.Errorf("merge into empty: min/max = %d/%d", empty.Min(), empty.Max())
	}
	a.Reset()
	if a.Count() != 0 || a.Quantile(0.5) != 0 || a.Max() != 0 {
		t.Error("reset histogram not empty")
	}
	a.Record(7)
	if a.Min() != 7 || a.Quantile(0.5) != 7 {
		t.Errorf("after reset min=%d p50=%d", a.Min(), a.Quantile(0.5))
	}
}

func TestRecorderConcurrentDrain(t *testing.T) {
	rec := NewRecorder()
	const goroutines, perG = 8, 5000
	var wg sync.WaitGroup
	var total Stats
	stop := make(chan struct{})
	drained := make(chan struct{})
	go func() { // drain concurrently, as the reporter does
		var st Stats
		for {
			select {
			case <-stop:
				rec.Drain(&st)
				total.Merge(&st)
				close(drained)
				return
			default:
				rec.Drain(&st)
				total.Merge(&st)
			}
		}
	}()
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perG; i++ {
				if i%100 == 0 {
					rec.RecordError()
					continue
				}
				rec.RecordOp(time.Duration(i)*time.Microsecond, 2, 20)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-drained
	wantOps := uint64(goroutines * (perG - perG/100))
	if total.Ops != wantOps || total.Msgs != 2*wantOps || total.Bytes != 20*wantOps {
		t.Errorf("ops/msgs/bytes = %d/%d/%d, want %d/%d/%d", total.Ops, total.Msgs, total.Bytes, wantOps, 2*wantOps, 20*wantOps)
	}
	if total.Errors != goroutines*perG/100 {
		t.Errorf("errors = %d", total.Errors)
	}
	if total.Latency.Count() != wantOps || total.Latency.Max() != perG-1 {
		t.Errorf("latency count/max = %d/%d", total.Latency.Count(), total.Latency.Max())
	}
}

func TestSendBudget(t *testing.T) {
	b := sendBudget{limit: 10}
	got := []int{b.take(4), b.take(4), b.take(4), b.take(4)}
	if !slices.Equal(got, []int{4, 4, 2, 0}) {
		t.Errorf("takes = %v", got)
	}
	var unl sendBudget
	if unl.take(7) != 7 {
		t.Error("unlimited budget should grant everything")
	}
	// Concurrent takers never over-issue.
	b = sendBudget{limit: 1000}
	var wg sync.WaitGroup
	var mu sync.Mutex
	sum := 0
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := b.take(3)
				if n == 0 {
					return
				}
				mu.Lock()
				sum += n
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if sum != 1000 {
		t.Errorf("issued %d, want 1000", sum)
	}
}

// BenchmarkRecordOpParallel measures the cost the tool adds per completed
// send.
func BenchmarkRecordOpParallel(b *testing.B) {
	rec := NewRecorder()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			rec.RecordOp(time.Duration(i%5000)*time.Microsecond, 1, 1024)
		}
	})
}

// BenchmarkObserveBatch measures the consumer's per-batch accounting (32
// messages, one latency sample each).
func BenchmarkObserveBatch(b *testing.B) {
	c := &consumeCounter{rec: NewRecorder(), done: make(chan struct{})}
	msgs := make([]*primitive.MessageExt, 32)
	now := time.Now().UnixMilli()
	for i := range msgs {
		msgs[i] = &primitive.MessageExt{BornTimestamp: now - int64(i)}
		msgs[i].Body = make([]byte, 128)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.observe(msgs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/msg")
}
