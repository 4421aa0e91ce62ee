package storage

import (
	"encoding/binary"
	"fmt"

	"rocketraft/message"
)

// AppendRaw appends bytes read from another store's commitlog with ReadCommitLog (a classic HA
// slave replicating byte for byte). offset must be this store's commitlog end, else
// ErrOffsetMismatch. data must stay within one commitlog file and hold whole records, each
// carrying the PHYSICALOFFSET of where it lands and the queue offset its queue expects next;
// it may end with the blank end-of-file marker (and the zeros after it up to the end of the
// file), after which the next append starts in the next file. Records are dispatched to
// consume queues and the index as by Append. A partial record at the end is an error: the
// caller buffers until it has whole records.
func (s *Store) AppendRaw(offset int64, data []byte) error {
	if err := s.notEntryLog("append raw"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrStoreClosed
	case s.failed() != nil:
		return s.failed()
	case s.diskFull.Load():
		return fmt.Errorf("append raw: %w", ErrDiskFull)
	case offset != s.cl.writePos.Load():
		return fmt.Errorf("append raw at %d, commitlog ends at %d: %w", offset, s.cl.writePos.Load(), ErrOffsetMismatch)
	case len(data) == 0:
		return nil
	}
	size := s.cl.size
	inFile := offset % size
	if inFile+int64(len(data)) > size {
		return fmt.Errorf("append raw: %d bytes at %d cross a file boundary: %w", len(data), offset, ErrMessageIllegal)
	}
	// Validate everything before writing anything.
	var recs []laidRecord
	end := len(data)
	blank := false
	for pos := 0; pos < len(data); {
		if len(data)-pos < 8 {
			return fmt.Errorf("append raw: partial record at %d: %w", offset+int64(pos), ErrMessageIllegal)
		}
		total := int64(int32(binary.BigEndian.Uint32(data[pos:])))
		if binary.BigEndian.Uint32(data[pos+4:]) == message.BlankMagicCode {
			if total != size-inFile-int64(pos) {
				return fmt.Errorf("append raw: blank marker at %d of size %d does not reach the file end: %w", offset+int64(pos), total, ErrMessageIllegal)
			}
			end, blank = pos+8, true
			break
		}
		v, err := message.ParseView(data[pos:])
		if err == nil {
			err = v.CheckStored()
		}
		if err == nil && v.PhysicalOffset() != offset+int64(pos) {
			err = fmt.Errorf("PHYSICALOFFSET %d", v.PhysicalOffset())
		}
		if err == nil && inFile+int64(pos+v.Size())+message.BlankMarkerSize > size {
			err = fmt.Errorf("no room left for the end-of-file marker")
		}
		if err != nil {
			return fmt.Errorf("append raw: record at %d: %w: %w", offset+int64(pos), ErrMessageIllegal, err)
		}
		recs = append(recs, laidRecord{phys: offset + int64(pos), v: v})
		pos += v.Size()
	}
	if err := newOffsetCheck(s).check(recs, ErrOffsetMismatch); err != nil {
		return fmt.Errorf("append raw: %w", err)
	}
	if err := s.ensureQueues(recs); err != nil {
		return fmt.Errorf("append raw: %w", err)
	}
	seg, err := s.rawSegment(offset)
	if err != nil {
		return err
	}
	if err := seg.write(offset, data[:end], s.cfg.FlushDiskType == AsyncFlush); err != nil {
		return s.fail(fmt.Errorf("append raw: commitlog write of %d bytes at %d: %w", end, offset, err))
	}
	var hashes []int32
	for i := range recs {
		// an index file that cannot be created costs the record its index entries, not the append
		hashes, _ = s.dispatchLaid(&recs[i], hashes, nil)
	}
	newEnd := offset + int64(end)
	if blank {
		newEnd = offset - inFile + size
	}
	s.cl.writePos.Store(newEnd)
	s.putCount.Add(int64(len(recs)))
	s.putBytes.Add(int64(end))
	if cb := s.cfg.OnDispatch; cb != nil {
		for _, r := range recs {
			if r.q != nil {
				cb(r.q.topic, r.q.qid, r.qoff, r.tags)
			}
		}
	}
	return nil
}

// laidRecord is a record already laid out in commitlog format at its place (AppendRaw's data,
// the bytes WriteEntry wrote) on its way to being dispatched: ensureQueues and dispatchLaid
// fill in the rest.
type laidRecord struct {
	phys int64
	v    message.View
	size int
	// q is the record's consume queue (nil: not dispatchable), qoff its queue offset there
	// (0 when not dispatchable), tags its tags code.
	q    *consumeQueue
	qoff int64
	tags int64
}

// queueKey names a consume queue that does not exist yet.
type queueKey struct {
	topic string
	qid   int32
}

// offsetMap holds one offset per consume queue: by pointer for a queue that exists (no
// allocation per record), by name for one that did not when its offset was set (it may have
// been created since: DispatchWritten creates the queues of a group once it is accepted).
type offsetMap struct {
	byQueue map[*consumeQueue]int64
	byName  map[queueKey]int64
}

func (m *offsetMap) get(q *consumeQueue, topic []byte, qid int32) (int64, bool) {
	if q != nil {
		if n, ok := m.byQueue[q]; ok {
			return n, true
		}
	}
	if len(m.byName) == 0 {
		return 0, false
	}
	n, ok := m.byName[queueKey{string(topic), qid}]
	return n, ok
}

