package storage

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"rocketraft/message"
	"rocketraft/storage/vfs"
)

// commitLog is the segmented record log (§6.2). Only the appender (holding Store.mu) writes;
// readers use copyAt under the segment list's lock and never look past writePos.
type commitLog struct {
	segs *segmentList
	size int64
	// entryLog: the commitlog is the Raft log (Config.EntryLog), written ahead of writePos.
	entryLog bool
	// writePos is the end of appended data; bytes before it are complete records. In EntryLog
	// mode it is the dispatched end, which every reader is bounded by.
	writePos atomic.Int64
	// flushed is the end of data known durable (never past writePos in EntryLog mode).
	flushed atomic.Int64
	// written is, in EntryLog mode, the end of what WriteEntry wrote (>= writePos); the bytes
	// between writePos and written are whole records and blank markers nobody reads yet.
	written atomic.Int64
	// synced is, in EntryLog mode, the end of the written bytes known durable (<= written).
	synced atomic.Int64
}

func openCommitLog(fsys vfs.FS, dir string, size int64, entryLog bool) (*commitLog, error) {
	segs, err := openSegmentList(fsys, dir, size)
	if err != nil {
		return nil, fmt.Errorf("commitlog: %w", err)
	}
	return &commitLog{segs: segs, size: size, entryLog: entryLog}, nil
}

// appendEnd is where the next write goes: the written end in EntryLog mode, else writePos.
func (c *commitLog) appendEnd() int64 {
	if c.entryLog {
		return c.written.Load()
	}
	return c.writePos.Load()
}

// minOffset is the start of the oldest segment (0 when empty).
func (c *commitLog) minOffset() int64 {
	c.segs.mu.RLock()
	defer c.segs.mu.RUnlock()
	if s := c.segs.first(); s != nil {
		return s.start
	}
	return c.writePos.Load()
}

// needsRoll reports whether n bytes no longer fit the current segment.
func (c *commitLog) needsRoll(n int) bool {
	pos := c.appendEnd()
	c.segs.mu.RLock()
	s := c.segs.find(pos)
	c.segs.mu.RUnlock()
	return s == nil || int64(n)+message.BlankMarkerSize > s.start+c.size-pos
}

// fits returns the segment holding pos and whether n contiguous bytes starting at pos fit in
// it with room left for the blank end-of-file marker. The appender must hold Store.mu.
func (c *commitLog) fits(pos int64, n int) (*segment, bool) {
	c.segs.mu.RLock()
	s := c.segs.find(pos)
	c.segs.mu.RUnlock()
	return s, s != nil && int64(n)+message.BlankMarkerSize <= s.start+c.size-pos
}

// roll ends the file holding pos (the commitlog end) with the blank marker, creates the next
// file and publishes the end as its start, which it returns with the new segment. With no file
// holding pos (an empty log), pos must start a file. The appender must hold Store.mu and have
// published everything before pos.
func (c *commitLog) roll(pos int64) (*segment, int64, error) {
	ns, next, err := c.rollFile(pos)
	if err != nil {
		return nil, 0, err
	}
	c.writePos.Store(next)
	return ns, next, nil
}

// rollFile is roll without publishing anything: it ends the file holding pos with the blank
// marker and creates the next file, whose start it returns with it. WriteEntry rolls this way,
// moving only the written end. The appender must hold Store.mu.
func (c *commitLog) rollFile(pos int64) (*segment, int64, error) {
	c.segs.mu.RLock()
	s := c.segs.find(pos)
	c.segs.mu.RUnlock()
	next := pos
	if s != nil {
		next = s.start + c.size
	} else if pos%c.size != 0 {
		return nil, 0, fmt.Errorf("commitlog: no segment holds write position %d", pos)
	}
	ns, err := c.segs.create(next)
	if err != nil {
		return nil, 0, fmt.Errorf("commitlog roll to %d: %w", next, err)
	}
	if s != nil {
		rem := next - pos
		p := pos - s.start
		binary.BigEndian.PutUint32(s.b[p:], uint32(rem))
		binary.BigEndian.PutUint32(s.b[p+4:], message.BlankMagicCode)
	}
	return ns, next, nil
}

