package lazyfs

import (
	"bytes"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func TestWriteReadBack(t *testing.T) {
	l := newLab(t)
	data := pattern(10000, 1)
	writeFile(t, l.path("a"), data, false)
	wantContent(t, l.path("a"), data)

	// The creation is durable, the data is not yet.
	if fi, err := os.Stat(l.backingPath("a")); err != nil || fi.Size() != 0 {
		t.Fatalf("backing file before fsync: %v, %v; want an empty file", fi, err)
	}
	if got := l.fs.Unsynced(); got != 3*pageSize {
		t.Fatalf("Unsynced = %d, want %d", got, 3*pageSize)
	}

	// A partial overwrite across a page boundary merges with the rest.
	patch := bytes.Repeat([]byte{0xAB}, 300)
	writeAt(t, l.path("a"), patch, 4000, false)
	copy(data[4000:], patch)
	wantContent(t, l.path("a"), data)
}

func TestFsyncThenPowerLossKeeps(t *testing.T) {
	l := newLab(t)
	data := pattern(3*pageSize+17, 2)
	writeFile(t, l.path("a"), data, true)
	if got := l.fs.Unsynced(); got != 0 {
		t.Fatalf("Unsynced after fsync = %d, want 0", got)
	}
	st := l.fs.PowerLoss(0, nil)
	if st != (PowerLossStats{}) {
		t.Fatalf("PowerLoss after fsync = %+v, want nothing lost", st)
	}
	l.remount()
	wantContent(t, l.path("a"), data)
}

func TestUnsyncedWriteLostOnPowerLoss(t *testing.T) {
	l := newLab(t)
	v1 := pattern(2*pageSize+100, 3)
	writeFile(t, l.path("a"), v1, true)
	// Overwrite the middle and extend by three pages, without fsync.
	writeAt(t, l.path("a"), pattern(4*pageSize, 4), pageSize, false)
	if fi, _ := os.Stat(l.path("a")); fi.Size() != 5*pageSize {
		t.Fatalf("size before power loss = %d, want %d", fi.Size(), 5*pageSize)
	}
	st := l.fs.PowerLoss(0, nil)
	if st.PagesDropped != 4 || st.PagesKept != 0 || st.Files != 1 {
		t.Fatalf("PowerLoss = %+v, want 4 dropped, 0 kept, 1 file", st)
	}
	if got := l.fs.Unsynced(); got != 0 {
		t.Fatalf("Unsynced after power loss = %d", got)
	}
	l.remount()
	wantContent(t, l.path("a"), v1)
}

func TestTruncateUnsyncedRestoresSize(t *testing.T) {
	l := newLab(t)
	data := pattern(3*pageSize, 5)
	writeFile(t, l.path("a"), data, true)
	if err := os.Truncate(l.path("a"), 100); err != nil {
		t.Fatal(err)
	}
	wantContent(t, l.path("a"), data[:100])
	// Growing again shows zeros, not the truncated backing bytes.
	if err := os.Truncate(l.path("a"), 2*pageSize); err != nil {
		t.Fatal(err)
	}
	want := append(bytes.Clone(data[:100]), make([]byte, 2*pageSize-100)...)
	wantContent(t, l.path("a"), want)
	if fi, _ := os.Stat(l.backingPath("a")); fi.Size() != 3*pageSize {
		t.Fatalf("backing size before fsync = %d, want %d", fi.Size(), 3*pageSize)
	}

	st := l.fs.PowerLoss(0, nil)
	if st.Files != 1 {
		t.Fatalf("PowerLoss = %+v, want 1 file affected", st)
	}
	l.remount()
	wantContent(t, l.path("a"), data)
}

func TestTruncateThenFsyncPersists(t *testing.T) {
	l := newLab(t)
	data := pattern(3*pageSize, 6)
	writeFile(t, l.path("a"), data, true)
	f, err := os.OpenFile(l.path("a"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(5000); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("tail"), 6000); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	want := append(bytes.Clone(data[:5000]), make([]byte, 1000)...)
	want = append(want, "tail"...)
	got, err := os.ReadFile(l.backingPath("a"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("backing after fsync: %d bytes, err %v; want %d bytes", len(got), err, len(want))
	}
	l.fs.PowerLoss(0, nil)
	l.remount()
	wantContent(t, l.path("a"), want)
}

func TestRenameKeepsOverlay(t *testing.T) {
	l := newLab(t)
	data := pattern(5000, 7)
	writeFile(t, l.path("a"), data, false)
	if err := os.Rename(l.path("a"), l.path("b")); err != nil {
		t.Fatal(err)
	}
	wantContent(t, l.path("b"), data)
	f, err := os.OpenFile(l.path("b"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// fsync through a read-only descriptor still persists the inode.
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l.fs.PowerLoss(0, nil)
	l.remount()
	wantContent(t, l.path("b"), data)
}

func TestCleanUnmountPersists(t *testing.T) {
	l := newLab(t)
	data := pattern(9000, 8)
	writeFile(t, l.path("a"), data, false)
	if err := l.fs.Unmount(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(l.backingPath("a"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("backing after clean unmount: %d bytes, err %v; want %d bytes", len(got), err, len(data))
	}
	if err := l.fs.Unmount(); err != nil {
		t.Fatalf("second Unmount: %v", err)
	}
}

func TestUnlinkDropsOverlay(t *testing.T) {
	l := newLab(t)
	writeFile(t, l.path("a"), pattern(3*pageSize, 9), false)
	if got := l.fs.Unsynced(); got != 3*pageSize {
		t.Fatalf("Unsynced = %d, want %d", got, 3*pageSize)
	}
	if err := os.Remove(l.path("a")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the unlinked file's overlay to go", func() bool { return l.fs.Unsynced() == 0 })
}

func TestOpenUnlinkedFileKeepsItsData(t *testing.T) {
	l := newLab(t)
	data := pattern(2*pageSize, 10)
	writeFile(t, l.path("a"), data, false)
	f, err := os.Open(l.path("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Remove(l.path("a")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read of open unlinked file: err %v, equal %v", err, bytes.Equal(got, data))
	}
}

func TestHardLinkSharesOverlay(t *testing.T) {
	l := newLab(t)
	writeFile(t, l.path("a"), nil, true)
	if err := os.Link(l.path("a"), l.path("b")); err != nil {
		t.Fatal(err)
	}
	data := pattern(6000, 18)
	writeAt(t, l.path("a"), data, 0, false)
	wantContent(t, l.path("b"), data)
	writeAt(t, l.path("b"), nil, 0, true) // fsync through the other name
	if got := l.fs.Unsynced(); got != 0 {
		t.Fatalf("Unsynced after fsync via the other link = %d", got)
	}
	l.fs.PowerLoss(0, nil)
	l.remount()
	wantContent(t, l.path("a"), data)
}

func TestTmpfileWriteAndSync(t *testing.T) {
	l := newLab(t)
	fd, err := unix.Open(l.mnt, unix.O_TMPFILE|unix.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("O_TMPFILE: %v", err)
	}
	f := os.NewFile(uintptr(fd), "tmpfile")
	defer f.Close()
	data := pattern(5000, 19)
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if got := l.fs.Unsynced(); got != 2*pageSize {
		t.Fatalf("Unsynced = %d, want %d", got, 2*pageSize)
	}
	got := make([]byte, len(data))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back from tmpfile: %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestAppendUsesLogicalSize(t *testing.T) {
	l := newLab(t)
	writeFile(t, l.path("log"), []byte("synced;"), true)
	for _, rec := range []string{"one;", "two;"} {
		f, err := os.OpenFile(l.path("log"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(rec); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	wantContent(t, l.path("log"), []byte("synced;one;two;"))
	l.fs.PowerLoss(0, nil)
	l.remount()
	wantContent(t, l.path("log"), []byte("synced;"))
}
