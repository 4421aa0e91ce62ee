package dledger

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkHeartbeatUnderLoad measures what routing heartbeats through Raft's main loop costs
// (transport.go): the heartbeat round trip the leader sees, throughput, and leader changes (an
// election nobody asked for: each node counts the leaders it learned of, the first one included),
// with heartbeats on the main loop (ours) and on hashicorp/raft's fast path (the library's
// default, which let a resumed leader stamp a batch with a term it never led), with the disk
// idle and kept busy by a writer that fsyncs 4 MiB chunks. Three nodes in this process on
// loopback, 256 submitters, 1 KiB messages, the default log store:
//
//	go test -run '^$' -bench HeartbeatUnderLoad -benchtime 400000x -count 2 ./dledger/
func BenchmarkHeartbeatUnderLoad(b *testing.B) {
	for _, disk := range []string{"idle", "busy"} {
		for _, path := range []string{"main-loop", "fast-path"} {
			b.Run("disk="+disk+"/"+path, func(b *testing.B) {
				var mu sync.Mutex
				var rtts []time.Duration
				if disk == "busy" {
					stop := busyDisk(b)
					defer stop()
				}
				c := benchGroupCommit(b, func(cfg *Config) {
					cfg.heartbeatFastPath = path == "fast-path"
					cfg.onHeartbeat = func(d time.Duration) {
						mu.Lock()
						rtts = append(rtts, d)
						mu.Unlock()
					}
				}, BatchOptions{}, 256, 1024)
				var changes uint64
				for _, n := range c.nodes {
					changes += n.LeaderStats().Changes - min(n.LeaderStats().Changes, 1)
				}
				mu.Lock()
				defer mu.Unlock()
				slices.Sort(rtts)
				pct := func(p float64) float64 {
					if len(rtts) == 0 {
						return 0
					}
					return float64(rtts[min(len(rtts)-1, int(p*float64(len(rtts))))]) / 1e6
				}
				b.ReportMetric(float64(len(rtts)), "heartbeats")
				b.ReportMetric(pct(0.5), "hb-p50-ms")
				b.ReportMetric(pct(0.99), "hb-p99-ms")
				b.ReportMetric(pct(1), "hb-max-ms")
				b.ReportMetric(float64(changes), "leader-changes")
			})
		}
	}
}

// busyDisk writes 4 MiB chunks to a file next to the nodes' data and fsyncs each, until stopped.
func busyDisk(b *testing.B) (stop func()) {
	path := filepath.Join(b.TempDir(), "busy")
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		f, err := os.Create(path)
		if err != nil {
			b.Error(err)
			return
		}
		defer f.Close()
		chunk := make([]byte, 4<<20)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if i%64 == 0 {
				if _, err := f.Seek(0, 0); err != nil {
					b.Error(err)
					return
				}
			}
			if _, err := f.Write(chunk); err != nil {
				b.Error(err)
				return
			}
			if err := f.Sync(); err != nil {
				b.Error(err)
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}
