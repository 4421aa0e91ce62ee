package bench

import (
	"math"
	"math/bits"
)

// Histogram layout. Values are non-negative integers (the tool records
// microseconds). Every power-of-two range [2^k, 2^(k+1)) is split into
// 2^histSubBits equal sub-buckets, so a recorded value is known to within a
// relative error of 1/2^histSubBits (< 0.8%), like an HDR histogram with
// two significant decimal digits. Values below 2^(histSubBits+1) are exact.
const (
	histSubBits  = 7
	histSubCount = 1 << histSubBits
	// histMaxBits bounds the trackable range: 2^40 µs is about 12.7 days.
	// Larger values are clamped to HistogramMaxValue.
	histMaxBits    = 40
	histNumBuckets = (histMaxBits-histSubBits)<<histSubBits + histSubCount
)

// HistogramMaxValue is the largest value a Histogram distinguishes; larger
// values are recorded as HistogramMaxValue (the exact maximum is still kept).
const HistogramMaxValue = int64(1)<<histMaxBits - 1

// Histogram is a fixed-size log-linear histogram of non-negative int64
// values with < 0.8% relative error, suitable for latency percentiles.
// The zero value is ready to use. A Histogram is not safe for concurrent
// use; Recorder shards histograms across goroutines.
type Histogram struct {
	counts [histNumBuckets]uint64
	total  uint64
	sum    float64
	min    int64
	max    int64
}

// bucketIndex maps a value in [0, HistogramMaxValue] to its bucket.
func bucketIndex(v int64) int {
	u := uint64(v)
	shift := bits.Len64(u) - (histSubBits + 1)
	if shift < 0 {
		shift = 0
	}
	return shift<<histSubBits + int(u>>uint(shift))
}

// bucketRange returns the smallest and largest value that map to bucket i.
func bucketRange(i int) (lo, hi int64) {
	if i < 2*histSubCount {
		return int64(i), int64(i)
	}
	shift := i>>histSubBits - 1
	top := int64(i - shift<<histSubBits)
	return top << uint(shift), (top+1)<<uint(shift) - 1
}

// Record adds one observation of v. Negative values are recorded as 0.
func (h *Histogram) Record(v int64) {
	h.RecordN(v, 1)
}

// RecordN adds n observations of v.
func (h *Histogram) RecordN(v int64, n uint64) {
	if n == 0 {
		return
	}
	if v < 0 {
		v = 0
	}
	if h.total == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.total += n
	h.sum += float64(v) * float64(n)
	if v > HistogramMaxValue {
		v = HistogramMaxValue
	}
	h.counts[bucketIndex(v)] += n
}

// Merge adds all observations of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.total == 0 {
		return
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.total += o.total
	h.sum += o.sum
	for i, c := range o.counts {
		if c != 0 {
			h.counts[i] += c
		}
	}
}

// Reset removes all observations.
func (h *Histogram) Reset() {
	if h.total == 0 {
		return
	}
	clear(h.counts[:])
	h.total, h.sum, h.min, h.max = 0, 0, 0, 0
}

// Count returns the number of observations.
func (h *Histogram) Count() uint64 { return h.total }

// Min returns the smallest observation, or 0 if there is none.
func (h *Histogram) Min() int64 { return h.min }

// Max returns the largest observation (exact, not bucketed), or 0.
func (h *Histogram) Max() int64 { return h.max }

// Mean returns the arithmetic mean of the observations, or 0.
func (h *Histogram) Mean() float64 {
	if h.total == 0 {
		return 0
	}
	return h.sum / float64(h.total)
}

// Quantile returns the value at quantile q (0 ≤ q ≤ 1), i.e. the smallest
// recorded value v such that at least q of all observations are ≤ v, within
// the histogram's precision. Like HdrHistogram it reports the highest value
// of the selected bucket, clamped to the observed [min, max], so
// Quantile(1) == Max(). It returns 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) int64 {
	if h.total == 0 {
		return 0
	}
	if math.IsNaN(q) || q <= 0 {
		return h.min
	}
	if q >= 1 {
		return h.max
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		seen += c
		if seen >= rank {
			_, hi := bucketRange(i)
			if hi > h.max {
				hi = h.max
			}
			if hi < h.min {
				hi = h.min
			}
			return hi
		}
	}
	return h.max
}
