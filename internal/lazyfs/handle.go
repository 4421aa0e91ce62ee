package lazyfs

import (
	"context"
	"fmt"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// handle is an open file. Reads merge the inode's overlay over the backing
// file, writes go to the overlay, fsync applies it. It deliberately offers
// no passthrough, ioctl or locking of its own, which would bypass the
// overlay (locks stay local to the kernel).
type handle struct {
	// lf is the loopback handle on the backing file; it serves
	// attributes and Release.
	lf *fs.LoopbackFile
	// fd is lf's descriptor, valid until Release.
	fd   int
	node *node
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileFsyncer   = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileGetattrer = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
)

// newHandle wraps a handle the loopback opened.
func (n *node) newHandle(raw fs.FileHandle) (*handle, syscall.Errno) {
	lf, ok := raw.(*fs.LoopbackFile)
	if !ok {
		if r, ok := raw.(fs.FileReleaser); ok {
			r.Release(context.Background())
		}
		return nil, syscall.EIO
	}
	fd, ok := lf.PassthroughFd()
	if !ok {
		lf.Release(context.Background())
		return nil, syscall.EBADF
	}
	return &handle{lf: lf, fd: fd, node: n}, 0
}

func (h *handle) lfs() *FS { return h.node.lfs }

// Read returns the logical content: merged from the overlay if the inode
// has one, else read from the backing file.
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	tab := &h.lfs().tab
	key := h.node.key()
	stripe := tab.stripeEpoch(key)
	for {
		if ov := tab.get(key); ov != nil {
			n, live, err := ov.readLive(dest, off)
			if !live {
				continue
			}
			if err != nil {
				return nil, h.lfs().fail("read", err)
			}
			return fuse.ReadResultData(dest[:n]), 0
		}
		// The backing bytes are the truth unless an overlay appeared or
		// was applied while they were read (see table.epoch).
		epoch := stripe.Load()
		n, err := preadFull(h.fd, dest, off)
		if err != nil {
			return nil, h.lfs().fail("read", err)
		}
		if tab.get(key) == nil && stripe.Load() == epoch {
			return fuse.ReadResultData(dest[:n]), 0
		}
	}
}

// preadFull reads from fd at off until dest is full or the file ends.
func preadFull(fd int, dest []byte, off int64) (int, error) {
	total := 0
	for total < len(dest) {
		n, err := unix.Pread(fd, dest[total:], off+int64(total))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return total, fmt.Errorf("lazyfs: read backing at %d: %w", off, err)
		}
		if n == 0 {
			break
		}
		total += n
	}
	return total, nil
}

// Write records data in the overlay; nothing reaches the backing file until
// an fsync.
func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	var written uint32
	errno := h.change(func(ov *overlay) syscall.Errno {
		if err := ov.write(data, off); err != nil {
			return h.lfs().fail("write", err)
		}
		written = uint32(len(data))
		return 0
	})
	return written, errno
}

// Allocate records the size and zeroing effects of fallocate in the
// overlay; preallocation itself has no visible effect and is not passed on.
func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	return h.change(func(ov *overlay) syscall.Errno {
		return ov.allocate(int64(off), int64(size), mode)
	})
}

// change runs a data change on the inode's overlay under the gate, after
// the write fault check.
func (h *handle) change(fn func(ov *overlay) syscall.Errno) syscall.Errno {
	f := h.lfs()
	leave, errno := f.enter()
	if errno != 0 {
		return errno
	}
	defer leave()
	if errno := f.faults.check(OpWrite, h.node.relPath); errno != 0 {
		return errno
	}
	ov, err := f.tab.acquire(h.node.key(), h.node.opener(h))
	if err != nil {
		return f.fail("open overlay", err)
	}
	defer ov.mu.Unlock()
	return fn(ov)
}

// Fsync makes the inode's unsynced changes durable, whichever handle wrote
// them.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return h.node.fsync()
}

// fsync applies and retires the node's overlay.
func (n *node) fsync() syscall.Errno {
	f := n.lfs
	leave, errno := f.enter()
	if errno != 0 {
		return errno
	}
	defer leave()
	if errno := f.faults.check(OpFsync, n.relPath); errno != 0 {
		return errno
	}
	ov := f.tab.get(n.key())
	if ov == nil {
		return 0
	}
	ov.mu.Lock()
	defer ov.mu.Unlock()
	if ov.removed {
		// Another fsync applied it (completely: it held the lock).
		return 0
	}
	if err := ov.apply(f.opts.SyncBacking); err != nil {
		f.logf("fsync: %v", err)
		return syscall.EIO
	}
	f.tab.remove(ov)
	return 0
}

// Flush (close) persists nothing: closing a file does not make it durable.
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	return 0
}

// Release closes the backing descriptor; the overlay outlives the handle.
func (h *handle) Release(ctx context.Context) syscall.Errno {
	return h.lf.Release(ctx)
}

// Getattr reports the backing attributes with the logical size.
func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.lfs().logicalAttr(h.node.key(), &out.Attr, h.fstat(&out.Attr))
}

// fstat returns a function that fills a from the backing descriptor.
func (h *handle) fstat(a *fuse.Attr) func() syscall.Errno {
	return func() syscall.Errno {
		var st syscall.Stat_t
		if err := syscall.Fstat(h.fd, &st); err != nil {
			return fs.ToErrno(err)
		}
		a.FromStat(&st)
		return 0
	}
}

// allocate applies fallocate to the logical file: mode 0 may extend it,
// punching a hole or zeroing a range makes bytes read as zeros, and
// KEEP_SIZE alone changes nothing visible. o must be locked.
func (o *overlay) allocate(off, length int64, mode uint32) syscall.Errno {
	end := off + length
	keep := mode&unix.FALLOC_FL_KEEP_SIZE != 0
	switch mode &^ unix.FALLOC_FL_KEEP_SIZE {
	case 0:
	case unix.FALLOC_FL_PUNCH_HOLE, unix.FALLOC_FL_ZERO_RANGE:
		if err := o.zero(off, end); err != nil {
			return syscall.EIO
		}
	default:
		return syscall.EOPNOTSUPP
	}
	if !keep && end > o.size {
		o.size = end
	}
	return 0
}
