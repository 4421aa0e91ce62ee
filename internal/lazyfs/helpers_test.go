package lazyfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// watchdogAfter bounds the whole test binary: a hung FUSE request would
// otherwise block a test in the kernel until the go test timeout, and leave
// the mount behind.
const watchdogAfter = 3 * time.Minute

// mounts lists the mountpoints in use, for the watchdog.
var mounts sync.Map

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelper(os.Getenv(helperEnv), os.Args[1:]))
	}
	watchdog := time.AfterFunc(watchdogAfter, func() {
		mounts.Range(func(mp, _ any) bool {
			_ = unix.Unmount(mp.(string), unix.MNT_FORCE)
			_ = unix.Unmount(mp.(string), unix.MNT_DETACH)
			return true
		})
		panic(fmt.Sprintf("lazyfs tests still running after %v: mounts aborted", watchdogAfter))
	})
	code := m.Run()
	watchdog.Stop()
	os.Exit(code)
}

// lab is one backing directory mounted through lazyfs.
type lab struct {
	t       *testing.T
	backing string
	mnt     string
	opts    Options
	fs      *FS
}

// newLab mounts a fresh backing directory; the test fails (it does not
// skip) when the mount cannot be made.
func newLab(t *testing.T) *lab {
	t.Helper()
	return newLabWith(t, Options{})
}

// newLabWith is newLab with options (the logger is always the test's).
func newLabWith(t *testing.T, opts Options) *lab {
	t.Helper()
	opts.Logger = testLogger(t)
	l := &lab{t: t, backing: t.TempDir(), mnt: t.TempDir(), opts: opts}
	l.mount()
	return l
}

// mount mounts l.backing on l.mnt, with cleanups that unmount it and, as a
// last resort, detach it.
func (l *lab) mount() {
	l.t.Helper()
	mp := l.mnt
	l.t.Cleanup(func() {
		_ = unix.Unmount(mp, unix.MNT_DETACH)
		mounts.Delete(mp)
	})
	f, err := Mount(l.backing, l.mnt, l.opts)
	if err != nil {
		l.t.Fatalf("lazyfs mount failed (these tests need root and /dev/fuse): %v", err)
	}
	mounts.Store(mp, true)
	l.fs = f
	l.t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			l.t.Errorf("unmount: %v", err)
		}
	})
}

// remount unmounts and mounts the same backing directory again, as the lab
// does after a power loss.
func (l *lab) remount() {
	l.t.Helper()
	if err := l.fs.Unmount(); err != nil {
		l.t.Fatalf("unmount: %v", err)
	}
	l.mount()
}

func (l *lab) path(name string) string { return filepath.Join(l.mnt, name) }

func (l *lab) backingPath(name string) string { return filepath.Join(l.backing, name) }

// testLogger logs through t until the test's cleanups are over, so that a
// straggling server goroutine cannot log after the test ended.
func testLogger(t *testing.T) func(string, ...any) {
	var mu sync.Mutex
	done := false
	t.Cleanup(func() {
		mu.Lock()
		done = true
		mu.Unlock()
	})
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			t.Logf(format, args...)
		}
	}
}

// pattern returns n bytes that differ per seed and per position.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7+i/251) ^ seed
	}
	return b
}

// writeFile creates path with data, fsyncing it if sync is set.
func writeFile(t *testing.T, path string, data []byte, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatalf("fsync %s: %v", path, err)
		}
	}
}

// writeAt writes data at off into an existing file, fsyncing if asked.
func writeAt(t *testing.T, path string, data []byte, off int64, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatalf("fsync %s: %v", path, err)
		}
	}
}

// wantContent checks the file's content and size.
func wantContent(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: got %d bytes (first diff at %d), want %d bytes", path, len(got), firstDiff(got, want), len(want))
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	if fi.Size() != int64(len(want)) {
		t.Fatalf("%s: stat size %d, want %d", path, fi.Size(), len(want))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// wantErrno checks that err carries errno.
func wantErrno(t *testing.T, what string, err error, errno syscall.Errno) {
	t.Helper()
	if !errors.Is(err, errno) {
		t.Fatalf("%s: got error %v, want %v", what, err, errno)
	}
}

// waitFor polls cond for up to five seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
