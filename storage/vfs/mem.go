package vfs

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
)

// Op names an operation class that MemFS can be told to fail.
type Op int

// Operations MemFS can fail.
const (
	// OpCreate is the creation of a new file by Map (open + preallocate).
	OpCreate Op = iota
	// OpWrite is WriteFile.
	OpWrite
	// OpSync is Mapping.Sync.
	OpSync
	// OpRename is Rename.
	OpRename
	// OpRemove is Remove.
	OpRemove
	// OpWriteAt is Mapping.WriteAt.
	OpWriteAt
	numOps
)

// String names the operation in injected errors.
func (o Op) String() string {
	return [...]string{"create", "write", "sync", "rename", "remove", "pwrite"}[o]
}

// MemFS is an in-memory FS for tests. It remembers, per file, which bytes have been synced, so
// Crash can produce what a power loss would leave; it can fail chosen operations and pretend the
// disk is full. It is safe for concurrent use.
type MemFS struct {
	mu    sync.Mutex
	files map[string]*memFile
	dirs  map[string]bool
	locks map[string]bool
	nth   [numOps]int  // fail the nth next call (counting down); 0 = off
	all   [numOps]bool // fail every call
	calls [numOps]int
	// blocking counts the OpSync calls made through SyncBlocking.
	blocking int
	full     bool
	usage    *Usage
	total    uint64
	clock    func() time.Time
}

type memFile struct {
	data   []byte
	synced []byte
	mod    time.Time
	// advice is the last Advice given for each 4 KiB page (0: none), kept for AdviceAt.
	advice []Advice
}

var _ FS = (*MemFS)(nil)

// NewMemFS returns an empty in-memory file system whose disk has capacity 1 TiB (see SetUsage).
func NewMemFS() *MemFS {
	return &MemFS{files: map[string]*memFile{}, dirs: map[string]bool{"/": true, ".": true}, locks: map[string]bool{}, total: 1 << 40, clock: time.Now}
}

// SetClock sets the clock used for modification times (retention tests).
func (m *MemFS) SetClock(now func() time.Time) { m.mu.Lock(); m.clock = now; m.mu.Unlock() }

// FailNth makes the nth next call of op fail (n = 1: the next one).
func (m *MemFS) FailNth(op Op, n int) { m.mu.Lock(); m.nth[op] = n; m.mu.Unlock() }

// FailAll makes every call of op fail from now on (until ClearFaults).
func (m *MemFS) FailAll(op Op) { m.mu.Lock(); m.all[op] = true; m.mu.Unlock() }

// ClearFaults stops all injected failures and full-disk mode.
func (m *MemFS) ClearFaults() {
	m.mu.Lock()
	m.nth, m.all, m.full = [numOps]int{}, [numOps]bool{}, false
	m.mu.Unlock()
}

// SetFull switches full-disk mode: creating files and WriteFile fail with ErrNoSpace, and
// DiskUsage reports 100 %.
func (m *MemFS) SetFull(full bool) { m.mu.Lock(); m.full = full; m.mu.Unlock() }

// SetUsage overrides what DiskUsage reports (nil: the sum of file sizes over a 1 TiB disk).
func (m *MemFS) SetUsage(u *Usage) { m.mu.Lock(); m.usage = u; m.mu.Unlock() }

// Calls returns how many times op has been called (failed calls included).
func (m *MemFS) Calls(op Op) int { m.mu.Lock(); defer m.mu.Unlock(); return m.calls[op] }

// BlockingSyncs is how many of the OpSync calls were Mapping.SyncBlocking: a test tells a caller
// that waits for its fsync on its own thread from one that goes through the ring.
func (m *MemFS) BlockingSyncs() int { m.mu.Lock(); defer m.mu.Unlock(); return m.blocking }

// Crash returns a new MemFS holding what a power loss would leave: the namespace as it is, and
// for every file only the bytes that were synced (the rest reads as it was at the last sync, or
// zero). Mappings of the old FS keep working on the old FS only. Locks are released.
func (m *MemFS) Crash() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := NewMemFS()
	n.clock = m.clock
	n.total = m.total
	for k, v := range m.dirs {
		n.dirs[k] = v
	}
	for k, f := range m.files {
		n.files[k] = &memFile{data: bytes.Clone(f.synced), synced: bytes.Clone(f.synced), mod: f.mod}
	}
	return n
}

// PageSize is the granularity at which CrashKeeping decides what survives.
const PageSize = 4096

// CrashKeeping is Crash where, for every page holding unsynced changes, keep decides whether
// the page's new contents reached the disk anyway (the OS writes dirty pages back in any
// order, so a later page may survive while an earlier one is lost).
func (m *MemFS) CrashKeeping(keep func(name string, page int) bool) *MemFS {
	m.mu.Lock()
	for name, f := range m.files {
		for p := 0; p*PageSize < len(f.data); p++ {
			a, b := p*PageSize, min((p+1)*PageSize, len(f.data))
			if !bytes.Equal(f.data[a:b], f.synced[a:b]) && keep(name, p) {
				copy(f.synced[a:b], f.data[a:b])
			}
		}
	}
	m.mu.Unlock()
	return m.Crash()
}

