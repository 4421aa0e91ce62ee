package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"

	"rocketraft/internal/uring"
)

// OS is the real file system: files are preallocated and mapped with mmap(MAP_SHARED), synced
// with msync(MS_SYNC).
type OS struct{}

var _ FS = OS{}

type osMapping struct {
	f    *os.File
	data []byte
}

// Map implements FS.
func (OS) Map(name string, size int64) (Mapping, error) {
	if size <= 0 {
		return nil, fmt.Errorf("map %s: size %d", name, size)
	}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", name, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("map %s: %w", name, err)
	}
	switch {
	case st.Size() == 0:
		if err := preallocate(f, size); err != nil {
			f.Close()
			os.Remove(name)
			return nil, fmt.Errorf("map %s: preallocate %d bytes: %w", name, size, err)
		}
		// The length is file metadata: without a sync of the file, a power loss can keep the
		// directory entry (synced below) with only the pages written back since.
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, fmt.Errorf("map %s: sync the preallocated file: %w", name, err)
		}
		if err := syncDir(filepath.Dir(name)); err != nil {
			f.Close()
			return nil, fmt.Errorf("map %s: %w", name, err)
		}
	case st.Size() < size:
		// A file cut short by a power loss before its length was durable (Map's contract).
		if err := preallocate(f, size); err != nil {
			f.Close()
			return nil, fmt.Errorf("map %s: extend the %d-byte file to %d bytes: %w", name, st.Size(), size, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, fmt.Errorf("map %s: sync the extended file: %w", name, err)
		}
	case st.Size() > size:
		f.Close()
		return nil, fmt.Errorf("map %s: file has %d bytes, more than the %d expected", name, st.Size(), size)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("mmap %s: %w", name, err)
	}
	return &osMapping{f: f, data: data}, nil
}

func preallocate(f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) {
		return err
	}
	return f.Truncate(size)
}

// Bytes implements Mapping.
func (m *osMapping) Bytes() []byte { return m.data }

// WriteAt implements Mapping with pwrite on the mapped file.
func (m *osMapping) WriteAt(p []byte, off int) error {
	if off < 0 || off+len(p) > len(m.data) {
		return fmt.Errorf("write %s [%d,+%d): outside the %d-byte file", m.f.Name(), off, len(p), len(m.data))
	}
	if _, err := m.f.WriteAt(p, int64(off)); err != nil {
		return fmt.Errorf("write %s: %w", m.f.Name(), err)
	}
	return nil
}

// Sync implements Mapping: the file's written data is made durable, through the process's
// io_uring where there is one (internal/uring: the goroutine waits without holding its Go
// processor, so a broker on one processor goes on serving during the flush), with fdatasync:
// what msync(MS_SYNC) does on Linux (vfs_fsync_range with datasync), for the whole file rather
// than [off, off+n), which costs nothing more as the flushed range holds the file's only dirty
// pages. Elsewhere msync(MS_SYNC) over the pages covering [off, off+n).
func (m *osMapping) Sync(off, n int) error {
	if n <= 0 {
		return nil
	}
	if ring, _ := uring.Shared(); ring != nil {
		if err := ring.FsyncFile(m.f, true); err != nil {
			return fmt.Errorf("fdatasync %s: %w", m.f.Name(), err)
		}
		return nil
	}
	return m.msync(off, n)
}

// msync is msync(MS_SYNC) over the pages covering [off, off+n).
func (m *osMapping) msync(off, n int) error {
	page := os.Getpagesize()
	start := off &^ (page - 1)
	end := off + n
	if end > len(m.data) {
		end = len(m.data)
	}
	if err := unix.Msync(m.data[start:end], unix.MS_SYNC); err != nil {
		return fmt.Errorf("msync %s [%d,%d): %w", m.f.Name(), start, end, err)
	}
	return nil
}

// SyncBlocking implements Mapping with msync(MS_SYNC) over the range on the calling thread (on
// Linux an fdatasync of that range of the file, whether its pages were dirtied through the
// mapping or by WriteAt).
func (m *osMapping) SyncBlocking(off, n int) error {
	if n <= 0 {
		return nil
	}
	return m.msync(off, n)
}

