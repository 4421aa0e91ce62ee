package lazyfs

import (
	"bytes"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

const mmapFileSize = 16 * pageSize

// preallocated creates a file of mmapFileSize zero bytes whose size is
// synced, as the broker preallocates its mapped files.
func preallocated(t *testing.T, l *lab, name string) {
	t.Helper()
	f, err := os.Create(l.path(name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(mmapFileSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestMmapWriteWithMsyncSurvives(t *testing.T) {
	l := newLab(t)
	preallocated(t, l, "cl")
	const off, text = 5*pageSize + 10, "message through a shared mapping"
	runMmapWrite(t, l.path("cl"), off, text, true)
	if got := l.fs.Unsynced(); got != 0 {
		t.Fatalf("Unsynced after msync = %d, want 0", got)
	}
	l.fs.PowerLoss(0, nil)
	l.remount()
	want := make([]byte, mmapFileSize)
	copy(want[off:], text)
	wantContent(t, l.path("cl"), want)
}

func TestMmapWriteWithoutMsyncIsLost(t *testing.T) {
	l := newLab(t)
	preallocated(t, l, "cl")
	const off, text = 3 * pageSize, "never msynced"
	runMmapWrite(t, l.path("cl"), off, text, false)
	// The child's exit closed the file, and close writes dirty pages back
	// to the file system: the data is visible, but only in the overlay.
	if got := l.fs.Unsynced(); got != pageSize {
		t.Fatalf("Unsynced after unsynced mmap write = %d, want %d", got, pageSize)
	}
	visible := make([]byte, mmapFileSize)
	copy(visible[off:], text)
	wantContent(t, l.path("cl"), visible)

	st := l.fs.PowerLoss(0, nil)
	if st.PagesDropped != 1 {
		t.Fatalf("PowerLoss = %+v, want 1 page dropped", st)
	}
	l.remount()
	wantContent(t, l.path("cl"), make([]byte, mmapFileSize))
}

// TestPwriteFdatasyncWithReadOnlyMmap follows bbolt: pages are written with
// pwrite and fdatasync and read back through a read-only shared mapping.
func TestPwriteFdatasyncWithReadOnlyMmap(t *testing.T) {
	l := newLab(t)
	preallocated(t, l, "db")
	f, err := os.OpenFile(l.path("db"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := bytes.Repeat([]byte{0x5A}, pageSize)
	if _, err := f.WriteAt(page, 2*pageSize); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		t.Fatalf("fdatasync: %v", err)
	}
	// Read the mapping only after the page is in the page cache (the
	// pwrite put it there), so no fault here needs this process's server.
	m, err := unix.Mmap(int(f.Fd()), 2*pageSize, pageSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	same := bytes.Equal(m, page)
	if err := unix.Munmap(m); err != nil {
		t.Fatal(err)
	}
	if !same {
		t.Fatalf("read-only mapping does not show the pwritten page")
	}
	f.Close()
	l.fs.PowerLoss(0, nil)
	l.remount()
	want := make([]byte, mmapFileSize)
	copy(want[2*pageSize:], page)
	wantContent(t, l.path("db"), want)
}

// TestStoppedProcessScenario follows the lab: a process holds dirty mapped
// pages, it is stopped, the power is cut, it is killed, the mount is
// replaced. The dirty pages never reached stable storage.
func TestStoppedProcessScenario(t *testing.T) {
	l := newLab(t)
	preallocated(t, l, "cl")
	writeFile(t, l.path("meta"), []byte("synced metadata"), true)
	cmd := startMmapHolder(t, l.path("cl"), 7*pageSize, "dirty in the page cache")
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	l.fs.PowerLoss(0, nil)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	l.remount()
	wantContent(t, l.path("cl"), make([]byte, mmapFileSize))
	wantContent(t, l.path("meta"), []byte("synced metadata"))
}
