package lazyfs

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fs"
)

// inodeKey names a backing inode. The generation (derived by go-fuse from
// the birth time) tells apart two files that reuse one inode number.
type inodeKey struct {
	ino uint64
	gen uint64
}

func keyOf(in *fs.Inode) inodeKey {
	sa := in.StableAttr()
	return inodeKey{ino: sa.Ino, gen: sa.Gen}
}

func (k inodeKey) compare(o inodeKey) int {
	if c := cmp.Compare(k.ino, o.ino); c != 0 {
		return c
	}
	return cmp.Compare(k.gen, o.gen)
}

// epochStripes is how many inode groups have their own retirement epoch.
const epochStripes = 64

// table holds the overlays of all inodes with unsynced changes.
type table struct {
	mu sync.Mutex
	m  map[inodeKey]*overlay
	// unsynced counts the bytes held in overlay pages, over all overlays.
	unsynced atomic.Int64
	// epoch counts overlay retirements; stripes counts them per group of
	// inodes. A reader of the backing file that saw no overlay trusts what
	// it read only if its inode's count did not move meanwhile: the
	// backing file changes only just before an overlay is retired.
	epoch   atomic.Uint64
	stripes [epochStripes]atomic.Uint64
}

// stripeEpoch is the retirement count of the group of key.
func (t *table) stripeEpoch(key inodeKey) *atomic.Uint64 {
	return &t.stripes[(key.ino^key.gen)%epochStripes]
}

func (t *table) init() {
	t.m = make(map[inodeKey]*overlay)
}

// get returns the overlay of key, or nil if the inode has none. The caller
// must lock it and check removed before trusting it.
func (t *table) get(key inodeKey) *overlay {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[key]
}

// acquire returns the overlay of key locked for writing, creating it when
// absent; open supplies a read-write descriptor on the backing inode, which
// the new overlay owns.
func (t *table) acquire(key inodeKey, open func() (*os.File, error)) (*overlay, error) {
	for {
		ov := t.get(key)
		if ov == nil {
			var err error
			if ov, err = t.create(key, open); err != nil {
				return nil, err
			}
		}
		ov.mu.Lock()
		if !ov.removed {
			return ov, nil
		}
		ov.mu.Unlock()
	}
}

// create makes and registers a new overlay for key, unless another goroutine
// did first, in which case it returns that one.
func (t *table) create(key inodeKey, open func() (*os.File, error)) (*overlay, error) {
	file, err := open()
	if err != nil {
		return nil, fmt.Errorf("lazyfs: open backing inode %d: %w", key.ino, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if ov := t.m[key]; ov != nil {
		file.Close()
		return ov, nil
	}
	// The backing size is read under the table lock: an overlay of this
	// inode that was being applied has left the table only after its
	// writes completed, so the size is current.
	fi, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("lazyfs: stat backing inode %d: %w", key.ino, err)
	}
	ov := newOverlay(key, file, fi.Size(), &t.unsynced)
	t.m[key] = ov
	return ov, nil
}

// remove retires an overlay the caller holds locked: it leaves the table,
// gives back its memory and closes its descriptor.
func (t *table) remove(ov *overlay) {
	t.epoch.Add(1)
	t.stripeEpoch(ov.key).Add(1)
	t.mu.Lock()
	if t.m[ov.key] == ov {
		delete(t.m, ov.key)
	}
	t.mu.Unlock()
	ov.discard()
}

// snapshot lists the live overlays in key order, so that PowerLoss draws
// its random numbers in a reproducible order.
func (t *table) snapshot() []*overlay {
	t.mu.Lock()
	list := make([]*overlay, 0, len(t.m))
	for _, ov := range t.m {
		list = append(list, ov)
	}
	t.mu.Unlock()
	slices.SortFunc(list, func(a, b *overlay) int { return a.key.compare(b.key) })
	return list
}

// applyAll writes every overlay to its backing file (clean shutdown).
func (t *table) applyAll(syncBacking bool) error {
	var errs []error
	for _, ov := range t.snapshot() {
		ov.mu.Lock()
		if !ov.removed {
			if err := ov.apply(syncBacking); err != nil {
				errs = append(errs, err)
			}
		}
		ov.mu.Unlock()
	}
	return errors.Join(errs...)
}

// dropAll retires every overlay without applying it.
func (t *table) dropAll() {
	for _, ov := range t.snapshot() {
		ov.mu.Lock()
		if !ov.removed {
			t.remove(ov)
		}
		ov.mu.Unlock()
	}
}

// forgetUnlinked drops the overlay of key if its inode has no links left:
// nothing can read or persist that data any more.
func (t *table) forgetUnlinked(key inodeKey) {
	ov := t.get(key)
	if ov == nil {
		return
	}
	ov.mu.Lock()
	defer ov.mu.Unlock()
	if !ov.removed && ov.unlinked() {
		t.remove(ov)
	}
}
