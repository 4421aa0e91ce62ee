package fsm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"rocketraft/storage/vfs"
)

// check is the digest check entry a leader that applied f would propose, at index idx.
func check(t testing.TB, f *FSM, idx uint64) *raft.Log {
	t.Helper()
	k, d, ok := f.Digest()
	if !ok {
		t.Fatal("the proposer does not know its digest")
	}
	return &raft.Log{Index: idx, Term: 9, Type: raft.LogCommand, Data: EncodeDigestCheck(k, d)}
}

// TestDigestCheckPasses: replicas that applied the same entries agree, across a restart of one
// (the digest is in the marker) and a snapshot restore of another (it is in the snapshot).
func TestDigestCheckPasses(t *testing.T) {
	logs := workload(t, 50)
	a := newFSM(t, vfs.NewMemFS(), nil)
	defer a.Close()
	applyAll(a, logs)

	fs := vfs.NewMemFS()
	b := newFSM(t, fs, nil)
	applyAll(b, logs)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = newFSM(t, fs, nil)
	defer b.Close()

	c := newFSM(t, vfs.NewMemFS(), nil)
	defer c.Close()
	if err := c.Restore(reader(snapshotBytes(t, a))); err != nil {
		t.Fatal(err)
	}

	chk := check(t, a, 51)
	for name, f := range map[string]*FSM{"leader": a, "restarted": b, "restored": c} {
		f.Apply(chk)
		if d := f.Diverged(); d != nil {
			t.Fatalf("%s: %v", name, d)
		}
		if got := f.checked.Load(); got != 50 {
			t.Fatalf("%s: checked through %d, want 50", name, got)
		}
	}
}

// TestDigestCheckFindsCorruption: one replica applied a different entry at index 17 (here: a
// message body changed). The next check stops it: Diverged says where and with which digests,
// OnDiverged is called, it applies nothing more, and it refuses to open again.
func TestDigestCheckFindsCorruption(t *testing.T) {
	logs := workload(t, 40)
	leader := newFSM(t, vfs.NewMemFS(), nil)
	defer leader.Close()
	applyAll(leader, logs)

	bad := make([]*raft.Log, len(logs))
	copy(bad, logs)
	l := *logs[16]
	l.Data = EncodeMessages([][][]byte{{rec(t, "A", 1, "not what the leader applied", 1_700_000_000_017)}})
	bad[16] = &l

	fs := vfs.NewMemFS()
	reported := make(chan *Divergence, 1)
	f, err := New(Config{Store: storeConfig(fs), OnDiverged: func(d *Divergence) { reported <- d }})
	if err != nil {
		t.Fatal(err)
	}
	applyAll(f, bad)
	before, _, _ := f.Digest()
	f.Apply(check(t, leader, 41))
	d := f.Diverged()
	if d == nil {
		t.Fatal("the corrupted replica passed the digest check")
	}
	if d.Index != 40 || d.CheckIndex != 41 || d.CheckTerm != 9 || d.LocalDigest == d.LeaderDigest {
		t.Fatalf("divergence %+v", d)
	}
	select {
	case got := <-reported:
		if got != d {
			t.Fatalf("OnDiverged got %+v, want %+v", got, d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnDiverged was not called")
	}
	f.Apply(&raft.Log{Index: 42, Term: 9, Type: raft.LogCommand, Data: logs[1].Data})
	if after, _, _ := f.Digest(); after != before+1 {
		t.Fatalf("a diverged replica applied entry 42 (digest index %d -> %d)", before, after)
	}
	f.Close()
	_, err = New(Config{Store: storeConfig(fs)})
	if !errors.Is(err, ErrDiverged) || !strings.Contains(err.Error(), "rebuild") {
		t.Fatalf("reopening a diverged store: %v, want ErrDiverged saying to rebuild", err)
	}
	t.Log(err)
}

// TestDigestRebase: a leader that does not know its digest proposes a rebase; every replica,
// knowing its digest or not, restarts it at the rebase's index with the same value, and checks
// then pass.
func TestDigestRebase(t *testing.T) {
	logs := workload(t, 30)
	a := newFSM(t, vfs.NewMemFS(), nil)
	defer a.Close()
	b := newFSM(t, vfs.NewMemFS(), nil)
	defer b.Close()
	applyAll(a, logs)
	applyAll(b, logs[:10])
	b.mu.Lock()
	b.dig.reset(b.dig.index, 12345, false) // as after an upgrade: the digest is unknown
	b.mu.Unlock()
	applyAll(b, logs[10:])
	rebase := &raft.Log{Index: 31, Term: 3, Type: raft.LogCommand, Data: EncodeDigestCheck(0, 0)}
	a.Apply(rebase)
	b.Apply(rebase)
	ia, da, oka := a.Digest()
	ib, db, okb := b.Digest()
	if ia != 31 || ib != 31 || da != db || !oka || !okb {
		t.Fatalf("after the rebase: (%d %016x %v) and (%d %016x %v)", ia, da, oka, ib, db, okb)
	}
	b.Apply(check(t, a, 32))
	if d := b.Diverged(); d != nil {
		t.Fatal(d)
	}
}
