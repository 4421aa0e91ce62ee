package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

func TestHistogramBucketsAreCumulative(t *testing.T) {
	h := NewHistogram([]float64{1, 10, 100})
	for _, v := range []float64{0.5, 1, 2, 10, 50, 1000} {
		h.Observe(v)
	}
	m, err := h.Metric(Desc("x", "help", "l"), "v")
	if err != nil {
		t.Fatal(err)
	}
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	hg := out.GetHistogram()
	if hg.GetSampleCount() != 6 || hg.GetSampleSum() != 1063.5 {
		t.Fatalf("count %d sum %v, want 6 and 1063.5", hg.GetSampleCount(), hg.GetSampleSum())
	}
	want := map[float64]uint64{1: 2, 10: 4, 100: 5}
	for _, b := range hg.GetBucket() {
		if want[b.GetUpperBound()] != b.GetCumulativeCount() {
			t.Errorf("bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want[b.GetUpperBound()])
		}
	}
	if h.Count() != 6 {
		t.Errorf("Count %d, want 6", h.Count())
	}
}

// Observing is safe from many goroutines and loses nothing.
func TestHistogramConcurrent(t *testing.T) {
	h := NewHistogram(RPCLatencyBuckets)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				h.Observe(1)
			}
		}()
	}
	wg.Wait()
	m, _ := h.Metric(Desc("x", "help"))
	var out dto.Metric
	_ = m.Write(&out)
	if out.GetHistogram().GetSampleCount() != 8000 || out.GetHistogram().GetSampleSum() != 8000 {
		t.Fatalf("count %d sum %v, want 8000 each", out.GetHistogram().GetSampleCount(), out.GetHistogram().GetSampleSum())
	}
}

// The hot paths: an observation of a known code pair allocates nothing.
func TestObserveDoesNotAllocate(t *testing.T) {
	r := NewRPC()
	r.Observe(10, 0, time.Millisecond)
	h := NewHistogram(MessageSizeBuckets)
	if n := testing.AllocsPerRun(100, func() {
		r.Observe(10, 0, 2*time.Millisecond)
		h.Observe(512)
	}); n != 0 {
		t.Fatalf("%v allocations per observation, want 0", n)
	}
}

// A registry labels every metric with the identity, and serves RocketMQ's rpc latency by
// request and response code in the text format.
func TestRegistryServesRPCLatencyWithIdentity(t *testing.T) {
	reg := NewRegistry(Identity{Cluster: "C1", NodeType: NodeTypeBroker, NodeID: "broker-a"})
	r := NewRPC()
	if err := reg.Register(r); err != nil {
		t.Fatal(err)
	}
	r.Observe(10, 0, 2*time.Millisecond)
	r.Observe(10, 0, 200*time.Millisecond)
	r.Observe(11, 1, 4*time.Second)
	srv := httptest.NewServer(reg.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`rocketmq_rpc_latency_count{cluster="C1",node_id="broker-a",node_type="broker",protocol_type="remoting",request_code="10",response_code="0"} 2`,
		`rocketmq_rpc_latency_bucket{cluster="C1",node_id="broker-a",node_type="broker",protocol_type="remoting",request_code="10",response_code="0",le="3"} 1`,
		`rocketmq_rpc_latency_bucket{cluster="C1",node_id="broker-a",node_type="broker",protocol_type="remoting",request_code="11",response_code="1",le="+Inf"} 1`,
		"go_goroutines ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %q:\n%s", want, grepLines(text, "rocketmq_"))
		}
	}
}

// A name server's identity has no cluster label.
func TestRegistryWithoutCluster(t *testing.T) {
	reg := NewRegistry(Identity{NodeType: NodeTypeNameserver, NodeID: "127.0.0.1:9876"})
	r := NewRPC()
	_ = reg.Register(r)
	r.Observe(105, 0, time.Millisecond)
	mfs, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != RPCLatency {
			continue
		}
		got := map[string]string{}
		for _, lp := range mf.GetMetric()[0].GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		if _, ok := got[LabelCluster]; ok || got[LabelNodeType] != "nameserver" || got[LabelNodeID] != "127.0.0.1:9876" {
			t.Fatalf("labels %v", got)
		}
		return
	}
	t.Fatal("no rocketmq_rpc_latency gathered")
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
