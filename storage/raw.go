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
	type rawRec struct {
		pos int
		v   message.View
	}
	var recs []rawRec
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
		recs = append(recs, rawRec{pos, v})
		pos += v.Size()
	}
	expect := map[*consumeQueue]int64{}
	for _, r := range recs {
		if !message.IsDispatchable(r.v.SysFlag()) {
			continue
		}
		q, err := s.queueOrCreate(r.v.Topic(), r.v.QueueID())
		if err != nil {
			return fmt.Errorf("append raw: %w", createErr(err))
		}
		next, ok := expect[q]
		if !ok {
			next = q.max.Load()
		}
		if r.v.QueueOffset() != next {
			return fmt.Errorf("append raw: record at %d has queue offset %d, queue %s-%d expects %d: %w", r.v.PhysicalOffset(), r.v.QueueOffset(), q.topic, q.qid, next, ErrOffsetMismatch)
		}
		if err := q.ensure(next); err != nil {
			return fmt.Errorf("append raw: %w", createErr(err))
		}
		expect[q] = next + 1
	}
	seg, err := s.rawSegment(offset)
	if err != nil {
		return err
	}
	if err := seg.write(offset, data[:end], s.cfg.FlushDiskType == AsyncFlush); err != nil {
		return s.fail(fmt.Errorf("append raw: commitlog write of %d bytes at %d: %w", end, offset, err))
	}
	var hashes []int32
	for _, r := range recs {
		phys := offset + int64(r.pos)
		known := message.ReadKnown(r.v.Properties())
		if message.IsDispatchable(r.v.SysFlag()) {
			q := s.queue(r.v.Topic(), r.v.QueueID())
			q.put(r.v.QueueOffset(), cqUnit{phys: phys, size: int32(r.v.Size()), tags: message.TagsCodeBytes(known.Tags)})
		}
		if s.idx != nil && message.TransactionType(r.v.SysFlag()) != message.TransactionRollbackType {
			hashes = indexHashes(r.v.Topic(), &known, hashes[:0])
			if len(hashes) > 0 && s.idx.ensure(len(hashes)) == nil {
				s.idx.add(hashes, phys, r.v.StoreTimestamp())
			}
		}
		s.lastStoreTS.Store(r.v.StoreTimestamp())
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
			if message.IsDispatchable(r.v.SysFlag()) {
				cb(string(r.v.Topic()), r.v.QueueID(), r.v.QueueOffset(), message.TagsCodeBytes(r.v.Tags()))
			}
		}
	}
	return nil
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
