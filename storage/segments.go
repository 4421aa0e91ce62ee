package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"sync"

	"rocketraft/storage/vfs"
)

// segment is one fixed-size mapped file of a segmentList, named by its start offset.
type segment struct {
	start int64
	name  string
	m     vfs.Mapping
	b     []byte
	// appendFrom is where the segment's vfs.AdviceAppend range starts (it runs to the end of
	// the file), or -1 while the segment is not appended to. Only the appender touches it.
	appendFrom int64
}

// Appending advice (vfs.Advice): the file being appended to is advised AdviceAppend from the
// end of its data on, so that a fault there brings in one page and a sync writes back only
// the pages written since the last one. Behind the writer the advice goes back to AdviceRead,
// appendAdviceStep bytes at a time, keeping appendAdviceGuard bytes behind the end: a cold read
// there reads around itself by up to the disk's readahead (read_ahead_kb; 8 MiB on the virtual
// machine the benchmarks run on, 128 KiB by default), and the guard keeps that read-around from
// reaching pages not written yet. Data behind the guard is what a lagging follower or a
// consumer far behind reads, where the read-around pays.
const (
	appendAdviceStep  = 32 << 20
	appendAdviceGuard = 32 << 20
)

// startAppending advises the bytes from p (relative to the segment) to its end AdviceAppend:
// p is where the segment's data ends and appends go on. The advice is a hint; failing to give
// it costs write-back bytes, never data, so its error is ignored.
func (s *segment) startAppending(p int64) {
	size := int64(len(s.b))
	if p < 0 || p >= size {
		return
	}
	_ = s.m.Advise(int(p), int(size-p), vfs.AdviceAppend)
	if s.appendFrom < 0 || p < s.appendFrom {
		s.appendFrom = p
	}
}

// appended moves the AdviceRead range up behind an append that ended at p (relative).
func (s *segment) appended(p int64) {
	if s.appendFrom < 0 || p-s.appendFrom < appendAdviceStep+appendAdviceGuard {
		return
	}
	to := (p - appendAdviceGuard) &^ (4096 - 1)
	_ = s.m.Advise(int(s.appendFrom), int(to-s.appendFrom), vfs.AdviceRead)
	s.appendFrom = to
}

// stopAppending advises what was still advised AdviceAppend AdviceRead: the segment is full,
// or no longer the one appended to.
func (s *segment) stopAppending() {
	if s.appendFrom < 0 {
		return
	}
	_ = s.m.Advise(int(s.appendFrom), len(s.b)-int(s.appendFrom), vfs.AdviceRead)
	s.appendFrom = -1
}

// writeThroughMin is the smallest write segment.write may not send through the file. Storing
// into a fresh page of a shared mapping faults (8-13 us per page on the 2-core virtual machine
// the benchmarks run on, the kernel zeroing a preallocated page first), and every msync of
// pages mapped dirty write-protects them again (TLB shootdowns, another fault on the next
// store); pwrite of a 64 KiB batch costs under 1 us per page there, a small pwrite one system
// call (~2.5 us). Through the file, BenchmarkAppendReplicated stores a record in 4.7-4.9 us one
// append at a time instead of 5.4-5.6, and BenchmarkAppend/SYNC_FLUSH in 11-12 us instead of
// 17-18; only small appends of ASYNC_FLUSH, many goroutines contending for the append lock
// around a system call, do better through the mapping (4.7-5.0 us against 5.6-5.8).
const writeThroughMin = 4096

// write puts b at global offset off, which lies with b inside s: through the file, or, when
// mapSmall is set and b is under writeThroughMin bytes, by a copy into the mapping.
func (s *segment) write(off int64, b []byte, mapSmall bool) error {
	p := off - s.start
	defer s.appended(p + int64(len(b)))
	if mapSmall && len(b) < writeThroughMin {
		copy(s.b[p:], b)
		return nil
	}
	return s.m.WriteAt(b, int(p))
}

