package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"rocketraft/message"
)

// GetStatus is the outcome of GetMessages, named as RocketMQ's GetMessageStatus so the broker
// can map it to pull response codes as RocketMQ does (broker/pull.go pullCode).
type GetStatus int

// GetMessages outcomes.
const (
	// Found: at least one record matched (SUCCESS).
	Found GetStatus = iota
	// NoMatchedMessage: units were scanned but none matched the filter (PULL_RETRY_IMMEDIATELY).
	NoMatchedMessage
	// MessageWasRemoving: the scanned units point at deleted commitlog data.
	MessageWasRemoving
	// OffsetFoundNull: no consume-queue file holds the offset; NextBeginOffset is the next file.
	OffsetFoundNull
	// OffsetOverflowBadly: offset > max offset; NextBeginOffset is the max offset.
	OffsetOverflowBadly
	// OffsetOverflowOne: offset == max offset, nothing new yet (PULL_NOT_FOUND, long polling).
	OffsetOverflowOne
	// OffsetTooSmall: offset < min offset; NextBeginOffset is the min offset.
	OffsetTooSmall
	// NoMatchedLogicQueue: the queue does not exist; NextBeginOffset 0.
	NoMatchedLogicQueue
	// NoMessageInQueue: the queue is empty (max offset 0); NextBeginOffset 0.
	NoMessageInQueue
)

// String returns RocketMQ's name for the status (used as the pull response remark).
func (g GetStatus) String() string {
	return [...]string{"FOUND", "NO_MATCHED_MESSAGE", "MESSAGE_WAS_REMOVING", "OFFSET_FOUND_NULL",
		"OFFSET_OVERFLOW_BADLY", "OFFSET_OVERFLOW_ONE", "OFFSET_TOO_SMALL", "NO_MATCHED_LOGIC_QUEUE",
		"NO_MESSAGE_IN_QUEUE"}[g]
}

// GetResult is the answer to a pull.
type GetResult struct {
	Status          GetStatus
	NextBeginOffset int64
	MinOffset       int64
	MaxOffset       int64
	// Records are the matched records in stored layout, copied out of the mapped files (safe
	// to keep after retention deletes the file). They are consecutive slices of Body.
	Records [][]byte
	// Body is the concatenation of Records: a PULL_MESSAGE response body as is.
	Body []byte
	// Bytes is len(Body).
	Bytes int
	// ReadPhysEnd is the commitlog offset just past the last record returned (0 when none): how
	// far behind the commitlog end the reader is decides whether it should read from a slave.
	ReadPhysEnd int64
}

// GetMessages reads up to maxNums records of (topic, queueID) from logical offset offset,
// keeping those whose tags code match accepts (nil: all), and stopping before maxBytes would be
// exceeded (≤ 0: no limit; at least one record is always returned). It scans at most
// max(16000, maxNums*20) bytes of units, and never past the end of one consume-queue file.
func (s *Store) GetMessages(topic string, queueID int32, offset int64, maxNums int, maxBytes int, match func(tagsCode int64) bool) GetResult {
	q := s.queueByName(topic, queueID)
	if q == nil {
		return GetResult{Status: NoMatchedLogicQueue}
	}
	minOff, maxOff := q.min.Load(), q.max.Load()
	r := GetResult{MinOffset: minOff, MaxOffset: maxOff}
	switch {
	case maxOff == 0:
		r.Status = NoMessageInQueue
		return r
	case offset < minOff:
		r.Status, r.NextBeginOffset = OffsetTooSmall, minOff
		return r
	case offset == maxOff:
		r.Status, r.NextBeginOffset = OffsetOverflowOne, offset
		return r
	case offset > maxOff:
		r.Status, r.NextBeginOffset = OffsetOverflowBadly, maxOff
		return r
	}
	if maxNums <= 0 {
		maxNums = 1
	}
	scan := max(16000, maxNums*ConsumeQueueUnitSize) / ConsumeQueueUnitSize
	units, ok := q.units(offset, scan, make([]cqUnit, 0, min(scan, int(maxOff-offset))))
	if !ok {
		r.Status, r.NextBeginOffset = OffsetFoundNull, q.nextFileOffset(offset)
		return r
	}
	clMin := s.cl.minOffset()
	next := offset
	removed := false
	var ends []int
	for _, u := range units {
		if len(r.Records) >= maxNums {
			break
		}
		if r.Body == nil && u.size > 0 && u.size != blankUnitSize {
			r.Body = make([]byte, 0, min(int(u.size)*min(maxNums, len(units)), 1<<20))
		}
		if maxBytes > 0 && len(r.Records) > 0 && r.Bytes+int(u.size) > maxBytes {
			break
		}
		next++
		if u.size == blankUnitSize || u.phys < clMin {
			removed = true
			continue
		}
		if match != nil && !match(u.tags) {
			continue
		}
		body, ok := s.cl.segs.appendAt(r.Body, u.phys, int(u.size))
		if !ok {
			removed = true
			continue
		}
		r.Body = body
		r.Bytes = len(body)
		r.ReadPhysEnd = u.phys + int64(u.size)
		ends = append(ends, len(body))
		r.Records = append(r.Records, nil) // filled below: Body may still move
	}
	for i, start := 0, 0; i < len(ends); i++ {
		r.Records[i] = r.Body[start:ends[i]:ends[i]]
		start = ends[i]
	}
	r.NextBeginOffset = next
	switch {
	case len(r.Records) > 0:
		r.Status = Found
	case removed:
		r.Status = MessageWasRemoving
	default:
		r.Status = NoMatchedMessage
	}
	return r
}

