package ha

import (
	"encoding/binary"
	"fmt"

	"rocketraft/message"
)

// Target is where a slave stores what it receives: storage.Store in the broker.
type Target interface {
	// CommitLogMaxOffset is the end of the local commitlog: what the slave reports.
	CommitLogMaxOffset() int64
	// AppendRaw appends whole records (optionally ending with the blank end-of-file marker)
	// at offset, which must be the commitlog end, and dispatches them to consume queues and
	// the index.
	AppendRaw(offset int64, data []byte) error
}

// applier turns the master's byte stream, cut at arbitrary positions, into AppendRaw calls of
// whole records. Offsets are commitlog offsets, the same on both sides.
type applier struct {
	t        Target
	fileSize int64
	// maxRecord bounds a record's claimed size, so a hostile stream cannot make the slave
	// buffer more than that before it is found out.
	maxRecord int64
	next      int64  // offset of the next byte expected from the master
	base      int64  // offset of buf[0]; == the target's commitlog end
	buf       []byte // received bytes not yet appended (an incomplete record)
	skipTo    int64  // bytes below this offset (the zeros after a blank marker) are dropped
}

func newApplier(t Target, fileSize, maxRecord int64) *applier {
	start := t.CommitLogMaxOffset()
	return &applier{t: t, fileSize: fileSize, maxRecord: maxRecord, next: start, base: start}
}

// feed takes one frame's body at off. It returns how many bytes it appended to the target
// (0 while a record is still incomplete) and ErrOffsetMismatch, ErrCorrupt or the target's
// error; after an error the applier must be discarded (the connection closes).
func (a *applier) feed(off int64, data []byte) (int64, error) {
	if off != a.next {
		return 0, fmt.Errorf("%w: the master sent a frame at offset %d, this slave expects %d", ErrOffsetMismatch, off, a.next)
	}
	a.next += int64(len(data))
	if a.skipTo > off {
		drop := min(int64(len(data)), a.skipTo-off)
		data, off = data[drop:], off+drop
	}
	if len(data) == 0 {
		return 0, nil
	}
	if len(a.buf) == 0 {
		a.base = off
	}
	a.buf = append(a.buf, data...)
	return a.drain()
}

// drain appends every whole record at the front of buf.
func (a *applier) drain() (int64, error) {
	var appended int64
	for len(a.buf) > 0 {
		n, blank, scanErr := a.wholePrefix()
		if n > 0 {
			if err := a.t.AppendRaw(a.base, a.buf[:n]); err != nil {
				return appended, fmt.Errorf("append %d replicated bytes at %d: %w", n, a.base, err)
			}
			appended += int64(n)
			rest := a.buf[n:]
			restOff := a.base + int64(n)
			if blank {
				// The file ends here: drop its remaining zeros (now or as they arrive); the
				// next record is at the start of the next file.
				nextFile := a.base - a.base%a.fileSize + a.fileSize
				a.skipTo = nextFile
				drop := min(int64(len(rest)), nextFile-restOff)
				rest, restOff = rest[drop:], restOff+drop
			}
			a.buf = append(a.buf[:0], rest...)
			a.base = restOff
		}
		if scanErr != nil {
			return appended, scanErr
		}
		if n == 0 {
			break
		}
	}
	if len(a.buf) == 0 {
		a.buf = a.buf[:0:0] // do not keep a large buffer alive between records
	}
	return appended, nil
}

// wholePrefix returns the length of the longest prefix of buf made of whole records, ending
// with a blank marker if one follows them (blank true), and an error for bytes that cannot be
// the start of a record (the prefix before them is still returned).
func (a *applier) wholePrefix() (n int, blank bool, err error) {
	pos := 0
	for len(a.buf)-pos >= 8 {
		at := a.base + int64(pos)
		inFile := at % a.fileSize
		total := int64(int32(binary.BigEndian.Uint32(a.buf[pos:])))
		magic := binary.BigEndian.Uint32(a.buf[pos+4:])
		if magic == message.BlankMagicCode {
			if total != a.fileSize-inFile {
				return pos, false, fmt.Errorf("%w: blank marker at %d claims %d bytes but this slave's commitlog file ends %d bytes later (mappedFileSizeCommitLog must be the same on master and slave)",
					ErrCorrupt, at, total, a.fileSize-inFile)
			}
			return pos + message.BlankMarkerSize, true, nil
		}
		if magic != message.MagicCodeV1 && magic != message.MagicCodeV2 {
			return pos, false, fmt.Errorf("%w: no record magic at %d (size %d, magic %#x)", ErrCorrupt, at, total, magic)
		}
		if total < message.MinRecordSize || total > a.maxRecord || total > a.fileSize-inFile-message.BlankMarkerSize {
			return pos, false, fmt.Errorf("%w: record at %d claims %d bytes (file has %d left, limit %d)", ErrCorrupt, at, total, a.fileSize-inFile, a.maxRecord)
		}
		if int64(len(a.buf)-pos) < total {
			break
		}
		pos += int(total)
	}
	return pos, false, nil
}

// pending is how many received bytes wait for the rest of their record.
func (a *applier) pending() int { return len(a.buf) }