// segmentList is a directory of fixed-size mapped files named by the 20-digit, zero-padded
// offset of their first byte: the commitlog and every consume queue. mu guards the list; hold
// it for reading while touching a segment's bytes so that removal cannot unmap them underneath.
type segmentList struct {
	fs   vfs.FS
	dir  string
	size int64

	mu   sync.RWMutex
	segs []*segment
}

// fileName formats a segment start offset (§6.2).
func fileName(off int64) string { return fmt.Sprintf("%020d", off) }

// openSegmentList maps every segment file in dir (creating dir if missing). Files whose names
// are not 20-digit offsets aligned to size are an error, so a misconfigured size is noticed.
func openSegmentList(fsys vfs.FS, dir string, size int64) (*segmentList, error) {
	l := &segmentList{fs: fsys, dir: dir, size: size}
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	for _, n := range names {
		start, err := strconv.ParseInt(n, 10, 64)
		if err != nil || len(n) != 20 {
			continue // not a segment (e.g. a .tmp file)
		}
		if start%size != 0 {
			l.closeAll()
			return nil, fmt.Errorf("open %s: segment %s not aligned to size %d", dir, n, size)
		}
		s, err := l.mapSegment(start)
		if err != nil {
			l.closeAll()
			return nil, err
		}
		l.segs = append(l.segs, s)
	}
	return l, nil
}

func (l *segmentList) mapSegment(start int64) (*segment, error) {
	name := filepath.Join(l.dir, fileName(start))
	m, err := l.fs.Map(name, l.size)
	if err != nil {
		return nil, fmt.Errorf("map segment %s: %w", name, err)
	}
	return &segment{start: start, name: name, m: m, b: m.Bytes(), appendFrom: -1}, nil
}

// find returns the segment holding off, or nil. Hold l.mu.
func (l *segmentList) find(off int64) *segment {
	lo, hi := 0, len(l.segs)
	for lo < hi {
		mid := (lo + hi) / 2
		s := l.segs[mid]
		switch {
		case off < s.start:
			hi = mid
		case off >= s.start+l.size:
			lo = mid + 1
		default:
			return s
		}
	}
	return nil
}

// last returns the newest segment, or nil. Hold l.mu.
func (l *segmentList) last() *segment {
	if len(l.segs) == 0 {
		return nil
	}
	return l.segs[len(l.segs)-1]
}

// first returns the oldest segment, or nil. Hold l.mu.
func (l *segmentList) first() *segment {
	if len(l.segs) == 0 {
		return nil
	}
	return l.segs[0]
}

// create maps a new segment starting at start, which must be after every existing one, for
// the appender to write next: the segment before it is done with (the appending advice).
func (l *segmentList) create(start int64) (*segment, error) {
	s, err := l.mapSegment(start)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	last := l.last()
	if last != nil && last.start >= start {
		s.m.Close()
		return nil, fmt.Errorf("create segment %s: not after %s", s.name, last.name)
	}
	if last != nil {
		last.stopAppending()
	}
	s.startAppending(0)
	l.segs = append(l.segs, s)
	return s, nil
}

// snapshot returns the current segments; the caller must not touch their bytes without l.mu
// unless it knows they cannot be removed meanwhile.
func (l *segmentList) snapshot() []*segment {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return append([]*segment(nil), l.segs...)
}

// copyAt copies n bytes at off into a new slice, or returns false if they are not in one
// mapped segment (deleted, or never written).
func (l *segmentList) copyAt(off int64, n int) ([]byte, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	s := l.find(off)
	if s == nil || off+int64(n) > s.start+l.size || n < 0 {
		return nil, false
	}
	p := off - s.start
	return append([]byte(nil), s.b[p:p+int64(n)]...), true
}

// appendAt appends the n bytes at off to dst, or returns false if they are not in one mapped
// segment.
func (l *segmentList) appendAt(dst []byte, off int64, n int) ([]byte, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	s := l.find(off)
	if s == nil || off+int64(n) > s.start+l.size || n < 0 {
		return dst, false
	}
	p := off - s.start
	return append(dst, s.b[p:p+int64(n)]...), true
}

