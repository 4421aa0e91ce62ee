// Package vfs is the small file-system interface the store reaches the disk through, with an
// OS implementation (mmap/msync via golang.org/x/sys/unix) and an in-memory one (MemFS) that
// tests can crash (keeping only synced bytes) and make fail (injected I/O errors, full disk).
//
// Contract, common to every implementation:
//   - Paths are slash-separated and used as given; the store passes absolute or root-relative
//     paths it built itself.
//   - Creating, removing and renaming files are durable when the call returns (the OS
//     implementation syncs the parent directory; MemFS treats namespace changes as durable).
//   - Bytes written into a Mapping are durable only after a Sync covering them returns nil.
//     After a crash any unsynced byte may hold its old or its new value.
package vfs

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// FS is what the store needs from a file system.
type FS interface {
	// Map opens the file name, creating it and preallocating it to size bytes if it does not
	// exist, and maps it read-write. An existing file shorter than size is extended with zeros
	// to size first (durably): a power loss can leave a file Map created shorter than it was
	// preallocated, holding only the pages written back, and bytes past its end were never
	// synced data (a sync of written bytes also makes the file's length cover them). An
	// existing file longer than size is an error: it was made with another size.
	Map(name string, size int64) (Mapping, error)
	// WriteFile creates or replaces name with data and syncs it (abort marker, small files).
	WriteFile(name string, data []byte) error
	// ReadDir lists the names in dir, sorted; a missing dir is an error wrapping fs.ErrNotExist.
	ReadDir(dir string) ([]string, error)
	// Stat describes name; a missing file is an error wrapping fs.ErrNotExist.
	Stat(name string) (FileInfo, error)
	// Remove deletes a file, or a directory with everything below it. Missing is not an error.
	Remove(name string) error
	// Rename atomically replaces the file newName with oldName, or moves the directory oldName
	// (with its contents) to newName, which must not exist.
	Rename(oldName, newName string) error
	// MkdirAll creates dir and its parents.
	MkdirAll(dir string) error
	// DiskUsage reports the usage of the file system holding path, for retention and the
	// disk-full check.
	DiskUsage(path string) (Usage, error)
	// Lock takes an exclusive, non-blocking lock on name (created if missing) so that two
	// processes cannot open the same store. Closing the returned Closer releases it.
	Lock(name string) (io.Closer, error)
}

// Mapping is a file mapped into memory at its full, fixed size.
type Mapping interface {
	// Bytes is the mapped file. Writes to it reach the file; they are durable after Sync.
	// The slice must not be used after Close.
	Bytes() []byte
	// WriteAt writes p at off through the file instead of the mapping; the bytes are in Bytes()
	// when it returns (one page cache). A store through a shared mapping takes a page fault on
	// every page it touches first (and the kernel zeroes a preallocated page before that), one
	// exit to the hypervisor each on a virtual machine; a write of many pages through the file is
	// one system call. It is not durable before Sync.
	WriteAt(p []byte, off int) error
	// Sync makes bytes [off, off+n) durable (msync). Implementations may sync more.
	Sync(off, n int) error
	// SyncBlocking is Sync with the system call made on the calling thread, never handed to
	// the process's io_uring: for a caller that has nothing else to do until the bytes are
	// durable (a follower storing the leader's entries), to which the ring only adds two
	// wake-ups (its kernel worker's, then the waiting goroutine's through the network poller).
	SyncBlocking(off, n int) error
	// Advise tells how [off, off+n) is used from now on, so that the page cache holds it to
	// suit (see Advice). Advice never changes what the mapping reads or writes; an
	// implementation may ignore it, and the store goes on when it fails.
	Advise(off, n int, a Advice) error
	// Close unmaps the file. It does not sync.
	Close() error
}

// Advice is how a range of a mapping is used from now on.
//
// It exists for the kernel's read-around. A page fault in a file mapping normally reads the
// pages around the faulting one into the page cache too, and Linux builds those pages as large
// folios (tens of KiB to MiB each) when the file system supports them, as ext4 does from 6.16
// on. That suits reading; it does not suit a file written a few hundred bytes at a time and
// synced after each write: the first store into a page of such a folio dirties the whole folio,
// and every fdatasync writes the whole folio to the disk again. A lone producer on a three-node
// group wrote 64-256 KiB per node for each 1.3 KB message that way (docs/benchmarks.md,
// "Large folios").
type Advice int

const (
	// AdviceAppend: the range holds nothing written yet and is about to be written front to
	// back, each byte before it is read. A fault there brings in its own page only
	// (MADV_RANDOM), and what is cached of the range's whole pages is dropped, so that a
	// read-around done before (recovery reading up to the end of the data) leaves no large
	// folio for the appends to dirty.
	AdviceAppend Advice = iota + 1
	// AdviceRead: the range holds written data that may be read cold, front to back: the
	// kernel's read-around again (MADV_NORMAL).
	AdviceRead
)

func (a Advice) String() string {
	switch a {
	case AdviceAppend:
		return "append"
	case AdviceRead:
		return "read"
	}
	return fmt.Sprintf("Advice(%d)", int(a))
}

// FileInfo is the part of a file's metadata the store uses.
type FileInfo struct {
	Size    int64
	ModTime time.Time
	IsDir   bool
}

// Usage is the space of a file system in bytes.
type Usage struct {
	Total uint64
	Used  uint64
}

// Ratio is Used/Total in percent (0 when Total is 0).
func (u Usage) Ratio() float64 {
	if u.Total == 0 {
		return 0
	}
	return float64(u.Used) * 100 / float64(u.Total)
}

// ErrInjected is wrapped by every error MemFS injects.
var ErrInjected = errors.New("injected I/O error")

// ErrNoSpace is wrapped by MemFS errors in full-disk mode.
var ErrNoSpace = errors.New("no space left on device")

// ErrLocked is returned by Lock when another holder has the lock.
var ErrLocked = errors.New("file is locked by another process")
