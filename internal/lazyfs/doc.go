// Package lazyfs is a FUSE pass-through file system that forgets what was
// never made durable. The crash lab mounts it over a broker's data directory
// so that a simulated power cut loses exactly the data a real machine could
// lose: everything written since the last fsync. Without it a SIGKILL only
// tests process crashes, because the kernel page cache keeps every write.
//
// # Overlay model
//
// Directory entries and metadata go straight to the backing directory, but
// file contents do not. Every data change that the kernel sends down
// (write(2), the writeback of dirty pages of a shared writable mmap,
// truncate/ftruncate, fallocate) lands in an in-memory overlay kept per
// backing inode: a set of 4 KiB pages, each holding the page's full logical
// content, plus the logical size and the lowest size the file was truncated
// to since it was last synced (the cut). Reads merge the overlay over the
// backing file: a byte comes from an overlay page if there is one, else from
// the backing file if it lies below the cut, else it is zero. Getattr and
// Lookup report the logical size, so the kernel never sees a size that
// disagrees with the data it reads. The overlay is keyed by the backing
// inode, so renames and hard links keep it, and every handle on the inode
// shares it.
//
// fsync, fdatasync, msync(MS_SYNC) and io_uring fsync all reach the file
// system as FSYNC (preceded by the WRITEs of any dirty mmap pages). FSYNC on
// any handle of an inode applies that inode's overlay to the backing file
// (truncate to the cut, write the pages, set the logical size), waits for
// those writes to complete and discards the overlay. close(2) (FLUSH)
// persists nothing. The backing file itself is only fsynced when
// Options.SyncBacking is set: the lab models power loss of the machine under
// test, not of the machine running the lab.
//
// Metadata operations (create, mkdir, mknod, symlink, link, rename, unlink,
// rmdir, chmod, chown, utimes, xattrs) are applied to the backing directory
// at once and are therefore durable immediately, as if every directory were
// fsynced after every change. This is the stronger of the two behaviours a
// journaling file system may show; it keeps the model small and means lost
// renames or lost file creations are not simulated. When the last link of
// an inode is removed, its overlay is dropped as soon as the kernel forgets
// the inode (immediately if the file is not open, else at the last close or
// munmap), so deleted files do not pin memory.
//
// # Power loss
//
// FS.PowerLoss cuts the power at one instant: it waits for the operations in
// flight, then drops every overlay. Each unsynced page may instead be kept,
// independently, with a chosen probability; a kept page is written over the
// backing file as it was at the last sync (extending it if the page lies past
// its end), which models dirty pages written back in arbitrary order before
// the cut. Unsynced truncations and extensions are always lost. From then on
// the file system is dead: every operation that would change state (write,
// fsync, create, rename, unlink, truncate, setattr, ...) fails with EIO and
// changes nothing; reads still work and see the backing files. The dead
// state lasts until Unmount. Mounting the same backing directory again gives
// a fresh file system that shows only what was synced plus the kept pages.
//
// Unmount without a prior PowerLoss is a clean shutdown: the overlays left
// are applied to the backing files, as an operating system writes back its
// page cache before it halts.
//
// # Faults
//
// FS.InjectFault makes writes, fsyncs or creations under a path prefix fail
// with a chosen errno, to exercise the error paths of the programs under
// test (a failed fsync must not be retried as if the data were safe).
//
// # Resources and limits
//
// Memory grows with the data the programs leave unsynced (4 KiB per dirty
// page plus map overhead) and is given back at each fsync; nothing else
// bounds it. Each inode with an overlay also holds one open descriptor on
// its backing file. Reads are copied through the file system: FUSE
// passthrough, splicing from the backing file, copy_file_range offload and
// ioctls (FICLONE and the like) are not offered, because each would bypass
// the overlay. O_DIRECT opens work, but their writes are held in the
// overlay like any other (O_DIRECT never promised durability). File locks
// are handled by the kernel, locally to the mount. A failed fsync (an
// injected fault) leaves the overlay in place, so a retried fsync can still
// persist the data; Linux may instead drop dirty pages after a writeback
// error, which is not imitated.
package lazyfs
