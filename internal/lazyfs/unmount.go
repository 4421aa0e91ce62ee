package lazyfs

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// unmountRetry is the pause between attempts to unmount a busy mount.
const unmountRetry = 20 * time.Millisecond

// detach takes the mount off its mountpoint: politely while the wait allows,
// then by force, so that a test is never left with a mount behind it.
func (f *FS) detach() error {
	deadline := time.Now().Add(f.unmountWait())
	for {
		err := unix.Unmount(f.mountpoint, 0)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINVAL):
			// Not a mount point any more: someone detached it already.
			return nil
		case errors.Is(err, unix.EBUSY):
			if time.Now().After(deadline) {
				return f.force()
			}
			time.Sleep(unmountRetry)
		default:
			// Not allowed to unmount directly: the mount was made by
			// the fusermount helper, which must undo it.
			if serr := f.server.Unmount(); serr != nil {
				return fmt.Errorf("lazyfs: unmount %s: %w (helper: %v)", f.mountpoint, err, serr)
			}
			return nil
		}
	}
}

// force aborts the FUSE connection, so that every pending and later request
// fails and the serve loops end, then detaches the mount lazily.
func (f *FS) force() error {
	f.logf("%s still busy after %v: aborting the connection and detaching it", f.mountpoint, f.unmountWait())
	// MNT_FORCE makes the kernel abort the FUSE connection even when the
	// unmount itself then fails with EBUSY.
	_ = unix.Unmount(f.mountpoint, unix.MNT_FORCE)
	err := unix.Unmount(f.mountpoint, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("lazyfs: lazy unmount %s: %w", f.mountpoint, err)
	}
	return nil
}