// ReadFile returns a copy of the current (not necessarily synced) contents of name.
func (m *MemFS) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.files[clean(name)]
	if !ok {
		return nil, fmt.Errorf("read %s: %w", name, fs.ErrNotExist)
	}
	return bytes.Clone(f.data), nil
}

// fault reports the injected error for one call of op; m.mu must be held.
func (m *MemFS) fault(op Op, name string) error {
	m.calls[op]++
	if m.all[op] {
		return fmt.Errorf("%s %s: %w", op, name, ErrInjected)
	}
	if m.nth[op] > 0 {
		m.nth[op]--
		if m.nth[op] == 0 {
			return fmt.Errorf("%s %s: %w", op, name, ErrInjected)
		}
	}
	return nil
}

func clean(name string) string { return path.Clean(name) }

func (m *MemFS) checkParent(name string) error {
	if dir := path.Dir(name); !m.dirs[dir] {
		return fmt.Errorf("%s: parent %s: %w", name, dir, fs.ErrNotExist)
	}
	return nil
}

// Map implements FS.
func (m *MemFS) Map(name string, size int64) (Mapping, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.files[name]
	if !ok {
		if err := m.checkParent(name); err != nil {
			return nil, fmt.Errorf("map: %w", err)
		}
		if err := m.fault(OpCreate, name); err != nil {
			return nil, err
		}
		if m.full {
			return nil, fmt.Errorf("map %s: %w", name, ErrNoSpace)
		}
		f = &memFile{data: make([]byte, size), synced: make([]byte, size), mod: m.clock()}
		m.files[name] = f
	}
	if n := int64(len(f.data)); n < size {
		// Cut short by a crash (FS.Map's contract): extended with zeros, durably.
		f.data = append(f.data, make([]byte, size-n)...)
		f.synced = append(f.synced, make([]byte, size-n)...)
	} else if n > size {
		return nil, fmt.Errorf("map %s: file has %d bytes, more than the %d expected", name, n, size)
	}
	return &memMapping{fs: m, f: f, name: name}, nil
}

type memMapping struct {
	fs   *MemFS
	f    *memFile
	name string
}

// Bytes implements Mapping; all mappings of a file share its bytes.
func (mm *memMapping) Bytes() []byte { return mm.f.data }

// WriteAt implements Mapping: it copies p into the file's bytes (not synced).
func (mm *memMapping) WriteAt(p []byte, off int) error {
	mm.fs.mu.Lock()
	defer mm.fs.mu.Unlock()
	if err := mm.fs.fault(OpWriteAt, mm.name); err != nil {
		return err
	}
	if off < 0 || off+len(p) > len(mm.f.data) {
		return fmt.Errorf("write %s [%d,+%d): out of range", mm.name, off, len(p))
	}
	copy(mm.f.data[off:], p)
	return nil
}

// Sync implements Mapping: it copies [off, off+n) to the synced image Crash keeps.
func (mm *memMapping) Sync(off, n int) error {
	mm.fs.mu.Lock()
	defer mm.fs.mu.Unlock()
	if err := mm.fs.fault(OpSync, mm.name); err != nil {
		return err
	}
	if off < 0 || n < 0 || off+n > len(mm.f.data) {
		return fmt.Errorf("sync %s [%d,+%d): out of range", mm.name, off, n)
	}
	copy(mm.f.synced[off:off+n], mm.f.data[off:off+n])
	mm.f.mod = mm.fs.clock()
	return nil
}

// SyncBlocking implements Mapping as Sync (the same fault injection: OpSync), counted apart
// (MemFS.BlockingSyncs).
func (mm *memMapping) SyncBlocking(off, n int) error {
	mm.fs.mu.Lock()
	mm.fs.blocking++
	mm.fs.mu.Unlock()
	return mm.Sync(off, n)
}

// Advise implements Mapping: it records the advice per 4 KiB page touched (see AdviceAt).
func (mm *memMapping) Advise(off, n int, a Advice) error {
	mm.fs.mu.Lock()
	defer mm.fs.mu.Unlock()
	if off < 0 || n < 0 || off+n > len(mm.f.data) {
		return fmt.Errorf("advise %s [%d,+%d): out of range", mm.name, off, n)
	}
	if a != AdviceAppend && a != AdviceRead {
		return fmt.Errorf("advise %s: unknown advice %v", mm.name, a)
	}
	if n == 0 {
		return nil
	}
	if mm.f.advice == nil {
		mm.f.advice = make([]Advice, (len(mm.f.data)+memPage-1)/memPage)
	}
	for p := off / memPage; p <= (off+n-1)/memPage; p++ {
		mm.f.advice[p] = a
	}
	return nil
}

// memPage is the page size MemFS records advice in.
const memPage = 4096

