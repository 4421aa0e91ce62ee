package lazyfs

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// cacheTimeout is how long the kernel may cache attributes and directory
// entries. Every change of content, size or name reaches the backing state
// through this mount, and every reply reports the logical (overlay) size, so
// the kernel's cached view never goes stale while the file system is alive;
// after PowerLoss it is dead and a remount starts with an empty kernel cache.
// A short timeout rather than none keeps stat-heavy callers cheap.
const cacheTimeout = time.Second

// defaultUnmountWait bounds how long Unmount retries a busy mount before it
// aborts the connection and detaches the mount.
const defaultUnmountWait = 5 * time.Second

// Options tune a mount; the zero value is what the crash lab wants.
type Options struct {
	// Debug logs every FUSE request and reply, for diagnosing the kernel
	// interaction; it is very verbose.
	Debug bool
	// Logger receives diagnostics (and the debug trace); nil discards them.
	Logger func(format string, args ...any)
	// SyncBacking also fsyncs the backing file when an overlay is applied,
	// for runs where the host itself might crash. It only costs time in the
	// lab, where the host does not lose power.
	SyncBacking bool
	// UnmountWait bounds how long Unmount waits for a busy mount to become
	// free before it forces it; zero means five seconds.
	UnmountWait time.Duration
}

// FS is one mounted lazy view; it is the handle through which a test cuts
// the power and injects faults.
type FS struct {
	opts       Options
	backing    string
	mountpoint string
	server     *fuse.Server
	root       *node

	// gate orders PowerLoss against operations that change state: those
	// hold it shared for their whole duration, PowerLoss exclusively.
	gate sync.RWMutex
	dead atomic.Bool

	tab    table
	faults faultSet

	unmountOnce sync.Once
	unmountErr  error
}

// Mount mounts a lazy view of backing (an existing directory) at mountpoint
// (an existing empty directory), so that programs using mountpoint can later
// lose their unsynced writes through PowerLoss.
func Mount(backing, mountpoint string, opts Options) (*FS, error) {
	backing, mountpoint, err := checkDirs(backing, mountpoint)
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, fmt.Errorf("lazyfs: stat backing %s: %w", backing, err)
	}
	f := &FS{opts: opts, backing: backing, mountpoint: mountpoint}
	f.tab.init()
	loop := &fs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev)}
	f.root = &node{LoopbackNode: &fs.LoopbackNode{RootData: loop}, lfs: f}
	loop.RootNode = f.root
	server, err := fs.Mount(mountpoint, f.root, f.fuseOptions())
	if err != nil {
		return nil, fmt.Errorf("lazyfs: mount %s on %s (needs root and /dev/fuse): %w", backing, mountpoint, err)
	}
	f.server = server
	closeFuseOnExec()
	return f, nil
}

// closeFuseOnExec marks this process's descriptors of /dev/fuse close-on-exec. go-fuse's direct
// mount opens the device without O_CLOEXEC, so every program a test starts afterwards (brokers,
// name servers) would inherit the FUSE connection of each mount made before it; a lab that
// starts and kills processes while mounts come and go then keeps connections alive in
// unrelated processes.
func closeFuseOnExec() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == "/dev/fuse" {
			syscall.CloseOnExec(fd)
		}
	}
}

// checkDirs makes both paths absolute and checks that backing is a directory
// and mountpoint an empty one.
func checkDirs(backing, mountpoint string) (string, string, error) {
	b, err := filepath.Abs(backing)
	if err != nil {
		return "", "", fmt.Errorf("lazyfs: backing path: %w", err)
	}
	m, err := filepath.Abs(mountpoint)
	if err != nil {
		return "", "", fmt.Errorf("lazyfs: mountpoint path: %w", err)
	}
	if fi, err := os.Stat(b); err != nil || !fi.IsDir() {
		return "", "", fmt.Errorf("lazyfs: backing %s is not a directory: %v", b, err)
	}
	entries, err := os.ReadDir(m)
	if err != nil {
		return "", "", fmt.Errorf("lazyfs: mountpoint %s: %w", m, err)
	}
	if len(entries) > 0 {
		return "", "", fmt.Errorf("lazyfs: mountpoint %s is not empty", m)
	}
	return b, m, nil
}

// fuseOptions returns the mount settings; see the comments inline for why
// each one is needed.
func (f *FS) fuseOptions() *fs.Options {
	timeout := cacheTimeout
	mo := fuse.MountOptions{
		// Root mounts with mount(2) directly; go-fuse falls back to
		// the fusermount helper only if that fails.
		DirectMount: true,
		FsName:      f.backing,
		Name:        "lazyfs",
		MaxWrite:    1 << 20,
		// Passthrough would let the kernel read and write the backing
		// file directly, bypassing the overlay.
		DisabledCapabilities: fuse.CAP_PASSTHROUGH,
		// All content changes pass through this mount, so the page cache
		// is never stale; without this the kernel would drop a file's
		// cached pages each time an fsync changes the backing mtime.
		ExplicitDataCacheControl: true,
		Debug:                    f.opts.Debug,
		Logger:                   f.stdLogger(),
	}
	return &fs.Options{
		MountOptions: mo,
		AttrTimeout:  &timeout,
		EntryTimeout: &timeout,
		Logger:       f.stdLogger(),
	}
}

// stdLogger adapts Options.Logger to the *log.Logger go-fuse expects.
func (f *FS) stdLogger() *log.Logger {
	return log.New(logWriter{f}, "", 0)
}

type logWriter struct{ f *FS }

func (w logWriter) Write(p []byte) (int, error) {
	w.f.logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (f *FS) logf(format string, args ...any) {
	if f.opts.Logger != nil {
		f.opts.Logger("lazyfs: "+format, args...)
	}
}

// Unmount unmounts, forcing the mount off if it stays busy, and waits for
// the server to stop, so a test can mount the same backing directory again.
// Without a prior PowerLoss it first applies every overlay (a clean
// shutdown). It is idempotent.
func (f *FS) Unmount() error {
	f.unmountOnce.Do(func() { f.unmountErr = f.unmount() })
	return f.unmountErr
}

func (f *FS) unmount() error {
	err := f.detach()
	waitErr := f.waitServer()
	// The gate makes the final sweep exclusive with any straggling request
	// from a forced unmount.
	f.gate.Lock()
	defer f.gate.Unlock()
	var applyErr error
	if !f.dead.Load() {
		applyErr = f.tab.applyAll(f.opts.SyncBacking)
	}
	f.tab.dropAll()
	f.dead.Store(true)
	return errors.Join(err, waitErr, applyErr)
}

// waitServer waits, bounded, for the FUSE serve loops to exit.
func (f *FS) waitServer() error {
	done := make(chan struct{})
	go func() {
		f.server.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(f.unmountWait()):
		return fmt.Errorf("lazyfs: server for %s did not stop after unmount", f.mountpoint)
	}
}

func (f *FS) unmountWait() time.Duration {
	if f.opts.UnmountWait > 0 {
		return f.opts.UnmountWait
	}
	return defaultUnmountWait
}
