package lazyfs

import (
	"context"
	"path"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is a loopback node that keeps file contents in overlays and refuses
// changes once the power is lost. Metadata operations are the loopback's,
// applied to the backing directory at once.
type node struct {
	*fs.LoopbackNode
	lfs *FS
}

// The interfaces node overrides; everything else is the loopback's.
var (
	_ fs.NodeWrapChilder    = (*node)(nil)
	_ fs.NodeOnForgetter    = (*node)(nil)
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeStatxer        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeTmpfiler       = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeSetxattrer     = (*node)(nil)
	_ fs.NodeRemovexattrer  = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
)

// WrapChild makes every node the loopback creates one of ours.
func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	lb, ok := ops.(*fs.LoopbackNode)
	if !ok {
		return ops
	}
	return &node{LoopbackNode: lb, lfs: n.lfs}
}

// OnForget drops the overlay of an inode the kernel let go of once it has
// no links left (unlinked and closed): that data can never be read again.
func (n *node) OnForget() {
	n.lfs.tab.forgetUnlinked(n.key())
}

func (n *node) key() inodeKey {
	return keyOf(n.EmbeddedInode())
}

// relPath is the node's path relative to the mount root ("" for the root).
func (n *node) relPath() string {
	return n.Path(n.lfs.root.EmbeddedInode())
}

// childPath is the relative path of entry name in directory n.
func (n *node) childPath(name string) string {
	return path.Join(n.relPath(), name)
}

// backingPath is the node's path in the backing directory.
func (n *node) backingPath() string {
	return filepath.Join(n.lfs.backing, n.relPath())
}

// enter admits an operation that changes state: it fails with EIO once the
// power is lost, else it holds the gate until leave is called.
func (f *FS) enter() (leave func(), errno syscall.Errno) {
	f.gate.RLock()
	if f.dead.Load() {
		f.gate.RUnlock()
		return nil, syscall.EIO
	}
	return f.gate.RUnlock, 0
}

// guarded runs a metadata change under the gate, after checking the fault
// of op at the path p() (op "" checks none).
func (n *node) guarded(op Op, p func() string, change func() syscall.Errno) syscall.Errno {
	leave, errno := n.lfs.enter()
	if errno != 0 {
		return errno
	}
	defer leave()
	if op != "" {
		if errno := n.lfs.faults.check(op, p); errno != 0 {
			return errno
		}
	}
	return change()
}

// Statx is refused so that the kernel falls back to Getattr, the one place
// that reports the logical size.
func (n *node) Statx(ctx context.Context, f fs.FileHandle, flags, mask uint32, out *fuse.StatxOut) syscall.Errno {
	return syscall.ENOSYS
}

// CopyFileRange is refused (the kernel then copies through read and write),
// because the loopback version would copy backing bytes and bypass the
// overlay.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode,
	fhOut fs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}
