package lazyfs

import (
	"os"
	"syscall"
	"testing"
)

func TestInjectFsyncFault(t *testing.T) {
	l := newLab(t)
	if err := os.Mkdir(l.path("wal"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := pattern(5000, 21)
	f, err := os.Create(l.path("wal/seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	clear := l.fs.InjectFault(OpFsync, "/wal/", syscall.EIO)
	wantErrno(t, "fsync under fault", f.Sync(), syscall.EIO)
	wantErrno(t, "fdatasync under fault", syscall.Fdatasync(int(f.Fd())), syscall.EIO)
	// Outside the prefix fsync still works.
	writeFile(t, l.path("other"), []byte("fine"), true)
	if got := l.fs.Unsynced(); got != 2*pageSize {
		t.Fatalf("Unsynced under fault = %d, want the 2 pages of wal/seg", got)
	}
	clear()
	clear() // idempotent
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync after clear: %v", err)
	}
	f.Close()
	l.fs.PowerLoss(0, nil)
	l.remount()
	wantContent(t, l.path("wal/seg"), data)
	wantContent(t, l.path("other"), []byte("fine"))
}

func TestInjectWriteFault(t *testing.T) {
	l := newLab(t)
	writeFile(t, l.path("a"), []byte("before"), true)
	clear := l.fs.InjectFault(OpWrite, "a", syscall.ENOSPC)
	f, err := os.OpenFile(l.path("a"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = f.WriteAt([]byte("after"), 0)
	wantErrno(t, "write under fault", err, syscall.ENOSPC)
	wantErrno(t, "truncate under fault", f.Truncate(0), syscall.ENOSPC)
	clear()
	if _, err := f.WriteAt([]byte("AFTER!"), 0); err != nil {
		t.Fatalf("write after clear: %v", err)
	}
	wantContent(t, l.path("a"), []byte("AFTER!"))
}

func TestInjectCreateFault(t *testing.T) {
	l := newLab(t)
	clear := l.fs.InjectFault(OpCreate, "", syscall.EDQUOT)
	_, err := os.Create(l.path("new"))
	wantErrno(t, "create under fault", err, syscall.EDQUOT)
	wantErrno(t, "mkdir under fault", os.Mkdir(l.path("dir"), 0o755), syscall.EDQUOT)
	clear()
	writeFile(t, l.path("new"), []byte("x"), false)
	if _, err := os.Stat(l.backingPath("new")); err != nil {
		t.Fatalf("file created after clear is not in the backing directory: %v", err)
	}
}

// TestOSyncWriteIsDurable checks that a write through an O_DSYNC descriptor
// counts as synced: the kernel follows it with an FSYNC.
func TestOSyncWriteIsDurable(t *testing.T) {
	l := newLab(t)
	f, err := os.OpenFile(l.path("a"), os.O_RDWR|os.O_CREATE|syscall.O_DSYNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(3000, 22)
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := l.fs.Unsynced(); got != 0 {
		t.Fatalf("Unsynced after O_DSYNC write = %d, want 0", got)
	}
	l.fs.PowerLoss(0, nil)
	l.remount()
	wantContent(t, l.path("a"), data)
}
