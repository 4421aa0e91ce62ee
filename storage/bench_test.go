package storage

import (
	"context"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"rocketraft/message"
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

// BenchmarkAppendReplicated measures what the Raft state machine does per entry: 54 sends of one
// 1 KiB record over 8 queues (the batcher's typical entry under 256 sends in flight), stored with
// one AppendReplicatedBatch ("batch") or one AppendReplicated per send ("one-by-one", how the
// state machine stored them before), against the real file system. Each b.N is one record; the
// files are fresh, as a growing commitlog's are.
func BenchmarkAppendReplicated(b *testing.B) {
	body := strings.Repeat("x", 1024)
	entry := make([][][]byte, 54)
	for i := range entry {
		r := rec(b, "BenchTopic", int32(i%8), body, "TagA", "")
		setStoreTS(r, 1_700_000_000_000)
		entry[i] = [][]byte{r}
	}
	for _, mode := range []string{"batch", "one-by-one"} {
		b.Run(mode, func(b *testing.B) {
			cfg := DefaultConfig(b.TempDir())
			cfg.FS = vfs.OS{}
			cfg.MappedFileSizeCommitLog = 64 << 20
			cfg.MaxHashSlotNum = 500000
			cfg.MaxIndexNum = 2000000
			s := openT(b, cfg)
			defer s.Close()
			b.SetBytes(int64(len(entry[0][0])))
			b.ResetTimer()
			for done := 0; done < b.N; done += len(entry) {
				if mode == "batch" {
					if _, err := s.AppendReplicatedBatch(entry); err != nil {
						b.Fatal(err)
					}
					continue
				}
				for _, recs := range entry {
					if _, err := s.AppendReplicated(recs); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkAppendPrepare measures the append path's work before the lock for one record as a
// Go or Java client sends it (TAGS, KEYS, UNIQ_KEY, WAIT, CLUSTER and a few more properties):
// parse, check, tags code and index key hashes.
func BenchmarkAppendPrepare(b *testing.B) {
	benchPrepare(b, false)
}

// BenchmarkAppendPrepareScanned is BenchmarkAppendPrepare for a record whose properties the
// sender already read (AppendScanned): the check that the read describes the record replaces
// the scan.
func BenchmarkAppendPrepareScanned(b *testing.B) {
	benchPrepare(b, true)
}

// benchPrepare runs the prepare benchmarks, with the sender's read of the properties or without.
func benchPrepare(b *testing.B, scanned bool) {
	s := openT(b, testConfig(vfs.NewMemFS()))
	defer s.Close()
	props := message.FormatProperties(map[string]string{
		message.PropertyTags: "TagA", message.PropertyKeys: "order-1 user-2", message.PropertyUniqClientMessageID: "7F0000010001",
		message.PropertyWaitStoreMsgOK: "true", message.PropertyCluster: "DefaultCluster", message.PropertyProducerGroup: "PG",
		message.PropertyMaxReconsumeTimes: "16", message.PropertyMsgRegion: "DefaultRegion", message.PropertyTraceSwitch: "true",
	})
	r, err := message.EncodeRecord(&message.Message{Topic: "BenchTopic", Body: make([]byte, 1024), BornTimestamp: 1,
		BornHost: netip.MustParseAddrPort("10.0.0.1:1234"), StoreHost: netip.MustParseAddrPort("10.0.0.9:10911"), Properties: props})
	if err != nil {
		b.Fatal(err)
	}
	recs := [][]byte{r}
	var scans []Scanned
	if scanned {
		known := message.ReadKnown(props)
		scans = []Scanned{{Props: props, Known: &known}}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, _, _, err := s.prepare(recs, scans); err != nil {
			b.Fatalf("prepare: %v", err)
		}
	}
}