// readRecord copies the whole record at phys, validating its structure.
func (c *commitLog) readRecord(phys int64) ([]byte, error) {
	if phys < 0 || phys+8 > c.writePos.Load() {
		return nil, fmt.Errorf("commitlog offset %d beyond end %d", phys, c.writePos.Load())
	}
	hdr, ok := c.segs.copyAt(phys, 8)
	if !ok {
		return nil, fmt.Errorf("commitlog offset %d: not stored (removed?)", phys)
	}
	size := int(int32(binary.BigEndian.Uint32(hdr)))
	if size < message.MinRecordSize {
		return nil, fmt.Errorf("commitlog offset %d: not a record (size %d)", phys, size)
	}
	b, ok := c.segs.copyAt(phys, size)
	if !ok {
		return nil, fmt.Errorf("commitlog offset %d: record of %d bytes not stored", phys, size)
	}
	if _, err := message.ParseView(b); err != nil {
		return nil, fmt.Errorf("commitlog offset %d: %w", phys, err)
	}
	return b, nil
}

// walkResult says how a segment walk ended.
type walkResult int

const (
	walkEnd   walkResult = iota // invalid data: the log ends here
	walkBlank                   // a valid blank marker: continue in the next segment
)

// walkSegment walks the records of one segment image b (based at global offset base) from
// position pos, calling fn for each valid record, and returns where valid data stops. A record
// is valid when its magic, TOTALSIZE, field lengths, PHYSICALOFFSET and View.CheckStored all
// check and
// it leaves room for the blank marker; a blank marker is valid when its size reaches exactly
// the end of b. Anything else (zeros, garbage, a torn record) ends the log. Never panics.
func walkSegment(b []byte, base int64, pos int, fn func(phys int64, v message.View) error) (int, walkResult, error) {
	be := binary.BigEndian
	for pos >= 0 && pos+8 <= len(b) {
		total := int64(int32(be.Uint32(b[pos:])))
		magic := be.Uint32(b[pos+4:])
		if magic == message.BlankMagicCode {
			if total == int64(len(b)-pos) {
				return len(b), walkBlank, nil
			}
			return pos, walkEnd, nil
		}
		if total < message.MinRecordSize || total+message.BlankMarkerSize > int64(len(b)-pos) {
			return pos, walkEnd, nil
		}
		v, err := message.ParseView(b[pos : pos+int(total)])
		if err != nil || v.CheckStored() != nil || v.PhysicalOffset() != base+int64(pos) {
			return pos, walkEnd, nil
		}
		if fn != nil {
			if err := fn(base+int64(pos), v); err != nil {
				return pos, walkEnd, err
			}
		}
		pos += int(total)
	}
	return max(pos, 0), walkEnd, nil
}

// blankAt reports whether a valid blank marker (the filler that closes a segment when the next
// record does not fit) starts at phys: where the log's data ends before a roll, so a valid
// truncation point like a record start.
func (c *commitLog) blankAt(phys int64) bool {
	b, ok := c.segs.copyAt(phys, message.BlankMarkerSize)
	if !ok {
		return false
	}
	total := int64(int32(binary.BigEndian.Uint32(b)))
	return binary.BigEndian.Uint32(b[4:]) == message.BlankMagicCode && total == c.size-phys%c.size
}

// walk walks the log from start (a record boundary) across segments and returns the end of
// valid data. fn sees every valid record in order.
func (c *commitLog) walk(start int64, fn func(phys int64, v message.View) error) (int64, error) {
	segs := c.segs.snapshot()
	pos := start
	for i, s := range segs {
		if pos >= s.start+c.size {
			continue
		}
		if pos < s.start {
			// a gap between segments: data cannot continue across it
			return pos, nil
		}
		p, res, err := walkSegment(s.b, s.start, int(pos-s.start), fn)
		if err != nil {
			return s.start + int64(p), err
		}
		pos = s.start + int64(p)
		if res == walkEnd {
			return pos, nil
		}
		if i+1 < len(segs) && segs[i+1].start != pos {
			return pos, nil
		}
	}
	return pos, nil
}