// AdviceAt is the last advice given for the page holding byte off of name, 0 if none: what
// the OS implementation's madvise would have left there.
func (m *MemFS) AdviceAt(name string, off int) Advice {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.files[clean(name)]
	if f == nil || f.advice == nil || off < 0 || off/memPage >= len(f.advice) {
		return 0
	}
	return f.advice[off/memPage]
}

// Close implements Mapping; the bytes stay valid (tests may still look).
func (mm *memMapping) Close() error { return nil }

// WriteFile implements FS.
func (m *MemFS) WriteFile(name string, data []byte) error {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkParent(name); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := m.fault(OpWrite, name); err != nil {
		return err
	}
	if m.full {
		return fmt.Errorf("write %s: %w", name, ErrNoSpace)
	}
	m.files[name] = &memFile{data: bytes.Clone(data), synced: bytes.Clone(data), mod: m.clock()}
	return nil
}

// ReadDir implements FS.
func (m *MemFS) ReadDir(dir string) ([]string, error) {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[dir] {
		return nil, fmt.Errorf("read dir %s: %w", dir, fs.ErrNotExist)
	}
	seen := map[string]bool{}
	add := func(p string) {
		if path.Dir(p) == dir && p != dir {
			seen[path.Base(p)] = true
		}
	}
	for p := range m.files {
		add(p)
	}
	for p := range m.dirs {
		add(p)
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (FileInfo, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.files[name]; ok {
		return FileInfo{Size: int64(len(f.data)), ModTime: f.mod}, nil
	}
	if m.dirs[name] {
		return FileInfo{IsDir: true}, nil
	}
	return FileInfo{}, fmt.Errorf("stat %s: %w", name, fs.ErrNotExist)
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.fault(OpRemove, name); err != nil {
		return err
	}
	prefix := name + "/"
	delete(m.files, name)
	delete(m.dirs, name)
	for p := range m.files {
		if strings.HasPrefix(p, prefix) {
			delete(m.files, p)
		}
	}
	for p := range m.dirs {
		if strings.HasPrefix(p, prefix) {
			delete(m.dirs, p)
		}
	}
	return nil
}

// Rename implements FS. A directory is moved with everything below it; newName must not
// exist then (as with rename(2) onto a non-empty directory).
func (m *MemFS) Rename(oldName, newName string) error {
	oldName, newName = clean(oldName), clean(newName)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.fault(OpRename, oldName); err != nil {
		return err
	}
	if err := m.checkParent(newName); err != nil {
		return fmt.Errorf("rename: %w", err)
	}
	if m.dirs[oldName] {
		return m.renameDir(oldName, newName)
	}
	f, ok := m.files[oldName]
	if !ok {
		return fmt.Errorf("rename %s: %w", oldName, fs.ErrNotExist)
	}
	delete(m.files, oldName)
	m.files[newName] = f
	return nil
}

// renameDir moves directory oldName and its contents to newName; m.mu is held.
func (m *MemFS) renameDir(oldName, newName string) error {
	if _, ok := m.files[newName]; ok || m.dirs[newName] {
		return fmt.Errorf("rename %s: %s exists", oldName, newName)
	}
	if strings.HasPrefix(newName+"/", oldName+"/") {
		return fmt.Errorf("rename %s into itself", oldName)
	}
	prefix := oldName + "/"
	for p, f := range m.files {
		if strings.HasPrefix(p, prefix) {
			delete(m.files, p)
			m.files[newName+"/"+p[len(prefix):]] = f
		}
	}
	var dirs []string
	for d := range m.dirs {
		if d == oldName || strings.HasPrefix(d, prefix) {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		delete(m.dirs, d)
		m.dirs[newName+d[len(oldName):]] = true
	}
	return nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(dir string) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := dir; !m.dirs[d]; d = path.Dir(d) {
		if _, isFile := m.files[d]; isFile {
			return fmt.Errorf("mkdir %s: %s is a file", dir, d)
		}
		m.dirs[d] = true
	}
	return nil
}

// DiskUsage implements FS: the SetUsage override, 100 % in full mode, else the sum of file sizes
// over a 1 TiB disk.
func (m *MemFS) DiskUsage(string) (Usage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.usage != nil {
		return *m.usage, nil
	}
	if m.full {
		return Usage{Total: m.total, Used: m.total}, nil
	}
	var used uint64
	for _, f := range m.files {
		used += uint64(len(f.data))
	}
	return Usage{Total: m.total, Used: used}, nil
}

type memLock struct {
	m    *MemFS
	name string
	once sync.Once
}

// Close releases the lock.
func (l *memLock) Close() error {
	l.once.Do(func() {
		l.m.mu.Lock()
		delete(l.m.locks, l.name)
		l.m.mu.Unlock()
	})
	return nil
}

// Lock implements FS; the lock is held per MemFS.
func (m *MemFS) Lock(name string) (io.Closer, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.locks[name] {
		return nil, fmt.Errorf("lock %s: %w", name, ErrLocked)
	}
	if err := m.checkParent(name); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if _, ok := m.files[name]; !ok {
		m.files[name] = &memFile{mod: m.clock()}
	}
	m.locks[name] = true
	return &memLock{m: m, name: name}, nil
}
