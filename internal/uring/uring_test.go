package uring

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func newRing(t *testing.T) *Ring {
	t.Helper()
	r, err := New(8)
	if err != nil {
		t.Skipf("no io_uring here: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return r
}

// TestFsync: fsyncs and fdatasyncs (Fsync and FsyncFile) of real files from many goroutines at once (more than the
// ring has room for) all complete, and a bad descriptor gets the kernel's error, as fsync(2)
// would give it.
func TestFsync(t *testing.T) {
	r := newRing(t)
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := os.Create(filepath.Join(dir, "f"+string(rune('a'+i%26))+string(rune('a'+i/26))))
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			for j := range 5 {
				if _, err := f.Write(make([]byte, 4096)); err != nil {
					errs <- err
					return
				}
				sync := func() error { return r.Fsync(int(f.Fd()), j%2 == 1) }
				if i%2 == 1 { // half of them through the descriptor-reserving form
					sync = func() error { return r.FsyncFile(f, j%2 == 1) }
				}
				if err := sync(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	p, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fd := int(p.Fd())
	p.Close()
	w.Close()
	if err := r.Fsync(fd, false); !errors.Is(err, unix.EBADF) {
		t.Fatalf("fsync of a closed descriptor = %v, want EBADF", err)
	}
}

// TestFsyncWithOneProcessor: with one Go processor kept busy by another goroutine, fsyncs of a
// file with fresh data still complete (their completions reach the reaper through the poller) and
// the other goroutine keeps running meanwhile.
func TestFsyncWithOneProcessor(t *testing.T) {
	r := newRing(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f, err := os.Create(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stop := make(chan struct{})
	ticks := make(chan int, 1)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				ticks <- n
				return
			default:
				n++
				runtime.Gosched()
			}
		}
	}()
	deadline := time.Now().Add(200 * time.Millisecond)
	syncs := 0
	for time.Now().Before(deadline) {
		if _, err := f.Write(make([]byte, 64<<10)); err != nil {
			t.Fatal(err)
		}
		if err := r.Fsync(int(f.Fd()), false); err != nil {
			t.Fatal(err)
		}
		syncs++
	}
	close(stop)
	if n := <-ticks; n == 0 {
		t.Fatalf("the other goroutine never ran during %d fsyncs", syncs)
	}
}

// TestClosedRingFsyncsDirectly: after Close, Fsync still makes the file durable (directly).
func TestClosedRingFsyncsDirectly(t *testing.T) {
	r, err := New(8)
	if err != nil {
		t.Skipf("no io_uring here: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := r.Fsync(int(f.Fd()), false); err != nil {
		t.Fatalf("fsync after close: %v", err)
	}
}

// TestDisable: after Disable, Shared offers no ring and says why, so callers fsync directly.
func TestDisable(t *testing.T) {
	Disable()
	if r, err := Shared(); r != nil || !errors.Is(err, errDisabled) {
		t.Fatalf("Shared after Disable = %v, %v; want nil and the reason", r, err)
	}
}
