package lazyfs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// dirHandle is an open directory: listing is the loopback's, fsync is gated
// (it fails after a power loss or under an injected fault) and otherwise
// succeeds at once, since directory changes are durable when made.
type dirHandle struct {
	inner fs.FileHandle
	node  *node
}

var (
	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
	_ fs.FileReleasedirer = (*dirHandle)(nil)
	_ fs.FileFsyncdirer   = (*dirHandle)(nil)
)

// Readdirent lists the backing directory.
func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if r, ok := d.inner.(fs.FileReaddirenter); ok {
		return r.Readdirent(ctx)
	}
	return nil, syscall.ENOTSUP
}

// Seekdir rewinds or repositions the listing.
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if s, ok := d.inner.(fs.FileSeekdirer); ok {
		return s.Seekdir(ctx, off)
	}
	return syscall.ENOTSUP
}

// Releasedir closes the backing directory.
func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	if r, ok := d.inner.(fs.FileReleasedirer); ok {
		r.Releasedir(ctx, flags)
	}
}

// Fsyncdir succeeds (entries are already in the backing directory) unless
// the power is lost or a fault says otherwise.
func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	f := d.node.lfs
	leave, errno := f.enter()
	if errno != 0 {
		return errno
	}
	defer leave()
	if errno := f.faults.check(OpFsync, d.node.relPath); errno != 0 {
		return errno
	}
	if s, ok := d.inner.(fs.FileFsyncdirer); ok && f.opts.SyncBacking {
		return s.Fsyncdir(ctx, flags)
	}
	return 0
}
