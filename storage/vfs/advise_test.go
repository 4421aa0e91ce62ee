package vfs

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"rocketraft/internal/smaps"
)

func randomRead(t *testing.T, b []byte, off int) bool {
	t.Helper()
	rr, err := smaps.RandomRead(uintptr(unsafe.Pointer(&b[off])))
	if err != nil {
		t.Fatal(err)
	}
	return rr
}

// resident says whether the page holding b[off] is in the page cache.
func resident(t *testing.T, b []byte, off int) bool {
	t.Helper()
	page := os.Getpagesize()
	start := off &^ (page - 1)
	var vec [1]byte
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[start])), uintptr(page), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	return vec[0]&1 != 0
}

// TestOSAdvise checks what the OS mapping's advice does to the mapping and the page cache:
// AdviceAppend turns read-around off (MADV_RANDOM) over the pages the range touches and drops
// the cached whole pages inside it; AdviceRead turns read-around back on.
func TestOSAdvise(t *testing.T) {
	const mib = 1 << 20
	m, err := OS{}.Map(filepath.Join(t.TempDir(), "seg"), 4*mib)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b := m.Bytes()
	// every page cached, each in a folio of its own (a write of one page makes one; a larger
	// write can make a large folio, which the kernel evicts only whole)
	page := make([]byte, 4096)
	for off := 0; off < 4*mib; off += len(page) {
		if err := m.WriteAt(page, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Sync(0, 4*mib); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int{0, mib, 3 * mib} {
		if !resident(t, b, off) || randomRead(t, b, off) {
			t.Fatalf("before advice, page at %d: resident %v, random %v", off, resident(t, b, off), randomRead(t, b, off))
		}
	}
	if err := m.Advise(mib+100, 3*mib-100, AdviceAppend); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off              int
		random, resident bool
	}{
		{0, false, true},
		{mib - 1, false, true},
		{mib + 100, true, true}, // the partly advised page: read-around off, its data kept
		{mib + 4096, true, false},
		{4*mib - 1, true, false},
	} {
		if got := randomRead(t, b, c.off); got != c.random {
			t.Errorf("after AdviceAppend, page at %d: random read %v, want %v", c.off, got, c.random)
		}
		if got := resident(t, b, c.off); got != c.resident {
			t.Errorf("after AdviceAppend, page at %d: resident %v, want %v", c.off, got, c.resident)
		}
	}
	if err := m.Advise(mib, 2*mib, AdviceRead); err != nil {
		t.Fatal(err)
	}
	for off, want := range map[int]bool{mib: false, 3*mib - 1: false, 3 * mib: true} {
		if got := randomRead(t, b, off); got != want {
			t.Errorf("after AdviceRead, page at %d: random read %v, want %v", off, got, want)
		}
	}
	if err := m.Advise(3*mib, 2*mib, AdviceRead); err == nil {
		t.Error("advice past the end of the file: no error")
	}
	if err := m.Advise(0, 10, Advice(9)); err == nil {
		t.Error("unknown advice: no error")
	}
}

// TestMemFSAdvice checks that MemFS records advice per page, as AdviceAt reports it.
func TestMemFSAdvice(t *testing.T) {
	fs := NewMemFS()
	if err := fs.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	m, err := fs.Map("/d/f", 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	if got := fs.AdviceAt("/d/f", 0); got != 0 {
		t.Fatalf("no advice yet: %v", got)
	}
	if err := m.Advise(5000, 20000, AdviceAppend); err != nil {
		t.Fatal(err)
	}
	for off, want := range map[int]Advice{4095: 0, 4096: AdviceAppend, 24999: AdviceAppend, 28671: AdviceAppend, 28672: 0, 40000: 0} {
		if got := fs.AdviceAt("/d/f", off); got != want {
			t.Errorf("byte %d: %v, want %v", off, got, want)
		}
	}
	if err := m.Advise(60<<10, 8<<10, AdviceRead); err == nil {
		t.Error("advice past the end: no error")
	}
	if got := fmt.Sprint(AdviceRead, " ", Advice(7)); got != "read Advice(7)" {
		t.Errorf("advice names: %q", got)
	}
}
