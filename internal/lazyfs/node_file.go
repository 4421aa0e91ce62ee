package lazyfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Setattr records a size change in the overlay (an unsynced data change)
// and applies every other attribute to the backing file at once.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	leave, errno := n.lfs.enter()
	if errno != 0 {
		return errno
	}
	defer leave()
	h, _ := f.(*handle)
	if size, ok := in.GetSize(); ok {
		if errno := n.resize(h, int64(size), n.relPath); errno != 0 {
			return errno
		}
	}
	rest := *in
	rest.Valid &^= fuse.FATTR_SIZE
	var inner fs.FileHandle
	if h != nil {
		inner = h.lf
	}
	if errno := n.LoopbackNode.Setattr(ctx, inner, &rest, out); errno != 0 {
		return errno
	}
	if _, ok := in.GetMTime(); ok {
		n.lfs.clearMtime(n.key())
	}
	return n.Getattr(ctx, f, out)
}

// resize records a size change (truncate, ftruncate, O_TRUNC) in the
// overlay; path names the file for fault checks. The caller holds the gate.
func (n *node) resize(h *handle, size int64, path func() string) syscall.Errno {
	if errno := n.lfs.faults.check(OpWrite, path); errno != 0 {
		return errno
	}
	ov, err := n.lfs.tab.acquire(n.key(), n.opener(h))
	if err != nil {
		return n.lfs.fail("truncate", err)
	}
	defer ov.mu.Unlock()
	ov.truncate(size)
	return 0
}

// Open opens the backing file read-write (the overlay may need to read a
// page the caller is only writing) and records O_TRUNC in the overlay.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	raw, fuseFlags, errno := n.LoopbackNode.Open(ctx, backingFlags(flags))
	if errno != 0 {
		return nil, 0, errno
	}
	h, errno := n.newHandle(raw)
	if errno != 0 {
		return nil, 0, errno
	}
	if flags&syscall.O_TRUNC != 0 {
		if errno := n.truncateNow(h); errno != 0 {
			h.lf.Release(ctx)
			return nil, 0, errno
		}
	}
	return h, fuseFlags, 0
}

// truncateNow empties the file for an O_TRUNC open, under the gate.
func (n *node) truncateNow(h *handle) syscall.Errno {
	leave, errno := n.lfs.enter()
	if errno != 0 {
		return errno
	}
	defer leave()
	return n.resize(h, 0, n.relPath)
}

// Create creates the file in the backing directory (durable at once) and
// opens it like Open.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (ch *fs.Inode, fh fs.FileHandle, fuseFlags uint32, errno syscall.Errno) {
	errno = n.guarded(OpCreate, func() string { return n.childPath(name) }, func() syscall.Errno {
		var raw fs.FileHandle
		ch, raw, fuseFlags, errno = n.LoopbackNode.Create(ctx, name, backingFlags(flags), mode, out)
		if errno != 0 {
			return errno
		}
		// O_TRUNC matters only if the file existed with data.
		trunc := flags&syscall.O_TRUNC != 0 && out.Size > 0
		h, errno := n.adopt(ctx, ch, raw, trunc, func() string { return n.childPath(name) })
		if errno != 0 {
			return errno
		}
		if errno := n.lfs.logicalAttr(keyOf(ch), &out.Attr, h.fstat(&out.Attr)); errno != 0 {
			h.lf.Release(ctx)
			return errno
		}
		fh = h
		return 0
	})
	return ch, fh, fuseFlags, errno
}

// Tmpfile creates an unnamed file (O_TMPFILE) in the backing directory.
func (n *node) Tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (ch *fs.Inode, fh fs.FileHandle, fuseFlags uint32, errno syscall.Errno) {
	// The new file has no name: faults match on its directory, as "dir/".
	dirPath := func() string { return strings.TrimPrefix(n.relPath()+"/", "/") }
	errno = n.guarded(OpCreate, dirPath, func() syscall.Errno {
		var raw fs.FileHandle
		ch, raw, fuseFlags, errno = n.LoopbackNode.Tmpfile(ctx, backingFlags(flags), mode, out)
		if errno != 0 {
			return errno
		}
		h, errno := n.adopt(ctx, ch, raw, false, nil)
		if errno == 0 {
			fh = h
		}
		return errno
	})
	return ch, fh, fuseFlags, errno
}

// adopt wraps the loopback handle of a just-created child, which is not in
// the tree yet (path names it); the caller holds the gate.
func (n *node) adopt(ctx context.Context, ch *fs.Inode, raw fs.FileHandle, trunc bool, path func() string) (*handle, syscall.Errno) {
	child, ok := ch.Operations().(*node)
	if !ok {
		if r, ok := raw.(fs.FileReleaser); ok {
			r.Release(ctx)
		}
		return nil, syscall.EIO
	}
	h, errno := child.newHandle(raw)
	if errno != 0 {
		return nil, errno
	}
	if trunc {
		if errno := child.resize(h, 0, path); errno != 0 {
			h.lf.Release(ctx)
			return nil, errno
		}
	}
	return h, 0
}

// OpendirHandle wraps the loopback directory stream so that directory fsync
// is gated like file fsync.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	inner, fuseFlags, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &dirHandle{inner: inner, node: n}, fuseFlags, 0
}

// backingFlags adapts open flags for the backing descriptor: read-write so
// that partial pages can be read, and without the flags whose effect the
// overlay provides (O_TRUNC) or that would break its page I/O (O_DIRECT).
// O_SYNC and O_DSYNC are dropped too: the kernel follows each write on such
// a file with an FSYNC, which applies the overlay.
func backingFlags(flags uint32) uint32 {
	if flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		flags = flags&^syscall.O_ACCMODE | syscall.O_RDWR
	}
	return flags &^ (syscall.O_TRUNC | syscall.O_DIRECT | syscall.O_SYNC | syscall.O_DSYNC)
}

// opener returns how to get a read-write descriptor on the node's backing
// inode for a new overlay: through the handle if there is one (this works
// for unlinked files too), else by path.
func (n *node) opener(h *handle) func() (*os.File, error) {
	if h != nil {
		return func() (*os.File, error) {
			return os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", h.fd), os.O_RDWR, 0)
		}
	}
	return func() (*os.File, error) {
		return os.OpenFile(n.backingPath(), os.O_RDWR, 0)
	}
}

// fail logs an internal error and turns it into the errno for the caller.
func (f *FS) fail(what string, err error) syscall.Errno {
	f.logf("%s: %v", what, err)
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EIO
}
