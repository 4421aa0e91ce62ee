package lazyfs

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// pageSize is the granule of the overlay and of torn writeback at power loss.
const pageSize = 4096

// noCut marks an overlay whose file was not truncated since its last sync.
const noCut = math.MaxInt64

// overlay holds the unsynced state of one backing inode. A byte at offset x
// of the logical file is: the overlay page's byte if a page covers x; else
// the backing file's byte if x < min(cut, base); else zero. Invariants:
// min(cut, base) <= size, and page bytes at or past size are zero.
type overlay struct {
	mu  sync.RWMutex
	key inodeKey
	// file is a read-write descriptor on the backing inode, owned by the
	// overlay; it stays valid across renames and after the last unlink.
	file *os.File
	// base is the backing file's size when the overlay was made; the
	// backing file does not change while the overlay exists.
	base  int64
	size  int64
	cut   int64
	pages map[int64][]byte
	// mtime is the time of the last unsynced change, reported by Getattr
	// when newer than the backing file's; zero when explicitly set since.
	mtime time.Time
	// removed is set, under mu, once the overlay left the table; holders
	// of a stale pointer must look the inode up again.
	removed  bool
	unsynced *atomic.Int64
}

func newOverlay(key inodeKey, file *os.File, base int64, unsynced *atomic.Int64) *overlay {
	return &overlay{
		key:      key,
		file:     file,
		base:     base,
		size:     base,
		cut:      noCut,
		pages:    make(map[int64][]byte),
		unsynced: unsynced,
	}
}

// dirty reports whether the overlay differs from the backing file.
func (o *overlay) dirty() bool {
	return len(o.pages) > 0 || o.size != o.base || o.cut != noCut
}

// visible is the end of the backing bytes that still show through.
func (o *overlay) visible() int64 {
	return min(o.cut, o.base)
}

// discard releases the pages and the descriptor; o must be locked.
func (o *overlay) discard() {
	o.unsynced.Add(-int64(len(o.pages)) * pageSize)
	o.pages = nil
	o.removed = true
	// Nothing is buffered in the descriptor, so a close error loses nothing.
	_ = o.file.Close()
}

// page returns page idx, materializing it from the logical content unless
// the caller is about to overwrite all of it.
func (o *overlay) page(idx int64, whole bool) ([]byte, error) {
	if p, ok := o.pages[idx]; ok {
		return p, nil
	}
	p := make([]byte, pageSize)
	if !whole {
		if _, err := o.readBacking(p, idx*pageSize); err != nil {
			return nil, err
		}
	}
	o.pages[idx] = p
	o.unsynced.Add(pageSize)
	return p, nil
}

// readBacking fills buf with the backing bytes visible at off and zeros
// past them; it returns how many bytes came from the backing file.
func (o *overlay) readBacking(buf []byte, off int64) (int, error) {
	n := int(max(0, min(int64(len(buf)), o.visible()-off)))
	got := 0
	if n > 0 {
		var err error
		got, err = o.file.ReadAt(buf[:n], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("lazyfs: read backing inode %d at %d: %w", o.key.ino, off, err)
		}
	}
	clear(buf[got:])
	return got, nil
}

// write records data at off; o must be locked.
func (o *overlay) write(data []byte, off int64) error {
	end := off + int64(len(data))
	for len(data) > 0 {
		idx, in := off/pageSize, int(off%pageSize)
		n := min(pageSize-in, len(data))
		p, err := o.page(idx, in == 0 && n == pageSize)
		if err != nil {
			return err
		}
		copy(p[in:], data[:n])
		off += int64(n)
		data = data[n:]
	}
	o.size = max(o.size, end)
	o.mtime = time.Now()
	return nil
}

// read fills buf with the logical content at off, up to the logical size,
// and returns how many bytes that is; o must be read-locked.
func (o *overlay) read(buf []byte, off int64) (int, error) {
	if off >= o.size {
		return 0, nil
	}
	buf = buf[:min(int64(len(buf)), o.size-off)]
	if _, err := o.readBacking(buf, off); err != nil {
		return 0, err
	}
	end := off + int64(len(buf))
	for idx := off / pageSize; idx*pageSize < end; idx++ {
		p, ok := o.pages[idx]
		if !ok {
			continue
		}
		start := idx * pageSize
		lo, hi := max(off, start), min(end, start+pageSize)
		copy(buf[lo-off:hi-off], p[lo-start:hi-start])
	}
	return len(buf), nil
}

// readLive is read under the overlay's read lock; live is false if the
// overlay was retired before the lock was had.
func (o *overlay) readLive(buf []byte, off int64) (n int, live bool, err error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.removed {
		return 0, false, nil
	}
	n, err = o.read(buf, off)
	return n, true, err
}

// truncate sets the logical size; bytes past a shrink read as zeros if the
// file grows again. o must be locked.
func (o *overlay) truncate(size int64) {
	if size < o.size {
		for idx := range o.pages {
			if idx*pageSize >= size {
				delete(o.pages, idx)
				o.unsynced.Add(-pageSize)
			}
		}
		if p, ok := o.pages[size/pageSize]; ok {
			clear(p[size%pageSize:])
		}
		o.cut = min(o.cut, size)
	}
	o.size = size
	o.mtime = time.Now()
}

// zero makes [off, end) read as zeros without changing the size; o must be
// locked. Only pages that could hold non-zero bytes are touched, so zeroing
// a large extension costs nothing.
func (o *overlay) zero(off, end int64) error {
	end = min(end, o.size)
	for idx, p := range o.pages {
		start := idx * pageSize
		if start < end && start+pageSize > off {
			clear(p[max(off-start, 0):min(end-start, pageSize)])
		}
	}
	for idx := off / pageSize; idx*pageSize < min(end, o.visible()); idx++ {
		if _, ok := o.pages[idx]; ok {
			continue
		}
		start := idx * pageSize
		p, err := o.page(idx, off <= start && end >= start+pageSize)
		if err != nil {
			return err
		}
		clear(p[max(off-start, 0):min(end-start, pageSize)])
	}
	o.mtime = time.Now()
	return nil
}