// Advise implements Mapping with madvise on the whole pages the range touches; AdviceAppend
// then drops what is cached of the pages wholly inside it: madvise(MADV_DONTNEED) takes them
// out of this mapping (a shared mapping's data stays in the page cache and the file) and
// fadvise(POSIX_FADV_DONTNEED) evicts those that are clean and unmapped. A large folio reaching
// past the range's start stays (the kernel evicts whole folios only).
func (m *osMapping) Advise(off, n int, a Advice) error {
	if off < 0 || n < 0 || off+n > len(m.data) {
		return fmt.Errorf("advise %s [%d,+%d): outside the %d-byte file", m.f.Name(), off, n, len(m.data))
	}
	if n == 0 {
		return nil
	}
	page := os.Getpagesize()
	start, end := off&^(page-1), min(len(m.data), (off+n+page-1)&^(page-1))
	var advice int
	switch a {
	case AdviceAppend:
		advice = unix.MADV_RANDOM
	case AdviceRead:
		advice = unix.MADV_NORMAL
	default:
		return fmt.Errorf("advise %s: unknown advice %v", m.f.Name(), a)
	}
	if err := unix.Madvise(m.data[start:end], advice); err != nil {
		return fmt.Errorf("madvise %s [%d,%d) %v: %w", m.f.Name(), start, end, a, err)
	}
	if a != AdviceAppend {
		return nil
	}
	whole, wholeEnd := (off+page-1)&^(page-1), (off+n)&^(page-1)
	if whole >= wholeEnd {
		return nil
	}
	if err := unix.Madvise(m.data[whole:wholeEnd], unix.MADV_DONTNEED); err != nil {
		return fmt.Errorf("madvise %s [%d,%d) dontneed: %w", m.f.Name(), whole, wholeEnd, err)
	}
	if err := unix.Fadvise(int(m.f.Fd()), int64(whole), int64(wholeEnd-whole), unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("fadvise %s [%d,%d) dontneed: %w", m.f.Name(), whole, wholeEnd, err)
	}
	return nil
}

// Close implements Mapping: munmap and close the file.
func (m *osMapping) Close() error {
	err := unix.Munmap(m.data)
	m.data = nil
	if cerr := m.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("unmap %s: %w", m.f.Name(), err)
	}
	return nil
}

// WriteFile implements FS.
func (OS) WriteFile(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", name, err)
	}
	return syncDir(filepath.Dir(name))
}

// ReadDir implements FS.
func (OS) ReadDir(dir string) ([]string, error) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read dir: %w", err)
	}
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

// Stat implements FS.
func (OS) Stat(name string) (FileInfo, error) {
	st, err := os.Stat(name)
	if err != nil {
		return FileInfo{}, fmt.Errorf("stat: %w", err)
	}
	return FileInfo{Size: st.Size(), ModTime: st.ModTime(), IsDir: st.IsDir()}, nil
}

// Remove implements FS.
func (OS) Remove(name string) error {
	if err := os.RemoveAll(name); err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	return syncDir(filepath.Dir(name))
}

// Rename implements FS.
func (OS) Rename(oldName, newName string) error {
	if err := os.Rename(oldName, newName); err != nil {
		return fmt.Errorf("rename: %w", err)
	}
	return syncDir(filepath.Dir(newName))
}

// MkdirAll implements FS.
func (OS) MkdirAll(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("mkdir: %w", err)
	}
	return nil
}

// DiskUsage implements FS.
func (OS) DiskUsage(path string) (Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return Usage{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	// Free blocks, not the blocks available to unprivileged users: RocketMQ
	// computes diskMaxUsedSpaceRatio from File.getFreeSpace (f_bfree) too, and a
	// file system with a large reserve would otherwise look full while it has
	// plenty of room. A write the reserve refuses still fails as ENOSPC, which
	// the store reports as disk full.
	total := st.Blocks * uint64(st.Bsize)
	free := st.Bfree * uint64(st.Bsize)
	if free > total {
		free = total
	}
	return Usage{Total: total, Used: total - free}, nil
}

type osLock struct{ f *os.File }

// Close releases the flock and closes the file.
func (l osLock) Close() error {
	unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	return l.f.Close()
}

// Lock implements FS with flock(LOCK_EX|LOCK_NB).
func (OS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", name, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return osLock{f}, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
