package lazyfs

import (
	"fmt"
	"io"
	"slices"

	"golang.org/x/sys/unix"
)

// maxIovecs bounds one pwritev call (the kernel's IOV_MAX).
const maxIovecs = 1024

// apply makes the backing file equal to the logical file: cut it where it
// was truncated, write the pages, set the logical size. It returns once the
// writes are complete; the backing file is fsynced only when syncBacking is
// set. o must be locked; it stays valid (the caller retires it).
func (o *overlay) apply(syncBacking bool) error {
	if !o.dirty() {
		return nil
	}
	if o.cut < o.base {
		if err := o.file.Truncate(o.cut); err != nil {
			return fmt.Errorf("lazyfs: truncate backing inode %d: %w", o.key.ino, err)
		}
	}
	if err := o.writePages(o.sortedPages(), o.size); err != nil {
		return err
	}
	if err := o.file.Truncate(o.size); err != nil {
		return fmt.Errorf("lazyfs: size backing inode %d: %w", o.key.ino, err)
	}
	if syncBacking {
		if err := o.file.Sync(); err != nil {
			return fmt.Errorf("lazyfs: fsync backing inode %d: %w", o.key.ino, err)
		}
	}
	return nil
}

// sortedPages lists the page indexes in ascending order.
func (o *overlay) sortedPages() []int64 {
	idxs := make([]int64, 0, len(o.pages))
	for idx := range o.pages {
		idxs = append(idxs, idx)
	}
	slices.Sort(idxs)
	return idxs
}

// writePages writes the given pages (ascending) to the backing file, each
// clipped to limit, coalescing runs of adjacent pages into one pwritev.
func (o *overlay) writePages(idxs []int64, limit int64) error {
	for len(idxs) > 0 {
		run := 1
		for run < len(idxs) && run < maxIovecs && idxs[run] == idxs[0]+int64(run) {
			run++
		}
		if err := o.writeRun(idxs[:run], limit); err != nil {
			return err
		}
		idxs = idxs[run:]
	}
	return nil
}

// writeRun writes adjacent pages starting at idxs[0] with as few syscalls as
// the kernel allows.
func (o *overlay) writeRun(idxs []int64, limit int64) error {
	off := idxs[0] * pageSize
	iov := make([][]byte, 0, len(idxs))
	for _, idx := range idxs {
		n := min(pageSize, limit-idx*pageSize)
		if n <= 0 {
			break
		}
		iov = append(iov, o.pages[idx][:n])
	}
	fd := int(o.file.Fd())
	for len(iov) > 0 {
		n, err := unix.Pwritev(fd, iov, off)
		if err != nil {
			return fmt.Errorf("lazyfs: write backing inode %d at %d: %w", o.key.ino, off, err)
		}
		if n == 0 {
			return fmt.Errorf("lazyfs: write backing inode %d at %d: %w", o.key.ino, off, io.ErrShortWrite)
		}
		off += int64(n)
		iov = advance(iov, n)
	}
	return nil
}

// advance drops the first n bytes from iov (after a short pwritev).
func advance(iov [][]byte, n int) [][]byte {
	for len(iov) > 0 && n >= len(iov[0]) {
		n -= len(iov[0])
		iov = iov[1:]
	}
	if len(iov) > 0 && n > 0 {
		iov[0] = iov[0][n:]
	}
	return iov
}