// MaxOffset is the next logical offset to be written in (topic, queueID); 0 if unknown.
func (s *Store) MaxOffset(topic string, queueID int32) int64 {
	if q := s.queueByName(topic, queueID); q != nil {
		return q.max.Load()
	}
	return 0
}

// MinOffset is the first logical offset still stored in (topic, queueID); 0 if unknown.
func (s *Store) MinOffset(topic string, queueID int32) int64 {
	if q := s.queueByName(topic, queueID); q != nil {
		return q.min.Load()
	}
	return 0
}

// storeTimeAt returns the store timestamp of the record behind unit i, or false.
func (s *Store) storeTimeAt(q *consumeQueue, i int64) (int64, bool) {
	u, ok := q.unit(i)
	if !ok || u.size == blankUnitSize {
		return 0, false
	}
	b, ok := s.cl.segs.copyAt(u.phys, int(u.size))
	if !ok {
		return 0, false
	}
	v, err := message.ParseView(b)
	if err != nil {
		return 0, false
	}
	return v.StoreTimestamp(), true
}

// EarliestMsgStoreTime is the store time of the message at the queue's min offset, or -1.
func (s *Store) EarliestMsgStoreTime(topic string, queueID int32) int64 {
	q := s.queueByName(topic, queueID)
	if q == nil {
		return -1
	}
	if ts, ok := s.storeTimeAt(q, q.min.Load()); ok {
		return ts
	}
	return -1
}

// SearchOffsetByTimestamp finds a logical offset by store time (§2.5 code 29). With upper
// false: the smallest offset whose store time ≥ ts (max offset if all are older, min offset if
// all are newer). With upper true: the largest offset whose store time ≤ ts (min offset if all
// are newer). 0 for an unknown queue.
func (s *Store) SearchOffsetByTimestamp(topic string, queueID int32, ts int64, upper bool) int64 {
	q := s.queueByName(topic, queueID)
	if q == nil {
		return 0
	}
	lo, hi := q.min.Load(), q.max.Load()
	if lo >= hi {
		return lo
	}
	at := func(i int64) int64 {
		t, ok := s.storeTimeAt(q, i)
		if !ok {
			return -1 << 62 // removed: older than anything
		}
		return t
	}
	if !upper {
		// first i in [lo, hi) with at(i) >= ts, or hi
		a, b := lo, hi
		for a < b {
			m := a + (b-a)/2
			if at(m) >= ts {
				b = m
			} else {
				a = m + 1
			}
		}
		return a
	}
	// last i with at(i) <= ts, or lo if none
	a, b := lo, hi
	for a < b {
		m := a + (b-a)/2
		if at(m) > ts {
			b = m
		} else {
			a = m + 1
		}
	}
	if a == lo {
		return lo
	}
	return a - 1
}

// ReadRecord returns a copy of the record stored at physOffset (VIEW_MESSAGE_BY_ID).
func (s *Store) ReadRecord(physOffset int64) ([]byte, error) {
	if physOffset < s.cl.minOffset() {
		return nil, fmt.Errorf("read record at %d: below commitlog min offset %d", physOffset, s.cl.minOffset())
	}
	b, err := s.cl.readRecord(physOffset)
	if err != nil {
		return nil, fmt.Errorf("read record: %w", err)
	}
	return b, nil
}

// QueryByKey returns up to maxNum records of topic whose KEYS contain key or whose UNIQ_KEY is
// key, stored within [begin, end] (ms), newest first, plus the index's last update time and
// offset (QUERY_MESSAGE). Unlike RocketMQ it drops hash collisions itself. In EntryLog mode it
// also drops records their consume queue does not hold (dispatchedAt).
func (s *Store) QueryByKey(topic, key string, maxNum int, begin, end int64) (records [][]byte, lastUpdateTimestamp, lastUpdatePhyOffset int64) {
	if s.idx == nil || maxNum <= 0 {
		return nil, 0, 0
	}
	hash := message.IndexKeyHash(topic + "#" + key)
	// ask for more than maxNum: collisions are filtered below
	offs, lastTS, lastPhys := s.idx.query(hash, maxNum*4+16, begin, end)
	seen := map[int64]bool{}
	for _, off := range offs {
		if len(records) >= maxNum {
			break
		}
		if seen[off] {
			continue
		}
		seen[off] = true
		b, err := s.ReadRecord(off)
		if err != nil {
			continue
		}
		v, err := message.ParseView(b)
		if err != nil || string(v.Topic()) != topic || !hasKey(v, key) {
			continue
		}
		if s.cfg.EntryLog && !s.dispatchedAt(off, v) {
			continue
		}
		records = append(records, b)
	}
	return records, lastTS, lastPhys
}

