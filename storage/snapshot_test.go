package storage

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"rocketraft/storage/vfs"
)

// TestBindSnapshotFilesAfterRetention: a manifest kept by name (a reference snapshot) binds to the
// store later; files that retention removed from the front since are left out, the commitlog min
// moves to the first file kept, and the bound files install into a store that opens with the
// source's queue state. A file that is gone otherwise, or whose leading bytes changed, fails.
func TestBindSnapshotFilesAfterRetention(t *testing.T) {
	_, src, clk := openForRetention(t)
	defer src.Close()
	if err := src.Flush(); err != nil {
		t.Fatal(err)
	}
	man, err := src.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	var refs []SnapshotFile // as decoded from a stored reference: no pointers into the store
	for _, f := range man.Files {
		fp, err := src.Fingerprint(f)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, SnapshotFile{Path: f.Path, Size: f.Size, Len: f.Len, Fingerprint: fp})
	}
	bound, min, err := src.BindSnapshotFiles(refs, man.CommitLogMin, man.CommitLogEnd)
	if err != nil || len(bound) != len(refs) || min != man.CommitLogMin {
		t.Fatalf("bind before retention: %d of %d files, min %d (want %d), %v", len(bound), len(refs), min, man.CommitLogMin, err)
	}

	now := clk.now()
	clk.set(time.Date(now.Year(), now.Month(), now.Day()+4, 4, 0, 0, 0, time.Local)) // a deleteWhen hour, 88 h on
	if err := src.Clean(clk.now()); err != nil {
		t.Fatal(err)
	}
	first := src.cl.segs.snapshot()[0].start
	if first == man.CommitLogMin {
		t.Fatal("retention removed nothing")
	}
	bound, min, err = src.BindSnapshotFiles(refs, man.CommitLogMin, man.CommitLogEnd)
	if err != nil {
		t.Fatal(err)
	}
	if min != first || len(bound) >= len(refs) {
		t.Fatalf("bind after retention: %d of %d files, min %d, want %d", len(bound), len(refs), min, first)
	}

	dstFS := vfs.NewMemFS()
	dcfg := testConfig(dstFS)
	dcfg.StorePathRootDir = "/stage"
	in, err := NewInstaller(dcfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range bound {
		var buf bytes.Buffer
		if err := src.CopyFile(&buf, f); err != nil {
			t.Fatal(err)
		}
		if err := in.WriteFile(SnapshotFile{Path: f.Path, Size: f.Size, Len: f.Len}, &buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := in.Finish(min, man.CommitLogEnd); err != nil {
		t.Fatal(err)
	}
	if err := dstFS.Rename("/stage", "/store"); err != nil {
		t.Fatal(err)
	}
	dcfg.StorePathRootDir = "/store"
	dst := openT(t, dcfg)
	defer dst.Close()
	if a, b := src.MaxOffset("R", 0), dst.MaxOffset("R", 0); a != b {
		t.Fatalf("queue max %d vs %d", a, b)
	}
	if a, b := src.MinOffset("R", 0), dst.MinOffset("R", 0); b > a {
		t.Fatalf("restored queue min %d beyond the source's %d", b, a)
	}

	changed := append([]SnapshotFile(nil), refs...)
	last := len(changed) - 1
	changed[last].Fingerprint++
	if _, _, err := src.BindSnapshotFiles(changed, man.CommitLogMin, man.CommitLogEnd); err == nil || !strings.Contains(err.Error(), "changed") {
		t.Fatalf("bind of a file whose leading bytes differ: %v", err)
	}
	gone := []SnapshotFile{{Path: "consumequeue/Gone/0/00000000000000000000", Size: refs[last].Size, Len: 20}}
	if _, _, err := src.BindSnapshotFiles(gone, man.CommitLogMin, man.CommitLogEnd); err == nil {
		t.Fatal("bind of a queue that does not exist succeeded")
	}
}
