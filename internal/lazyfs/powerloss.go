package lazyfs

import (
	"math/rand/v2"
	"syscall"
)

// PowerLossStats tells a test how much a power cut destroyed, so it can
// assert that the scenario really lost something.
type PowerLossStats struct {
	// PagesDropped counts unsynced 4 KiB pages that were lost.
	PagesDropped int
	// PagesKept counts unsynced pages that reached the backing file
	// anyway (torn writeback).
	PagesKept int
	// Files counts inodes that had unsynced changes (pages, truncation or
	// extension).
	Files int
}

// PowerLoss simulates a power cut at this instant: every write not yet
// fsynced is dropped, except that each unsynced 4 KiB page is independently
// kept with probability keep (0 drops all; 0 < keep < 1 models writeback
// torn in arbitrary order), drawing from rng in a reproducible order (nil
// means a fixed seed). From then on the file system is dead: every
// operation that would change state fails with EIO and changes nothing,
// until Unmount. Later calls do nothing and return zero stats.
func (f *FS) PowerLoss(keep float64, rng *rand.Rand) PowerLossStats {
	f.gate.Lock()
	defer f.gate.Unlock()
	if f.dead.Swap(true) {
		return PowerLossStats{}
	}
	if rng == nil {
		rng = rand.New(rand.NewPCG(0, 0))
	}
	draw := func() bool {
		switch {
		case keep <= 0:
			return false
		case keep >= 1:
			return true
		}
		return rng.Float64() < keep
	}
	var st PowerLossStats
	for _, ov := range f.tab.snapshot() {
		ov.mu.Lock()
		if !ov.removed {
			f.crashOne(ov, draw, &st)
			f.tab.remove(ov)
		}
		ov.mu.Unlock()
	}
	f.logf("power loss: %d pages dropped, %d kept, %d files affected", st.PagesDropped, st.PagesKept, st.Files)
	return st
}

// crashOne settles one overlay at the power cut: its kept pages go to the
// backing file, everything else is forgotten.
func (f *FS) crashOne(ov *overlay, draw func() bool, st *PowerLossStats) {
	if !ov.dirty() {
		return
	}
	st.Files++
	idxs := ov.sortedPages()
	if ov.unlinked() {
		// Nothing can ever read this file again.
		st.PagesDropped += len(idxs)
		return
	}
	var kept []int64
	for _, idx := range idxs {
		if draw() {
			kept = append(kept, idx)
		}
	}
	st.PagesKept += len(kept)
	st.PagesDropped += len(idxs) - len(kept)
	if err := ov.writePages(kept, ov.size); err != nil {
		f.logf("power loss: keeping pages of inode %d: %v", ov.key.ino, err)
	}
}

// unlinked reports whether the backing inode has no name left.
func (o *overlay) unlinked() bool {
	var st syscall.Stat_t
	return syscall.Fstat(int(o.file.Fd()), &st) == nil && st.Nlink == 0
}

// Unsynced reports how many bytes are held unsynced, in whole pages, so
// tests and logs can see what a power cut now would lose.
func (f *FS) Unsynced() int64 {
	return f.tab.unsynced.Load()
}
