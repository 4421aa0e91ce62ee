package storage

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"rocketraft/storage/vfs"
)

// Index file layout (§6.4).
const (
	indexHeaderSize = 40
	indexSlotSize   = 4
	indexEntrySize  = 20
)

// indexFile is one mapped index file: header, slot table, entries numbered from 1.
type indexFile struct {
	name  string // yyyyMMddHHmmssSSS
	id    int64  // name as a number, for ordering
	m     vfs.Mapping
	b     []byte
	slots int
	num   int
}

func (f *indexFile) i64(off int) int64      { return int64(binary.BigEndian.Uint64(f.b[off:])) }
func (f *indexFile) i32(off int) int32      { return int32(binary.BigEndian.Uint32(f.b[off:])) }
func (f *indexFile) put64(off int, v int64) { binary.BigEndian.PutUint64(f.b[off:], uint64(v)) }
func (f *indexFile) put32(off int, v int32) { binary.BigEndian.PutUint32(f.b[off:], uint32(v)) }

func (f *indexFile) beginTimestamp() int64 { return f.i64(0) }
func (f *indexFile) endTimestamp() int64   { return f.i64(8) }
func (f *indexFile) beginPhyOffset() int64 { return f.i64(16) }
func (f *indexFile) endPhyOffset() int64   { return f.i64(24) }
func (f *indexFile) indexCount() int32 {
	c := f.i32(36)
	if c < 1 {
		return 1
	}
	return min(c, int32(f.num))
}

// free reports how many more entries fit.
func (f *indexFile) free() int { return f.num - int(f.indexCount()) }

// put adds one entry; the caller has checked free() > 0.
func (f *indexFile) put(hash int32, phys, storeTS int64) {
	count := f.indexCount()
	if count == 1 {
		f.put64(0, storeTS)
		f.put64(16, phys)
	}
	slotPos := indexHeaderSize + int(hash%int32(f.slots))*indexSlotSize
	prev := f.i32(slotPos)
	if prev <= 0 || prev >= count {
		prev = 0
		f.put32(32, f.i32(32)+1)
	}
	diff := (storeTS - f.beginTimestamp()) / 1000
	diff = max(0, min(diff, math.MaxInt32))
	e := indexHeaderSize + f.slots*indexSlotSize + int(count)*indexEntrySize
	f.put32(e, hash)
	f.put64(e+4, phys)
	f.put32(e+12, int32(diff))
	f.put32(e+16, prev)
	f.put32(slotPos, count)
	f.put32(36, count+1)
	f.put64(8, storeTS)
	f.put64(24, phys)
}

// lookup walks the slot chain of hash newest-first and appends the commitlog offsets of
// entries with that hash stored within [begin, end], up to maxNum results in total.
func (f *indexFile) lookup(hash int32, begin, end int64, maxNum int, out []int64) []int64 {
	count := f.indexCount()
	cur := f.i32(indexHeaderSize + int(hash%int32(f.slots))*indexSlotSize)
	base := f.beginTimestamp()
	for cur > 0 && cur < count && len(out) < maxNum {
		e := indexHeaderSize + f.slots*indexSlotSize + int(cur)*indexEntrySize
		ts := base + int64(f.i32(e+12))*1000
		if ts < begin {
			break
		}
		if f.i32(e) == hash && ts <= end {
			out = append(out, f.i64(e+4))
		}
		prev := f.i32(e + 16)
		if prev >= cur { // corrupt chain: never loop
			break
		}
		cur = prev
	}
	return out
}

// indexService owns the index files. The appender writes under mu; lookups read under it.
type indexService struct {
	fs    vfs.FS
	dir   string
	slots int
	num   int
	now   func() time.Time

	mu    sync.RWMutex
	files []*indexFile // oldest first
	dirty map[*indexFile]bool
}

func indexFileSize(slots, num int) int64 {
	return indexHeaderSize + int64(slots)*indexSlotSize + int64(num)*indexEntrySize
}

func openIndexService(fsys vfs.FS, root string, slots, num int, now func() time.Time) (*indexService, error) {
	x := &indexService{fs: fsys, dir: filepath.Join(root, "index"), slots: slots, num: num, now: now, dirty: map[*indexFile]bool{}}
	if err := fsys.MkdirAll(x.dir); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	names, err := fsys.ReadDir(x.dir)
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	for _, n := range names {
		id, err := strconv.ParseInt(n, 10, 64)
		if err != nil || len(n) != 17 {
			continue
		}
		f, err := x.mapFile(n, id)
		if err != nil {
			x.close()
			return nil, err
		}
		x.files = append(x.files, f)
	}
	return x, nil
}