func (m *offsetMap) set(q *consumeQueue, topic []byte, qid int32, n int64) {
	if q != nil {
		if m.byQueue == nil {
			m.byQueue = map[*consumeQueue]int64{}
		}
		m.byQueue[q] = n
		return
	}
	if m.byName == nil {
		m.byName = map[queueKey]int64{}
	}
	m.byName[queueKey{string(topic), qid}] = n
}

// offsetCheck checks, across the records of one call, that each dispatchable record carries the
// queue offset its queue expects next: the queue's max offset, plus the records of the queue
// already accepted in the call. It creates nothing, so a refused record leaves no trace.
type offsetCheck struct {
	s       *Store
	next    offsetMap // after the records accepted so far
	pending offsetMap // after the records of the group being checked
}

func newOffsetCheck(s *Store) *offsetCheck { return &offsetCheck{s: s} }

// check accepts recs as a whole when every dispatchable one carries the offset expected next,
// advancing the expectations past them; otherwise it changes nothing and returns an error
// wrapping kind that names the first record that does not.
func (c *offsetCheck) check(recs []laidRecord, kind error) error {
	clear(c.pending.byQueue)
	clear(c.pending.byName)
	for _, r := range recs {
		if !message.IsDispatchable(r.v.SysFlag()) {
			continue
		}
		topic, qid := r.v.Topic(), r.v.QueueID()
		q := c.s.queue(topic, qid)
		n, ok := c.pending.get(q, topic, qid)
		if !ok {
			n, ok = c.next.get(q, topic, qid)
		}
		if !ok && q != nil {
			n = q.max.Load()
		}
		if qo := r.v.QueueOffset(); qo != n {
			return fmt.Errorf("record at %d has queue offset %d, queue %s-%d expects %d: %w", r.phys, qo, topic, qid, n, kind)
		}
		c.pending.set(q, topic, qid, n+1)
	}
	for q, n := range c.pending.byQueue {
		c.next.set(q, nil, 0, n)
	}
	for k, n := range c.pending.byName {
		c.next.set(nil, []byte(k.topic), k.qid, n)
	}
	return nil
}

// ensureQueues creates the consume queue of each dispatchable record of recs and maps the file
// its unit goes to, recording both in the record (createErr-classified errors). The appender
// holds Store.mu and has checked the offsets.
func (s *Store) ensureQueues(recs []laidRecord) error {
	for i := range recs {
		r := &recs[i]
		r.size = r.v.Size()
		if !message.IsDispatchable(r.v.SysFlag()) {
			continue
		}
		q, err := s.queueOrCreate(r.v.Topic(), r.v.QueueID())
		if err != nil {
			return createErr(err)
		}
		if err := q.ensure(r.v.QueueOffset()); err != nil {
			return createErr(err)
		}
		r.q, r.qoff = q, r.v.QueueOffset()
	}
	return nil
}

// dispatchLaid makes one record ensureQueues prepared visible: its consume-queue unit, the last
// store time, and its index entries unless it is ROLLBACK. hashes is scratch space, returned
// for reuse. Failing to start an index file is returned (createErr-classified) after everything
// else is done, the record then having no index entries.
func (s *Store) dispatchLaid(r *laidRecord, hashes []int32, sc *Scanned) ([]int32, error) {
	if sc != nil && sc.describes(r.v.Properties()) {
		return dispatchRead(s, r, sc.Known, hashes) // the proposer's read of the properties
	}
	known := message.ReadKnown(r.v.Properties()) // the one scan of the record's properties
	return dispatchRead(s, r, &known, hashes)
}

// dispatchRead is dispatchLaid once the record's properties are read into known.
func dispatchRead[T string | []byte](s *Store, r *laidRecord, known *message.Known[T], hashes []int32) ([]int32, error) {
	r.tags = message.TagsCodeBytes(known.Tags)
	if r.q != nil {
		r.q.put(r.qoff, cqUnit{phys: r.phys, size: int32(r.size), tags: r.tags})
	}
	s.lastStoreTS.Store(r.v.StoreTimestamp())
	if s.idx == nil || message.TransactionType(r.v.SysFlag()) == message.TransactionRollbackType {
		return hashes, nil
	}
	hashes = indexHashes(r.v.Topic(), known, hashes[:0])
	if len(hashes) == 0 {
		return hashes, nil
	}
	if err := s.idx.ensure(len(hashes)); err != nil {
		return hashes, createErr(err)
	}
	s.idx.add(hashes, r.phys, r.v.StoreTimestamp())
	return hashes, nil
}

// rawSegment returns the segment holding offset, creating it when offset starts a new file.
func (s *Store) rawSegment(offset int64) (*segment, error) {
	s.cl.segs.mu.RLock()
	seg := s.cl.segs.find(offset)
	s.cl.segs.mu.RUnlock()
	if seg != nil {
		return seg, nil
	}
	if offset%s.cl.size != 0 {
		return nil, fmt.Errorf("append raw: no commitlog file holds %d", offset)
	}
	seg, err := s.cl.segs.create(offset)
	if err != nil {
		return nil, fmt.Errorf("append raw: %w", createErr(err))
	}
	return seg, nil
}
