package fsm

import (
	"context"
	"testing"

	"github.com/hashicorp/raft"

	"rocketraft/storage"
	"rocketraft/storage/vfs"
)

// BenchmarkApply applies entries of 256 records of 1 KiB to a store on the OS file system with
// default RocketMQ sizes (1 GiB commitlog files, index on): as 256 sends of one record (what
// the group-commit batcher produces) and as one batch send of 256.
func BenchmarkApply(b *testing.B) {
	benchApply(b, false)
}

// BenchmarkApplyLeaderScans is BenchmarkApply on the leader, whose proposer put the sends' reads
// of their properties in LeaderScans: the apply takes them instead of scanning the records.
func BenchmarkApplyLeaderScans(b *testing.B) {
	benchApply(b, true)
}

// benchApply runs the apply benchmarks, with the proposer's reads (leader) or without.
func benchApply(b *testing.B, leader bool) {
	for _, shape := range []struct {
		name          string
		sends, perSnd int
	}{{"256sends", 256, 1}, {"1batch256", 1, 256}} {
		b.Run(shape.name, func(b *testing.B) {
			cfg := storage.DefaultConfig(b.TempDir() + "/store")
			cfg.FS = vfs.OS{}
			var scans *LeaderScans
			if leader {
				scans = NewLeaderScans()
			}
			f, err := New(Config{Store: cfg, Scans: scans})
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			body := make([]byte, 1024-120) // record ≈ 1 KiB with header, topic and properties
			var appends [][][]byte
			for s := 0; s < shape.sends; s++ {
				var recs [][]byte
				for r := 0; r < shape.perSnd; r++ {
					recs = append(recs, rec(b, "BenchTopic", int32((s+r)%8), string(body), 1_700_000_000_000+int64(s)))
				}
				appends = append(appends, recs)
			}
			data := EncodeMessages(appends)
			reads := make([][]storage.Scanned, len(appends))
			for i, recs := range appends {
				for _, r := range recs {
					reads[i] = append(reads[i], readOf(b, r))
				}
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if leader {
					scans.Put(data, reads)
				}
				res := f.Apply(&raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: data}).(*ApplyResult)
				if res.Appends[0].Err != nil {
					b.Fatal(res.Appends[0].Err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*256)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkAcquire measures what Acquire/release add to every read of the replicated store (a
// pull, a query): alone, and from every core at once (the reference count is one shared
// cache line). Then a one-message pull's GetMessages with and without it.
func BenchmarkAcquire(b *testing.B) {
	f := newFSM(b, vfs.NewMemFS(), nil)
	defer f.Close()
	applyAll(f, workload(b, 20))
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_, release, err := f.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			release()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, release, err := f.Acquire(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				release()
			}
		})
	})
	st, release, err := f.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	release()
	b.Run("pull-direct", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if res := st.GetMessages("A", 0, 0, 1, 256<<10, nil); res.Status != storage.Found {
				b.Fatal(res.Status)
			}
		}
	})
	b.Run("pull-acquired", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			st, release, err := f.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			res := st.GetMessages("A", 0, 0, 1, 256<<10, nil)
			release()
			if res.Status != storage.Found {
				b.Fatal(res.Status)
			}
		}
	})
}
