package dledger

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// BenchmarkLogStore measures group-commit throughput for each log store: three nodes in this
// process on loopback, fsync on, 1 KiB payloads, 256 concurrent submitters through a Batcher with
// default options, a trivial FSM. b.N is the number of messages; run it long enough to reach steady
// state (the first seconds read high while the page cache is clean):
//
//	go test -run '^$' -bench LogStore -benchtime 20s ./dledger/
//
// msg/s is b.N over the timed run; steady-msg/s leaves out its first 5 s.
func BenchmarkLogStore(b *testing.B) {
	for _, v := range []struct {
		name  string
		store string
		cache int
	}{
		{"wal+cache", LogStoreWAL, DefaultLogCacheSize},
		{"wal+cache+serial", LogStoreWAL + "+serial", DefaultLogCacheSize},
		{"bolt+cache", LogStoreBolt, DefaultLogCacheSize},
		{"wal", LogStoreWAL, -1},
		{"bolt", LogStoreBolt, -1},
	} {
		b.Run(v.name, func(b *testing.B) {
			store, serial := strings.CutSuffix(v.store, "+serial")
			benchGroupCommit(b, func(cfg *Config) {
				cfg.LogStore, cfg.LogCacheSize, cfg.SerialLeaderWrite = store, v.cache, serial
			}, BatchOptions{}, 256, 1024)
		})
	}
}

// BenchmarkBatcherOptions varies the batcher's in-flight bound and linger on the default store.
func BenchmarkBatcherOptions(b *testing.B) {
	for _, v := range []struct {
		name string
		opts BatchOptions
	}{
		{"inflight=1", BatchOptions{MaxInFlight: 1}},
		{"inflight=2", BatchOptions{MaxInFlight: 2}},
		{"inflight=4", BatchOptions{MaxInFlight: 4}},
		{"inflight=8", BatchOptions{MaxInFlight: 8}},
		{"inflight=4,linger=1ms", BatchOptions{MaxInFlight: 4, Linger: time.Millisecond}},
	} {
		b.Run(v.name, func(b *testing.B) { benchGroupCommit(b, nil, v.opts, 256, 1024) })
	}
}

func benchGroupCommit(b *testing.B, mod func(*Config), opts BatchOptions, submitters, size int) *cluster {
	b.StopTimer()
	c := newCluster(b, 3, mod, func() raft.FSM { return &countFSM{} })
	lead := c.leader(10 * time.Second)
	bt := NewBatcher(lead, countCodec, opts)
	defer bt.Close()
	payload := make([]byte, size)
	var next, done atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup

	stopSampler := make(chan struct{})
	type sample struct {
		at time.Time
		n  int64
	}
	var samples []sample
	samplerDone := make(chan struct{})
	b.StartTimer()
	start := time.Now()
	go func() {
		defer close(samplerDone)
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for {
			select {
			case <-stopSampler:
				return
			case now := <-tk.C:
				samples = append(samples, sample{now, done.Load()})
			}
		}
	}()
	for g := 0; g < submitters; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if _, err := bt.Submit(context.Background(), payload); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(stopSampler)
	<-samplerDone
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msg/s")
	for _, s := range samples {
		if s.at.Sub(start) >= 5*time.Second && elapsed > 10*time.Second {
			b.ReportMetric(float64(int64(b.N)-s.n)/(elapsed-s.at.Sub(start)).Seconds(), "steady-msg/s")
			break
		}
	}
	st := bt.Stats()
	b.ReportMetric(float64(st.Items)/float64(max(st.Entries, 1)), "msgs/entry")
	return c
}

// countFSM counts messages and keeps nothing else.
type countFSM struct{ n atomic.Uint64 }

func (f *countFSM) Apply(l *raft.Log) any {
	if len(l.Data) < 4 {
		return errors.New("short entry")
	}
	n := binary.BigEndian.Uint32(l.Data)
	f.n.Add(uint64(n))
	return int(n)
}

func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) {
	return snapshotBytes(binary.BigEndian.AppendUint64(nil, f.n.Load())), nil
}

func (f *countFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var b [8]byte
	if _, err := io.ReadFull(rc, b[:]); err != nil {
		return err
	}
	f.n.Store(binary.BigEndian.Uint64(b[:]))
	return nil
}

// countCodec frames items as count(4) then (len(4), bytes) each.
var countCodec = BatchCodec[[]byte, int]{
	Encode: func(items [][]byte) []byte {
		n := 4
		for _, it := range items {
			n += 4 + len(it)
		}
		out := binary.BigEndian.AppendUint32(make([]byte, 0, n), uint32(len(items)))
		for _, it := range items {
			out = binary.BigEndian.AppendUint32(out, uint32(len(it)))
			out = append(out, it...)
		}
		return out
	},
	Split: func(resp any, n int) ([]Result[int], error) {
		if got, ok := resp.(int); !ok || got != n {
			return nil, errors.New("count mismatch")
		}
		return make([]Result[int], n), nil
	},
	Size: func(it []byte) int { return 4 + len(it) },
}