// walkWritten walks the written records in [from, to), from a record boundary, calling fn for
// each record with a view of its mapped bytes (blank is false) and for each blank marker it
// crosses (blank true, v zero). It fails when the bytes there are not whole records and blank
// markers ending exactly at to, i.e. when to is not a record boundary reachable from from. It
// checks structure only (message.ParseView): WriteEntry checked each record in full. The
// caller holds Store.mu, so the bytes cannot change, and walks only bytes past the dispatched
// end, which retention never removes; the views stay valid while it holds Store.mu.
func (c *commitLog) walkWritten(from, to int64, fn func(phys int64, v message.View, blank bool) error) error {
	c.segs.mu.RLock()
	defer c.segs.mu.RUnlock()
	pos := from
	for pos < to {
		s := c.segs.find(pos)
		if s == nil {
			return fmt.Errorf("commitlog offset %d: no file holds it", pos)
		}
		p := pos - s.start
		if p+8 > c.size {
			return fmt.Errorf("commitlog offset %d: no room for a record or marker", pos)
		}
		total := int64(int32(binary.BigEndian.Uint32(s.b[p:])))
		if binary.BigEndian.Uint32(s.b[p+4:]) == message.BlankMagicCode {
			if total != c.size-p {
				return fmt.Errorf("commitlog offset %d: blank marker of %d bytes does not reach the file end", pos, total)
			}
			if fn != nil {
				if err := fn(pos, message.View{}, true); err != nil {
					return err
				}
			}
			pos = s.start + c.size
			continue
		}
		v, err := message.ParseView(s.b[p:min(c.size, p+(to-pos))])
		if err != nil {
			return fmt.Errorf("commitlog offset %d: not a whole record before %d: %w", pos, to, err)
		}
		if fn != nil {
			if err := fn(pos, v, false); err != nil {
				return err
			}
		}
		pos += int64(v.Size())
	}
	if pos != to {
		return fmt.Errorf("commitlog offset %d: inside the blank space that ends its file", to)
	}
	return nil
}

// cutWritten removes the written bytes from pos (a boundary walkWritten reaches) to the
// written end w: it zeroes them in the file holding pos, with the blank marker that may end
// that file, syncs the zeroed range, and removes every later file. Only [pos, w) can hold
// non-zero bytes (nothing is ever written past the written end, and recovery scrubs a torn
// tail), so unlike segmentList.removeFrom with scrub it need not scan the rest of the file for
// them. The caller holds Store.mu and Store.clFlushMu.
func (c *commitLog) cutWritten(pos, w int64) error {
	fileEnd := pos - pos%c.size + c.size
	dirty := min(w, fileEnd)
	if w > fileEnd && pos%c.size != 0 {
		// the data of the file holding pos ends with the blank marker: find it
		err := c.walkWritten(pos, fileEnd, func(phys int64, _ message.View, blank bool) error {
			if blank {
				dirty = phys + message.BlankMarkerSize
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("cut written commitlog at %d: %w", pos, err)
		}
	}
	if pos%c.size != 0 && dirty > pos {
		c.segs.mu.Lock()
		s := c.segs.find(pos)
		if s != nil {
			clear(s.b[pos-s.start : dirty-s.start])
		}
		c.segs.mu.Unlock()
		if s != nil {
			if err := s.m.Sync(int(pos-s.start), int(dirty-pos)); err != nil {
				return fmt.Errorf("cut written commitlog at %d: sync %s: %w", pos, s.name, err)
			}
		}
	}
	// a file starting at pos holds nothing to keep: it goes with the later ones
	if err := c.segs.removeFrom(pos, false); err != nil {
		return fmt.Errorf("cut written commitlog at %d: %w", pos, err)
	}
	return nil
}
