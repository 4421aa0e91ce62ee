package fsm

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"rocketraft/storage"
	"rocketraft/storage/vfs"
)

// diskReports records Config.OnDiskFailure calls.
type diskReports struct {
	mu  sync.Mutex
	ops []string
	err []error
}

func (d *diskReports) report(op string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ops, d.err = append(d.ops, op), append(d.err, err)
}

func (d *diskReports) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.ops)
}

// TestApplyWriteErrorReportsDiskFailure: a failed commitlog write in Apply is reported through
// OnDiskFailure (the broker exits there) before the state machine stops, naming the entry and
// carrying the store's error.
func TestApplyWriteErrorReportsDiskFailure(t *testing.T) {
	fs := vfs.NewMemFS()
	f := newFSM(t, fs, nil)
	defer f.Close()
	var got diskReports
	f.cfg.OnDiskFailure = got.report
	applyAll(f, workload(t, 10))
	fs.SetFull(true)
	next := &raft.Log{Index: 11, Term: 9, Type: raft.LogCommand, Data: EncodeMessages([][][]byte{
		{rec(t, "Fresh", 3, "needs a new file", 1_700_000_001_000)},
	})}
	var msg string
	func() {
		defer func() { msg = fmt.Sprint(recover()) }()
		f.Apply(next)
	}()
	if !strings.Contains(msg, "raft entry 11") {
		t.Fatalf("apply did not stop: panic %q", msg)
	}
	if got.count() != 1 || !strings.Contains(got.ops[0], "raft entry 11") || !strings.Contains(got.err[0].Error(), "no space left") {
		t.Fatalf("reports %q %v, want one naming entry 11 with the ENOSPC", got.ops, got.err)
	}
	if f.AppliedIndex() != 10 {
		t.Fatalf("applied index moved to %d", f.AppliedIndex())
	}
}

// TestMarkerSyncFailureReportsDiskFailure: a commitlog flush that fails under the marker sync
// is a disk failure; a sync that has nothing to do is not.
func TestMarkerSyncFailureReportsDiskFailure(t *testing.T) {
	fs := vfs.NewMemFS()
	var got diskReports
	cfg := Config{Store: storeConfig(fs), MarkerSyncInterval: 20 * time.Millisecond, OnDiskFailure: got.report}
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	applyAll(f, workload(t, 10))
	time.Sleep(100 * time.Millisecond) // synced rounds with a healthy disk
	if got.count() != 0 {
		t.Fatalf("a healthy disk reported %q %v", got.ops, got.err)
	}
	fs.FailAll(vfs.OpSync)
	applyAll(f, workload(t, 12)[10:])
	deadline := time.Now().Add(5 * time.Second)
	for got.count() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got.count() == 0 {
		t.Fatal("a failed commitlog flush under the marker sync was not reported")
	}
	got.mu.Lock()
	op, e := got.ops[0], got.err[0]
	got.mu.Unlock()
	if op != "applied marker sync" || !strings.Contains(e.Error(), storage.ErrIO.Error()) {
		t.Fatalf("report %q %v", op, e)
	}
	fs.ClearFaults()
}
