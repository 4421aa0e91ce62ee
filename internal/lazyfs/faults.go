package lazyfs

import (
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Op names a class of operations that InjectFault can make fail, so tests
// can aim at the error path they care about.
type Op string

const (
	// OpWrite covers data changes: write(2), mmap writeback, truncate and
	// fallocate.
	OpWrite Op = "write"
	// OpFsync covers fsync, fdatasync, msync(MS_SYNC), io_uring fsync and
	// directory fsync.
	OpFsync Op = "fsync"
	// OpCreate covers every operation that makes a new name or inode:
	// create, mkdir, mknod, symlink, link and O_TMPFILE.
	OpCreate Op = "create"
)

// fault is one injected failure.
type fault struct {
	id     uint64
	op     Op
	prefix string
	err    syscall.Errno
}

// faultSet holds the active faults; active lets the hot paths skip the
// lock and the path computation when there are none.
type faultSet struct {
	mu     sync.Mutex
	list   []fault
	nextID uint64
	active atomic.Int32
}

// InjectFault makes matching operations fail with err until clear is
// called, to exercise the error paths of the programs under test. op is one
// of OpWrite, OpFsync and OpCreate; pathPrefix is a plain string prefix of
// the slash-separated path relative to the mount root ("" matches all; a
// leading "/" is ignored). For creations the path is that of the new entry.
// After PowerLoss changes fail with EIO whatever the faults. clear is
// idempotent.
func (f *FS) InjectFault(op Op, pathPrefix string, err syscall.Errno) (clear func()) {
	s := &f.faults
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	s.list = append(s.list, fault{id: id, op: op, prefix: strings.TrimLeft(pathPrefix, "/"), err: err})
	s.active.Add(1)
	s.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { s.remove(id) }) }
}

func (s *faultSet) remove(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, flt := range s.list {
		if flt.id == id {
			s.list = append(s.list[:i], s.list[i+1:]...)
			s.active.Add(-1)
			return
		}
	}
}

// check returns the errno of the first fault matching op at the path that
// path() yields, or 0; path is only computed when some fault is active.
func (s *faultSet) check(op Op, path func() string) syscall.Errno {
	if s.active.Load() == 0 {
		return 0
	}
	p := path()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, flt := range s.list {
		if flt.op == op && strings.HasPrefix(p, flt.prefix) {
			return flt.err
		}
	}
	return 0
}
