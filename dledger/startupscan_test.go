package dledger

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// headerCounter answers header reads from a store, leaving command entries' Data out, and
// records what it was asked.
type headerCounter struct {
	store raft.LogStore
	mu    sync.Mutex
	reads []uint64
}

func (h *headerCounter) GetLogHeader(index uint64, out *raft.Log) (bool, error) {
	h.mu.Lock()
	h.reads = append(h.reads, index)
	h.mu.Unlock()
	if err := h.store.GetLog(index, out); err != nil {
		return false, err
	}
	if out.Type == raft.LogConfiguration {
		return false, nil
	}
	out.Data = nil
	return true, nil
}

func (h *headerCounter) asked() []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]uint64(nil), h.reads...)
}

func storeWith(t *testing.T, n int) *raft.InmemStore {
	t.Helper()
	s := raft.NewInmemStore()
	for i := 1; i <= n; i++ {
		if err := s.StoreLog(&raft.Log{Index: uint64(i), Term: 1, Type: raft.LogCommand, Data: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// The scan's shape (the last entry, then ascending reads ending with it) is answered from
// headers; any other read, and every read after the scan, is whole.
func TestStartupLogsScanShape(t *testing.T) {
	read := func(s *startupLogs, i uint64) []byte {
		t.Helper()
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		return l.Data
	}
	for _, tc := range []struct {
		name    string
		snap    uint64
		reads   []uint64
		headers []uint64 // reads answered from headers
	}{
		{"scan from the start", 0, []uint64{5, 1, 2, 3, 4, 5, 5, 3}, []uint64{5, 1, 2, 3, 4, 5}},
		{"scan after a snapshot", 3, []uint64{5, 4, 5, 4}, []uint64{5, 4, 5}},
		{"only the last entry after the snapshot", 4, []uint64{5, 5, 5}, []uint64{5, 5}},
		{"snapshot at the last entry: not armed", 5, []uint64{5, 5}, nil},
		{"out of order ends it", 0, []uint64{5, 1, 3, 4, 5}, []uint64{5, 1}},
		{"a first read that is not the last entry ends it", 0, []uint64{2, 5, 1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := storeWith(t, 5)
			hc := &headerCounter{store: inner}
			s, err := newStartupLogs(newStoreGuard(inner, true, hclog.NewNullLogger()), hc, tc.snap)
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range tc.reads {
				data := read(s, i)
				headerOnly := len(hc.asked()) > 0 && hc.asked()[len(hc.asked())-1] == i && data == nil
				if !headerOnly && !bytes.Equal(data, []byte(fmt.Sprint(i))) {
					t.Fatalf("read %d: data %q", i, data)
				}
			}
			if got := hc.asked(); fmt.Sprint(got) != fmt.Sprint(tc.headers) {
				t.Fatalf("header reads %v, want %v", got, tc.headers)
			}
			if s.scanning() {
				t.Fatal("still answering from headers after the reads")
			}
		})
	}
}

// recordingFSM keeps what it applied.
type recordingFSM struct {
	mu      sync.Mutex
	applied map[uint64][]byte
}

func (f *recordingFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied[l.Index] = append([]byte(nil), l.Data...)
	return nil
}

func (f *recordingFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, fmt.Errorf("no snapshots") }

func (f *recordingFSM) Restore(io.ReadCloser) error { return fmt.Errorf("no snapshots") }

// A real Raft restarted over a log of command entries reads them from headers in its start-up
// scan only: applying them afterwards (a fresh state machine, so Raft applies the whole log once
// it commits again) sees every entry's Data.
func TestStartupLogsRaftAppliesWholeEntries(t *testing.T) {
	logs, stable, snaps := raft.NewInmemStore(), raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	conf := raft.DefaultConfig()
	conf.LocalID = "n0"
	conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.SnapshotInterval, conf.SnapshotThreshold = time.Hour, 1<<30
	conf.Logger = hclog.NewNullLogger()
	start := func(s raft.LogStore, f raft.FSM) *raft.Raft {
		t.Helper()
		addr, trans := raft.NewInmemTransport("n0")
		if ok, _ := raft.HasExistingState(logs, stable, snaps); !ok {
			cfg := raft.Configuration{Servers: []raft.Server{{ID: "n0", Address: addr}}}
			if err := raft.BootstrapCluster(conf, logs, stable, snaps, trans, cfg); err != nil {
				t.Fatal(err)
			}
		}
		r, err := raft.NewRaft(conf, f, s, stable, snaps, trans)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for r.State() != raft.Leader {
			if time.Now().After(deadline) {
				t.Fatal("no leader within 10s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		return r
	}
	first := &recordingFSM{applied: map[uint64][]byte{}}
	r := start(logs, first)
	for i := 0; i < 40; i++ {
		if err := r.Apply([]byte(fmt.Sprintf("entry %d", i)), 5*time.Second).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	last, _ := logs.LastIndex()

	hc := &headerCounter{store: logs}
	s, err := newStartupLogs(newStoreGuard(logs, true, hclog.NewNullLogger()), hc, 0)
	if err != nil {
		t.Fatal(err)
	}
	second := &recordingFSM{applied: map[uint64][]byte{}}
	r = start(s, second)
	defer r.Shutdown()
	if err := r.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if s.scanning() {
		t.Fatal("still answering from headers once Raft runs")
	}
	if got := len(hc.asked()); uint64(got) != last+1 {
		t.Fatalf("%d reads from headers, want the scan's %d (the last entry, then 1..%d)", got, last+1, last)
	}
	first.mu.Lock()
	second.mu.Lock()
	defer first.mu.Unlock()
	defer second.mu.Unlock()
	if len(first.applied) != 40 {
		t.Fatalf("first run applied %d entries", len(first.applied))
	}
	for i, d := range first.applied {
		if !bytes.Equal(second.applied[i], d) {
			t.Fatalf("entry %d applied after the restart as %q, was %q", i, second.applied[i], d)
		}
	}
}
