package metrics

import (
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Histogram is a fixed-bucket histogram updated with atomics only: Observe takes no lock and
// allocates nothing, so it can sit on the send path and in request dispatch. A collector turns
// it into a constant Prometheus histogram at scrape time (Metric). prometheus.Histogram would
// do as well per observation, but needs a HistogramVec lookup (label hashing) per call, which
// this avoids by being held directly by its owner.
type Histogram struct {
	bounds  []float64
	counts  []atomic.Uint64 // counts[i]: observations <= bounds[i] and > bounds[i-1]; last: overflow
	sumBits atomic.Uint64   // float64 bits of the sum
}

// NewHistogram returns a histogram with the given upper bounds (sorted ascending).
func NewHistogram(bounds []float64) *Histogram {
	return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe records one value.
func (h *Histogram) Observe(v float64) {
	h.counts[sort.SearchFloat64s(h.bounds, v)].Add(1)
	for {
		old := h.sumBits.Load()
		if h.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// ObserveDuration records d in milliseconds (RocketMQ's latency unit), with sub-ms precision.
func (h *Histogram) ObserveDuration(d time.Duration) {
	h.Observe(float64(d) / float64(time.Millisecond))
}

// Count is the number of observations so far.
func (h *Histogram) Count() uint64 {
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
	}
	return n
}

// Metric is the histogram's current state as a constant Prometheus histogram with desc's
// variable labels set to labelValues. Buckets are cumulative and consistent with the count;
// the sum may include an observation the buckets do not yet show.
func (h *Histogram) Metric(desc *prometheus.Desc, labelValues ...string) (prometheus.Metric, error) {
	buckets := make(map[float64]uint64, len(h.bounds))
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i].Load()
		buckets[b] = cum
	}
	cum += h.counts[len(h.bounds)].Load()
	return prometheus.NewConstHistogram(desc, cum, math.Float64frombits(h.sumBits.Load()), buckets, labelValues...)
}

// RPC is rocketmq_rpc_latency: how long the remoting server took to answer each request, by
// request and response code, in milliseconds (protocol_type "remoting"). Its count per
// request_code is the request count. Observe is meant for remoting.ServerConfig.OnRequest.
type RPC struct {
	desc  *prometheus.Desc
	mu    sync.Mutex                               // serialises adding a code pair
	table atomic.Pointer[map[uint64]*rpcHistogram] // copy-on-write: readers never lock
}

type rpcHistogram struct {
	code, resp int32
	h          *Histogram
}

// NewRPC returns an empty rpc latency collector.
func NewRPC() *RPC {
	r := &RPC{desc: prometheus.NewDesc(RPCLatency, "Time to answer a remoting request, in milliseconds.",
		[]string{LabelProtocolType, LabelRequestCode, LabelResponseCode}, nil)}
	m := map[uint64]*rpcHistogram{}
	r.table.Store(&m)
	return r
}

// Observe records one answered request. A code pair seen for the first time is added under a
// lock (copying the small table); every later observation of it is lock- and allocation-free.
func (r *RPC) Observe(code, respCode int32, elapsed time.Duration) {
	key := uint64(uint32(code))<<32 | uint64(uint32(respCode))
	e := (*r.table.Load())[key]
	if e == nil {
		e = r.add(key, code, respCode)
	}
	e.h.ObserveDuration(elapsed)
}

func (r *RPC) add(key uint64, code, respCode int32) *rpcHistogram {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.table.Load()
	if e := old[key]; e != nil {
		return e
	}
	m := make(map[uint64]*rpcHistogram, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	e := &rpcHistogram{code: code, resp: respCode, h: NewHistogram(RPCLatencyBuckets)}
	m[key] = e
	r.table.Store(&m)
	return e
}

// Describe implements prometheus.Collector.
func (r *RPC) Describe(ch chan<- *prometheus.Desc) { ch <- r.desc }

// Collect implements prometheus.Collector.
func (r *RPC) Collect(ch chan<- prometheus.Metric) {
	for _, e := range *r.table.Load() {
		m, err := e.h.Metric(r.desc, ProtocolTypeRemoting, itoa(e.code), itoa(e.resp))
		if err != nil {
			ch <- prometheus.NewInvalidMetric(r.desc, err)
			continue
		}
		ch <- m
	}
}