func (x *indexService) mapFile(name string, id int64) (*indexFile, error) {
	m, err := x.fs.Map(filepath.Join(x.dir, name), indexFileSize(x.slots, x.num))
	if err != nil {
		return nil, fmt.Errorf("index file %s: %w", name, err)
	}
	return &indexFile{name: name, id: id, m: m, b: m.Bytes(), slots: x.slots, num: x.num}, nil
}

// ensure makes sure the active file can take n more entries, starting a new file when it
// cannot. Called by the appender before it writes anything.
func (x *indexService) ensure(n int) error {
	last, fits := x.fits(n)
	if fits {
		return nil
	}
	now := x.now()
	id, _ := strconv.ParseInt(fmt.Sprintf("%s%03d", now.Format("20060102150405"), now.Nanosecond()/1e6), 10, 64)
	if last != nil && id <= last.id {
		id = last.id + 1
	}
	f, err := x.mapFile(strconv.FormatInt(id, 10), id)
	if err != nil {
		return err
	}
	x.mu.Lock()
	x.files = append(x.files, f)
	x.mu.Unlock()
	return nil
}

// fits returns the active file and whether it can take n more entries without ensure starting
// a new one.
func (x *indexService) fits(n int) (*indexFile, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if len(x.files) == 0 {
		return nil, false
	}
	last := x.files[len(x.files)-1]
	return last, last.free() >= n || last.indexCount() == 1
}

// add indexes one record's keys in the active file (ensure has made room). Keys that do not
// fit (more keys in one append than a file holds) are dropped.
func (x *indexService) add(hashes []int32, phys, storeTS int64) {
	if len(hashes) == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.files) == 0 {
		return
	}
	f := x.files[len(x.files)-1]
	for _, h := range hashes {
		if f.free() <= 0 {
			return
		}
		f.put(h, phys, storeTS)
	}
	x.dirty[f] = true
}

// query returns commitlog offsets of entries with hash within [begin, end], newest file first.
func (x *indexService) query(hash int32, maxNum int, begin, end int64) (offs []int64, lastTS, lastPhys int64) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if n := len(x.files); n > 0 {
		lastTS, lastPhys = x.files[n-1].endTimestamp(), x.files[n-1].endPhyOffset()
	}
	for i := len(x.files) - 1; i >= 0 && len(offs) < maxNum; i-- {
		f := x.files[i]
		if f.indexCount() == 1 || f.endTimestamp() < begin || f.beginTimestamp() > end {
			continue
		}
		offs = f.lookup(hash, begin, end, maxNum, offs)
	}
	return offs, lastTS, lastPhys
}

// active describes the newest file for the checkpoint: its id, and where re-indexing must
// start if it is lost (its first entry's offset, or dispatched when it is empty).
func (x *indexService) active(dispatched int64) (id, from int64) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if len(x.files) == 0 {
		return 0, dispatched
	}
	f := x.files[len(x.files)-1]
	if f.indexCount() == 1 {
		return f.id, dispatched
	}
	return f.id, f.beginPhyOffset()
}

// sync makes every file written since the last sync durable, except files with id >= skipFrom,
// which stay dirty for a later sync (pass math.MaxInt64 to sync all). It holds mu, so the
// appender waits for it: slots anywhere in the file may change with each entry, and a sync must
// not read bytes being written (MemFS copies them), nor a file retention is removing.
func (x *indexService) sync(skipFrom int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	for f := range x.dirty {
		if f.id >= skipFrom {
			continue
		}
		if err := f.m.Sync(0, len(f.b)); err != nil {
			return fmt.Errorf("index file %s: %w", f.name, err)
		}
		delete(x.dirty, f)
	}
	return nil
}

// removeIf deletes the files for which drop is true.
func (x *indexService) removeIf(drop func(f *indexFile, last bool) bool) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	keep := x.files[:0]
	var firstErr error
	for i, f := range x.files {
		if !drop(f, i == len(x.files)-1) {
			keep = append(keep, f)
			continue
		}
		delete(x.dirty, f)
		f.m.Close()
		if err := x.fs.Remove(filepath.Join(x.dir, f.name)); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("remove index file %s: %w", f.name, err)
		}
	}
	clear(x.files[len(keep):])
	x.files = keep
	return firstErr
}

func (x *indexService) close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, f := range x.files {
		f.m.Close()
	}
	x.files = nil
}
