package storage

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"rocketraft/storage/vfs"
)

// BenchmarkAppend measures 1 KiB single-record appends from 256 concurrent goroutines against
// the real file system (b.TempDir), as the broker would issue them. Reported as msgs/s.
func BenchmarkAppend(b *testing.B) {
	for _, mode := range []FlushDiskType{AsyncFlush, SyncFlush} {
		b.Run(string(mode), func(b *testing.B) {
			cfg := DefaultConfig(b.TempDir())
			cfg.FS = vfs.OS{}
			cfg.FlushDiskType = mode
			cfg.MappedFileSizeCommitLog = 256 << 20
			cfg.MaxHashSlotNum = 500000
			cfg.MaxIndexNum = 2000000
			s := openT(b, cfg)
			defer s.Close()
			body := strings.Repeat("x", 1024)
			recs := make([][]byte, 8)
			for i := range recs {
				recs[i] = rec(b, "BenchTopic", int32(i), body, "TagA", "")
			}
			var n atomic.Int64
			b.SetParallelism(128) // x GOMAXPROCS goroutines
			b.SetBytes(int64(len(recs[0])))
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				i := int(n.Add(1))
				one := [][]byte{recs[i%len(recs)]}
				for pb.Next() {
					if _, err := s.Append(context.Background(), one); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
			if r := s.Stats().FlushRounds; r > 0 {
				b.ReportMetric(float64(b.N)/float64(r), "msgs/sync")
			}
		})
	}
}
