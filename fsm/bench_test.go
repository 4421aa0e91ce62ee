package fsm

import (
	"testing"

	"github.com/hashicorp/raft"

	"rocketraft/storage"
	"rocketraft/storage/vfs"
)

// BenchmarkApply applies entries of 256 records of 1 KiB to a store on the OS file system with
// default RocketMQ sizes (1 GiB commitlog files, index on): as 256 sends of one record (what
// the group-commit batcher produces) and as one batch send of 256.
func BenchmarkApply(b *testing.B) {
	for _, shape := range []struct {
		name          string
		sends, perSnd int
	}{{"256sends", 256, 1}, {"1batch256", 1, 256}} {
		b.Run(shape.name, func(b *testing.B) {
			cfg := storage.DefaultConfig(b.TempDir() + "/store")
			cfg.FS = vfs.OS{}
			f, err := New(Config{Store: cfg})
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
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
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