// dispatchedAt reports whether the record v at phys is the one its consume queue holds at its
// QUEUEOFFSET. In EntryLog mode the commitlog keeps the records the state machine refused
// (DispatchWritten: ErrQueueOffsetStale, Skip groups), and an index rebuilt from the commitlog
// after a crash indexes them too; QueryByKey leaves them out this way. Records that are not
// dispatchable (PREPARED) have no unit to check and pass. Records of a deleted topic fail (their
// queue is gone), as do those whose units retention removed.
func (s *Store) dispatchedAt(phys int64, v message.View) bool {
	if !message.IsDispatchable(v.SysFlag()) {
		return true
	}
	q := s.queue(v.Topic(), v.QueueID())
	if q == nil {
		return false
	}
	u, ok := q.unit(v.QueueOffset())
	return ok && u.phys == phys
}

func hasKey(v message.View, key string) bool {
	if u, ok := v.Property(message.PropertyUniqClientMessageID); ok && string(u) == key {
		return true
	}
	for _, k := range bytes.Split(v.Keys(), []byte(message.KeySeparator)) {
		if string(k) == key {
			return true
		}
	}
	return false
}

// CommitLogMinOffset is the first commitlog offset still stored.
func (s *Store) CommitLogMinOffset() int64 { return s.cl.minOffset() }

// CommitLogMaxOffset is the end of the commitlog (the next append's offset). In EntryLog mode
// it is the dispatched end, which WrittenEnd may run ahead of.
func (s *Store) CommitLogMaxOffset() int64 { return s.cl.writePos.Load() }

// CommitLogFlushedOffset is the end of the durable part of the commitlog.
func (s *Store) CommitLogFlushedOffset() int64 { return s.cl.flushed.Load() }

// ReadCommitLog copies up to max raw commitlog bytes from offset, never past the end of
// appended data or of the file holding offset (classic HA transfer).
func (s *Store) ReadCommitLog(offset int64, maxBytes int) ([]byte, error) {
	end := s.cl.writePos.Load()
	if offset < s.cl.minOffset() || offset > end {
		return nil, fmt.Errorf("read commitlog at %d: outside [%d, %d]", offset, s.cl.minOffset(), end)
	}
	n := int64(maxBytes)
	n = min(n, end-offset, s.cl.size-offset%s.cl.size)
	if n <= 0 {
		return nil, nil
	}
	b, ok := s.cl.segs.copyAt(offset, int(n))
	if !ok {
		return nil, fmt.Errorf("read commitlog at %d: not stored", offset)
	}
	if s.cfg.EntryLog {
		return s.maskRefused(offset, b, end)
	}
	return b, nil
}

// maskRefused readies a chunk of a commitlog that is also the Raft log for a classic slave: it
// ends the chunk at a record boundary (reading on to the end of a first record longer than the
// chunk), so that every record sent is whole, and gives each record the state machine refused
// (DispatchWritten: stale queue offsets, a refused delivery step), which the commitlog keeps but
// no consume queue holds, the rolled-back transaction type in the copy: a slave's dispatch then
// skips it, as it skips the entry-header records, instead of putting it in a queue at an offset
// another record holds.
func (s *Store) maskRefused(offset int64, b []byte, end int64) ([]byte, error) {
	pos := 0
	for pos+8 <= len(b) {
		size := int(int32(binary.BigEndian.Uint32(b[pos:])))
		if binary.BigEndian.Uint32(b[pos+4:]) == message.BlankMagicCode {
			pos = len(b) // the blank marker and the zeros after it, to the file's end
			break
		}
		if size < message.MinRecordSize {
			return nil, fmt.Errorf("read commitlog at %d: no record at %d (size %d)", offset, offset+int64(pos), size)
		}
		if pos+size > len(b) {
			if pos > 0 {
				break
			}
			// a first record longer than the chunk: send it whole
			if offset+int64(size) > end {
				return nil, fmt.Errorf("read commitlog at %d: record of %d bytes runs past the end %d", offset, size, end)
			}
			whole, ok := s.cl.segs.copyAt(offset, size)
			if !ok {
				return nil, fmt.Errorf("read commitlog at %d: not stored", offset)
			}
			b = whole
		}
		if v, err := message.ParseView(b[pos : pos+size]); err == nil && message.IsDispatchable(v.SysFlag()) && !s.dispatchedAt(offset+int64(pos), v) {
			v.SetSysFlag(message.ResetTransactionType(v.SysFlag(), message.TransactionRollbackType))
		}
		pos += size
	}
	return b[:pos], nil
}
