package fsm

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"rocketraft/storage/vfs"
)

func osImage(t *testing.T, root string) map[string][]byte {
	t.Helper()
	dir := filepath.Join(root, "commitlog")
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// TestSnapshotRestoreOS runs snapshot, restore over a stale store, restart and further applies
// on the real file system (directory renames, mmap), against a replica that never restored.
func TestSnapshotRestoreOS(t *testing.T) {
	logs := workload(t, 200)
	srcRoot, dstRoot := filepath.Join(t.TempDir(), "store"), filepath.Join(t.TempDir(), "store")
	open := func(root string, meta MetaApplier) *FSM {
		f, err := New(Config{Store: storeConfigAt(vfs.OS{}, root), Meta: meta})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	srcMeta, dstMeta := newFakeMeta(), newFakeMeta()
	src, dst := open(srcRoot, srcMeta), open(dstRoot, dstMeta)
	applyAll(src, logs[:120])
	applyAll(dst, logs[:30])
	snap := snapshotBytes(t, src)
	if err := dst.Restore(reader(snap)); err != nil {
		t.Fatal(err)
	}
	applyAll(src, logs[120:160])
	applyAll(dst, logs[120:160])
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	dstMeta = newFakeMeta()
	dst = open(dstRoot, dstMeta)
	defer dst.Close()
	defer src.Close()
	if dst.AppliedIndex() != 160 {
		t.Fatalf("applied %d after restart", dst.AppliedIndex())
	}
	// Raft at start: restore the snapshot (kept store, metadata only), then replay.
	if err := dst.Restore(reader(snap)); err != nil {
		t.Fatal(err)
	}
	applyAll(dst, logs[120:])
	applyAll(src, logs[160:])
	a, b := osImage(t, srcRoot), osImage(t, dstRoot)
	if len(a) != len(b) || len(a) < 3 {
		t.Fatalf("%d files vs %d", len(a), len(b))
	}
	for n := range a {
		if !bytes.Equal(a[n], b[n]) {
			t.Fatalf("commitlog file %s differs", n)
		}
	}
	if queueState(src) != queueState(dst) || srcMeta.dump() != dstMeta.dump() {
		t.Fatal("queues or metadata differ")
	}
	if _, err := os.Stat(dstRoot + ".replaced"); !os.IsNotExist(err) {
		t.Fatal("replaced store left behind")
	}
}
