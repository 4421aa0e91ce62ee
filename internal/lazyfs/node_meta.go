package lazyfs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// The metadata operations below are the loopback's, applied to the backing
// directory at once (durable immediately); they are only gated so that they
// fail after the power is lost, and creations can be made to fail on demand.

// Mkdir creates a directory in the backing directory.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (ch *fs.Inode, errno syscall.Errno) {
	errno = n.guarded(OpCreate, func() string { return n.childPath(name) }, func() syscall.Errno {
		ch, errno = n.LoopbackNode.Mkdir(ctx, name, mode, out)
		return errno
	})
	return ch, errno
}

// Mknod creates a special file in the backing directory.
func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (ch *fs.Inode, errno syscall.Errno) {
	errno = n.guarded(OpCreate, func() string { return n.childPath(name) }, func() syscall.Errno {
		ch, errno = n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
		return errno
	})
	return ch, errno
}

// Symlink creates a symbolic link in the backing directory.
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (ch *fs.Inode, errno syscall.Errno) {
	errno = n.guarded(OpCreate, func() string { return n.childPath(name) }, func() syscall.Errno {
		ch, errno = n.LoopbackNode.Symlink(ctx, target, name, out)
		return errno
	})
	return ch, errno
}

// Link creates a hard link in the backing directory; the overlay, keyed by
// inode, is shared by both names.
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (ch *fs.Inode, errno syscall.Errno) {
	errno = n.guarded(OpCreate, func() string { return n.childPath(name) }, func() syscall.Errno {
		ch, errno = n.LoopbackNode.Link(ctx, target, name, out)
		if errno == 0 {
			errno = n.lfs.logicalAttr(keyOf(ch), &out.Attr, n.lstatChild(name, &out.Attr))
		}
		return errno
	})
	return ch, errno
}

// Rename renames in the backing directory; overlays follow their inodes.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return n.guarded("", nil, func() syscall.Errno {
		return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
	})
}

// Unlink removes a name in the backing directory. The inode's overlay goes
// when the kernel forgets the inode (see OnForget), because open handles
// and mappings may still use it until then.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.guarded("", nil, func() syscall.Errno {
		return n.LoopbackNode.Unlink(ctx, name)
	})
}

// Rmdir removes a directory in the backing directory.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.guarded("", nil, func() syscall.Errno {
		return n.LoopbackNode.Rmdir(ctx, name)
	})
}

// Setxattr sets an extended attribute on the backing file.
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return n.guarded("", nil, func() syscall.Errno {
		return n.LoopbackNode.Setxattr(ctx, attr, data, flags)
	})
}

// Removexattr removes an extended attribute from the backing file.
func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return n.guarded("", nil, func() syscall.Errno {
		return n.LoopbackNode.Removexattr(ctx, attr)
	})
}
