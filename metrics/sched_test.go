package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// A process's registry serves the Go scheduler's latency histogram next to the usual Go metrics:
// the figure that tells a broker short of CPUs (maxProcs).
func TestRegistryServesSchedulerLatency(t *testing.T) {
	r := NewRegistry(Identity{NodeType: "broker", NodeID: "n0"})
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, name := range []string{"go_sched_latencies_seconds_bucket", "go_goroutines", "go_sched_gomaxprocs_threads", "go_memstats_heap_alloc_bytes"} {
		if !strings.Contains(string(body), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}
