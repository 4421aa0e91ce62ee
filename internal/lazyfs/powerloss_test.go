package lazyfs

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestTornWritebackKeepsSomePages(t *testing.T) {
	const pages = 64
	l := newLab(t)
	old := pattern(pages*pageSize, 11)
	writeFile(t, l.path("a"), old, true)
	next := pattern(pages*pageSize, 12)
	writeAt(t, l.path("a"), next, 0, false)

	st := l.fs.PowerLoss(0.5, rand.New(rand.NewPCG(42, 7)))

	// The same seed replays the draws: one per page, in page order.
	replay := rand.New(rand.NewPCG(42, 7))
	keptWanted := make([]bool, pages)
	nKept := 0
	for i := range keptWanted {
		keptWanted[i] = replay.Float64() < 0.5
		if keptWanted[i] {
			nKept++
		}
	}
	if nKept == 0 || nKept == pages {
		t.Fatalf("seed keeps %d of %d pages; pick a seed that tears", nKept, pages)
	}
	want := PowerLossStats{PagesDropped: pages - nKept, PagesKept: nKept, Files: 1}
	if st != want {
		t.Fatalf("PowerLoss = %+v, want %+v", st, want)
	}

	l.remount()
	got, err := os.ReadFile(l.path("a"))
	if err != nil || len(got) != len(old) {
		t.Fatalf("after remount: %d bytes, err %v; want %d bytes", len(got), err, len(old))
	}
	for i := range pages {
		page := got[i*pageSize : (i+1)*pageSize]
		src := old
		if keptWanted[i] {
			src = next
		}
		if !bytes.Equal(page, src[i*pageSize:(i+1)*pageSize]) {
			t.Fatalf("page %d: kept=%v but content matches neither expectation", i, keptWanted[i])
		}
	}
}

func TestTornKeptPagePastEndExtendsFile(t *testing.T) {
	l := newLab(t)
	writeFile(t, l.path("a"), nil, true)
	data := pattern(3*pageSize, 13)
	writeAt(t, l.path("a"), data, 0, false)
	st := l.fs.PowerLoss(1, nil)
	if st.PagesKept != 3 || st.PagesDropped != 0 {
		t.Fatalf("PowerLoss(keep=1) = %+v, want all 3 pages kept", st)
	}
	l.remount()
	wantContent(t, l.path("a"), data)
}

func TestDeadAfterPowerLoss(t *testing.T) {
	l := newLab(t)
	synced := pattern(100, 14)
	writeFile(t, l.path("a"), synced, true)
	if err := os.Mkdir(l.path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(l.path("a"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir, err := os.Open(l.path("d"))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()

	l.fs.PowerLoss(0, nil)

	_, err = f.WriteAt([]byte("x"), 0)
	wantErrno(t, "write", err, syscall.EIO)
	wantErrno(t, "fsync", f.Sync(), syscall.EIO)
	wantErrno(t, "ftruncate", f.Truncate(0), syscall.EIO)
	wantErrno(t, "directory fsync", dir.Sync(), syscall.EIO)
	_, err = os.Create(l.path("new"))
	wantErrno(t, "create", err, syscall.EIO)
	wantErrno(t, "open O_TRUNC", os.WriteFile(l.path("a"), []byte("y"), 0o644), syscall.EIO)
	wantErrno(t, "rename", os.Rename(l.path("a"), l.path("b")), syscall.EIO)
	wantErrno(t, "unlink", os.Remove(l.path("a")), syscall.EIO)
	wantErrno(t, "rmdir", os.Remove(l.path("d")), syscall.EIO)
	wantErrno(t, "mkdir", os.Mkdir(l.path("e"), 0o755), syscall.EIO)
	wantErrno(t, "chmod", os.Chmod(l.path("a"), 0o600), syscall.EIO)
	wantErrno(t, "symlink", os.Symlink("a", l.path("s")), syscall.EIO)

	// Reads still work, and nothing changed underneath.
	wantContent(t, l.path("a"), synced)
	entries, err := os.ReadDir(l.backing)
	if err != nil || len(entries) != 2 {
		t.Fatalf("backing directory after refused changes: %v, %v; want a and d", entries, err)
	}
	if again := l.fs.PowerLoss(0, nil); again != (PowerLossStats{}) {
		t.Fatalf("second PowerLoss = %+v, want zero", again)
	}
	f.Close()
	dir.Close()
}

func TestMetadataIsDurableAtOnce(t *testing.T) {
	l := newLab(t)
	if err := os.Mkdir(l.path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, l.path("tmp"), pattern(5000, 15), true)
	if err := os.Rename(l.path("tmp"), l.path("d/final")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, l.path("d/unsynced"), pattern(5000, 16), false)
	if err := os.Symlink("final", l.path("d/link")); err != nil {
		t.Fatal(err)
	}
	l.fs.PowerLoss(0, nil)
	l.remount()
	wantContent(t, l.path("d/final"), pattern(5000, 15))
	wantContent(t, l.path("d/unsynced"), nil)
	if target, err := os.Readlink(l.path("d/link")); err != nil || target != "final" {
		t.Fatalf("symlink after power loss: %q, %v", target, err)
	}
	if _, err := os.Stat(l.path("tmp")); !os.IsNotExist(err) {
		t.Fatalf("renamed-away name still exists: %v", err)
	}
}

func TestFallocateIsUnsynced(t *testing.T) {
	l := newLab(t)
	data := pattern(pageSize, 17)
	writeFile(t, l.path("a"), data, true)
	f, err := os.OpenFile(l.path("a"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, 4*pageSize); err != nil {
		t.Fatalf("fallocate: %v", err)
	}
	if fi, _ := f.Stat(); fi.Size() != 4*pageSize {
		t.Fatalf("size after fallocate = %d, want %d", fi.Size(), 4*pageSize)
	}
	mode := uint32(unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE)
	if err := unix.Fallocate(int(f.Fd()), mode, 100, 200); err != nil {
		t.Fatalf("punch hole: %v", err)
	}
	want := append(bytes.Clone(data), make([]byte, 3*pageSize)...)
	clear(want[100:300])
	wantContent(t, l.path("a"), want)
	f.Close()

	l.fs.PowerLoss(0, nil)
	l.remount()
	wantContent(t, l.path("a"), data)
}

func TestDirectoryFsyncSucceeds(t *testing.T) {
	l := newLab(t)
	if err := os.MkdirAll(l.path("x/y"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(l.path("x/y"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatalf("directory fsync: %v", err)
	}
	names, err := d.Readdirnames(-1)
	if err != nil || len(names) != 0 {
		t.Fatalf("readdir: %v, %v", names, err)
	}
}

func TestUnmountForcesBusyMount(t *testing.T) {
	l := newLabWith(t, Options{UnmountWait: 200 * time.Millisecond})
	writeFile(t, l.path("a"), []byte("synced"), true)
	f, err := os.Open(l.path("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := time.Now()
	if err := l.fs.Unmount(); err != nil {
		t.Fatalf("Unmount of a busy mount: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Unmount took %v", d)
	}
	if _, err := os.Stat(filepath.Join(l.mnt, "a")); err == nil {
		t.Fatalf("mount still visible after forced unmount")
	}
}
