package lazyfs

import (
	"context"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Attributes must describe the logical file. While an inode has an overlay,
// the overlay's size is the truth whenever it was read; without one, a stat
// of the backing file is the truth unless an overlay of that inode was
// applied while the stat ran (the stat could have seen the file half
// written, or before). Each retirement of an overlay bumps an epoch, so a
// stat is retried when the epoch moved under it.

// Lookup reports the logical size of the entry it finds.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	epoch := n.lfs.tab.epoch.Load()
	ch, errno := n.LoopbackNode.Lookup(ctx, name, out)
	if errno != 0 {
		return nil, errno
	}
	key := keyOf(ch)
	// The inode was unknown before the stat, so the first round checks the
	// epoch of all inodes; retries use the inode's own stripe.
	if n.lfs.patchAttr(key, &out.Attr) || n.lfs.tab.epoch.Load() == epoch {
		return ch, 0
	}
	return ch, n.lfs.logicalAttr(key, &out.Attr, n.lstatChild(name, &out.Attr))
}

// lstatChild returns a function that fills a from the backing entry name.
func (n *node) lstatChild(name string, a *fuse.Attr) func() syscall.Errno {
	return func() syscall.Errno {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(n.backingPath(), name), &st); err != nil {
			return fs.ToErrno(err)
		}
		a.FromStat(&st)
		return 0
	}
}

// Getattr reports the logical size and the time of the last unsynced change.
func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	var inner fs.FileHandle
	if h, ok := f.(*handle); ok {
		inner = h.lf
	}
	return n.lfs.logicalAttr(n.key(), &out.Attr, func() syscall.Errno {
		return n.LoopbackNode.Getattr(ctx, inner, out)
	})
}

// logicalAttr runs stat, which fills a from the backing file, until a
// describes the logical file of key (see above).
func (f *FS) logicalAttr(key inodeKey, a *fuse.Attr, stat func() syscall.Errno) syscall.Errno {
	stripe := f.tab.stripeEpoch(key)
	for {
		epoch := stripe.Load()
		if errno := stat(); errno != 0 {
			return errno
		}
		if f.patchAttr(key, a) || stripe.Load() == epoch {
			return 0
		}
	}
}

// patchAttr overrides the size (and the mtime, if older) with the
// overlay's; it reports whether key has a live overlay.
func (f *FS) patchAttr(key inodeKey, a *fuse.Attr) bool {
	ov := f.tab.get(key)
	if ov == nil {
		return false
	}
	ov.mu.RLock()
	defer ov.mu.RUnlock()
	if ov.removed {
		return false
	}
	a.Size = uint64(ov.size)
	if mt := ov.mtime; !mt.IsZero() && mt.After(a.ModTime()) {
		a.SetTimes(nil, &mt, &mt)
	}
	return true
}

// clearMtime lets an explicitly set mtime win over the overlay's.
func (f *FS) clearMtime(key inodeKey) {
	if ov := f.tab.get(key); ov != nil {
		ov.mu.Lock()
		ov.mtime = time.Time{}
		ov.mu.Unlock()
	}
}