// sync makes [from, to) durable, segment by segment (vfs.Mapping.Sync).
func (l *segmentList) sync(from, to int64) error {
	return l.syncWith(from, to, vfs.Mapping.Sync)
}

// syncBlocking is sync with each fdatasync on the calling thread (vfs.Mapping.SyncBlocking).
func (l *segmentList) syncBlocking(from, to int64) error {
	return l.syncWith(from, to, vfs.Mapping.SyncBlocking)
}

func (l *segmentList) syncWith(from, to int64, sync func(m vfs.Mapping, off, n int) error) error {
	for _, s := range l.snapshot() {
		a, b := max(from, s.start), min(to, s.start+l.size)
		if a >= b {
			continue
		}
		if err := sync(s.m, int(a-s.start), int(b-a)); err != nil {
			return fmt.Errorf("sync %s: %w", s.name, err)
		}
	}
	return nil
}

// syncEvery syncs every segment, written to or not. After an abnormal shutdown this surfaces a
// writeback error the previous process left unseen: Linux reports such an error once, to the
// next fsync of the file, so a file recovery does not write would otherwise fail the node later,
// in service, on its next write (the disk-fault chaos test saw a restarted node exit a second
// time that way, on a consume queue the failed run had dirtied); Store.syncEveryFile.
func (l *segmentList) syncEvery() error {
	for _, s := range l.snapshot() {
		if err := s.m.Sync(0, int(l.size)); err != nil {
			return fmt.Errorf("sync %s: %w", s.name, err)
		}
	}
	return nil
}

// removeFrom removes every segment starting at or after off; used to truncate a torn tail.
// With scrub it also zeroes whatever is not zero in [off, end of its segment), so stale bytes
// can never pass for records after a later crash. Without scrub the caller knows the bytes
// after off are zero already (a clean shutdown keeps that invariant), which saves reading a
// whole segment. Appends go on at off: the segment holding it is advised for them from there
// (recovery reads up to the end of the data, which can leave read-around pages past it).
func (l *segmentList) removeFrom(off int64, scrub bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	keep := l.segs[:0]
	var errs []error
	for _, s := range l.segs {
		if s.start >= off {
			s.m.Close()
			if err := l.fs.Remove(s.name); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		keep = append(keep, s)
		if scrub && off < s.start+l.size {
			p := int(off - s.start)
			if n := dirtyLen(s.b[p:]); n > 0 {
				clear(s.b[p : p+n])
				if err := s.m.Sync(p, n); err != nil {
					errs = append(errs, fmt.Errorf("sync %s: %w", s.name, err))
				}
			}
		}
	}
	clear(l.segs[len(keep):])
	l.segs = keep
	if last := l.last(); last != nil && off < last.start+l.size {
		last.startAppending(off - last.start)
	}
	return errors.Join(errs...)
}

var zeroPage [4096]byte

// dirtyLen returns the length of the shortest prefix of b after which b is all zeros. Only
// that much needs zeroing (and syncing) when a tail is truncated: rewriting a whole 1 GiB
// segment would cost a gigabyte of I/O per restart.
func dirtyLen(b []byte) int {
	end := len(b)
	for end > 0 {
		start := max(0, end-len(zeroPage))
		if !bytes.Equal(b[start:end], zeroPage[:end-start]) {
			for end > start && b[end-1] == 0 {
				end--
			}
			return end
		}
		end = start
	}
	return 0
}

// removeSegment unmaps and deletes one segment.
func (l *segmentList) removeSegment(s *segment) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, x := range l.segs {
		if x == s {
			l.segs = append(l.segs[:i:i], l.segs[i+1:]...)
			break
		}
	}
	s.m.Close()
	if err := l.fs.Remove(s.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", s.name, err)
	}
	return nil
}

// closeAll unmaps every segment.
func (l *segmentList) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.segs {
		s.m.Close()
	}
	l.segs = nil
}
