package dledger

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// failingLogs fails every write with err once set.
type failingLogs struct {
	*raft.InmemStore
	err error
}

func (s *failingLogs) StoreLogs(logs []*raft.Log) error {
	if s.err != nil {
		return s.err
	}
	return s.InmemStore.StoreLogs(logs)
}

func (s *failingLogs) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s *failingLogs) DeleteRange(min, max uint64) error {
	if s.err != nil {
		return s.err
	}
	return s.InmemStore.DeleteRange(min, max)
}

func (s *failingLogs) SetUint64(k []byte, v uint64) error {
	if s.err != nil {
		return s.err
	}
	return s.InmemStore.SetUint64(k, v)
}

// TestReportingStoresReportFailedWrites: every failed write of the log and stable stores is
// reported with what it was, and the error still reaches the caller; successful writes and reads
// report nothing.
func TestReportingStoresReportFailedWrites(t *testing.T) {
	base := &failingLogs{InmemStore: raft.NewInmemStore()}
	var ops []string
	report := failReporter(func(op string, err error) { ops = append(ops, op+": "+err.Error()) })
	logs := reportingLogStore{LogStore: base, report: report}
	stable := reportingStable{StableStore: base, report: report}
	if err := logs.StoreLogs([]*raft.Log{{Index: 1}, {Index: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := stable.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	if _, err := logs.LastIndex(); err != nil || len(ops) != 0 {
		t.Fatalf("healthy writes reported %q (%v)", ops, err)
	}
	eio := errors.New("input/output error")
	base.err = eio
	if err := logs.StoreLogs([]*raft.Log{{Index: 3}, {Index: 4}}); !errors.Is(err, eio) {
		t.Fatalf("StoreLogs: %v", err)
	}
	if err := logs.StoreLog(&raft.Log{Index: 3}); !errors.Is(err, eio) {
		t.Fatalf("StoreLog: %v", err)
	}
	if err := logs.DeleteRange(1, 2); !errors.Is(err, eio) {
		t.Fatalf("DeleteRange: %v", err)
	}
	if err := stable.SetUint64([]byte("CurrentTerm"), 4); !errors.Is(err, eio) {
		t.Fatalf("SetUint64: %v", err)
	}
	want := []string{"entries 3-4", "entry 3", "deletion of entries 1-2", `"CurrentTerm"`}
	if len(ops) != len(want) {
		t.Fatalf("reports %q", ops)
	}
	for i, w := range want {
		if !strings.Contains(ops[i], w) || !strings.Contains(ops[i], "input/output error") {
			t.Fatalf("report %d = %q, want it to name %s and the error", i, ops[i], w)
		}
	}
	var nilReport failReporter
	if err := nilReport.check("x", eio); !errors.Is(err, eio) {
		t.Fatal("a nil reporter must pass the error on")
	}
}

// TestDurableFSMReportsFailedFsync: a leader whose background fsync failed reports it before it
// refuses to apply the entry.
func TestDurableFSMReportsFailedFsync(t *testing.T) {
	tr := newSyncTracker(nil)
	defer tr.close()
	tr.setDurable(1)
	tr.mu.Lock()
	tr.written = 2
	tr.mu.Unlock()
	tr.fail(errors.New("fsync: input/output error"))
	var ops []string
	f := durableFSM{t: tr, report: func(op string, err error) { ops = append(ops, op+": "+err.Error()) }}
	func() {
		defer func() { _ = recover() }()
		f.Apply(&raft.Log{Index: 2, Term: 1})
	}()
	if len(ops) != 1 || !strings.Contains(ops[0], "entry 2") || !strings.Contains(ops[0], "input/output error") {
		t.Fatalf("reports %q", ops)
	}
}
