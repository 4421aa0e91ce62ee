package storage

import (
	"encoding/binary"
	"errors"
	"fmt"

	"rocketraft/message"
)

// recover brings the store to a consistent state after any kind of stop: clean shutdown,
// kill -9 or power loss. It is the only recovery code path.
//
//  1. Find the end of valid commitlog data by walking records from the start of the segment
//     holding the checkpoint's dispatchedOffset X (everything before X was durable when the
//     checkpoint was written): magic, TOTALSIZE, field lengths, body CRC and PHYSICALOFFSET
//     must all check, blank markers must reach the end of their file.
//  2. Truncate the torn tail: zero from the end to the end of its segment, remove later
//     segments. With Config.Truncate the end is moved back to TruncateTo first (which must be
//     a record boundary, or where a segment's blank marker starts, not past the valid end), and the cut is handled as after a crash.
//     In EntryLog mode the commitlog keeps the bytes past TruncateTo (they are the Raft log):
//     the written end is the end of valid data, and only the dispatched end moves back to
//     TruncateTo, steps 3-5 treating what follows it as cut.
//  3. Repair each consume queue: keep the prefix of units that are valid and point before X
//     (durable by the checkpoint), zero the rest.
//  4. After a crash (abort file present), drop the index files that were active at the
//     checkpoint or created later; they may hold torn chains.
//  5. Re-dispatch every record from X (or from where the dropped index files started) to the
//     end: a record's consume-queue unit is written at its stored QUEUEOFFSET only if that is
//     the queue's next offset, so units are never duplicated and offsets stay dense.
//  6. Sync what was repaired and write a checkpoint at the new end.
//
// After an abnormal stop, every file is synced first (syncEveryFile), so that a writeback error
// the failed process left unseen fails this start once, as a disk failure.
func (s *Store) recover(abnormal bool) error {
	if abnormal {
		if err := s.syncEveryFile(); err != nil {
			return err
		}
	}
	cp := s.cp.read()
	s.cl.segs.mu.RLock()
	first, last := s.cl.segs.first(), s.cl.segs.last()
	s.cl.segs.mu.RUnlock()
	if first == nil {
		// No commitlog: nothing to index. Start where the checkpoint says data ended, aligned
		// to a segment so the next append creates a well-named file.
		pos := cp.dispatchedOffset - cp.dispatchedOffset%s.cl.size
		if s.cfg.Truncate && s.cfg.TruncateTo != pos {
			if s.cfg.TruncateTo > pos {
				return fmt.Errorf("truncate to %d: empty commitlog ends at %d: %w", s.cfg.TruncateTo, pos, ErrTruncateBeyondEnd)
			}
			return fmt.Errorf("truncate to %d: empty commitlog starts at %d: %w", s.cfg.TruncateTo, pos, ErrTruncateInvalid)
		}
		s.cl.writePos.Store(pos)
		s.cl.flushed.Store(pos)
		s.cl.written.Store(pos)
		s.cl.synced.Store(pos)
		for _, q := range s.allQueues() {
			q.repair(pos, pos, true)
			q.recomputeMin(pos)
		}
		return s.flushLogics()
	}
	x := min(max(cp.dispatchedOffset, first.start), last.start+s.cl.size)
	walkFrom := x - x%s.cl.size
	if walkFrom > last.start {
		walkFrom = last.start
	}
	cut := s.cfg.Truncate
	if cut {
		t := s.cfg.TruncateTo
		if t < first.start {
			return fmt.Errorf("truncate to %d: commitlog starts at %d: %w", t, first.start, ErrTruncateInvalid)
		}
		walkFrom = min(walkFrom, t-t%s.cl.size)
	}

	// 1-2: the end of valid data, and the torn tail.
	boundary := false // TruncateTo is a record start
	scan := newScanProgress(s.log, "recovery: checking the commitlog", walkFrom, last.start+s.cl.size)
	end, err := s.cl.walk(walkFrom, func(phys int64, _ message.View) error {
		scan.at(phys)
		boundary = boundary || phys == s.cfg.TruncateTo
		return nil
	})
	scan.done(end)
	if err != nil {
		return fmt.Errorf("walk commitlog: %w", err)
	}
	if end < x {
		s.log.Warn("commitlog ends before the checkpoint", "end", end, "checkpoint", x)
		x = end
	}
	// dispEnd is where dispatched data ends: end, or in EntryLog mode TruncateTo (the bytes
	// after it stay written, for Raft, but their units and index entries are rolled back).
	dispEnd := end
	rollback := false
	if cut {
		t := s.cfg.TruncateTo
		switch {
		case t > end:
			return fmt.Errorf("truncate to %d: valid commitlog data ends at %d: %w", t, end, ErrTruncateBeyondEnd)
		case t == end:
			cut = false
		case !boundary && t != walkFrom && !s.cl.blankAt(t):
			return fmt.Errorf("truncate to %d: not a record boundary: %w", t, ErrTruncateInvalid)
		case s.cfg.EntryLog:
			s.log.Warn("rolling back the dispatch of written records", "written", end, "to", t)
			dispEnd, x, rollback = t, min(x, t), true
		default:
			s.log.Warn("truncating commitlog", "from", end, "to", t)
			end, dispEnd, x = t, t, min(x, t)
			abnormal = true // scrub the cut bytes and rebuild the index past it
		}
	}
	if err := s.cl.segs.removeFrom(end, abnormal); err != nil {
		return fmt.Errorf("truncate commitlog at %d: %w", end, err)
	}
	if err := s.cl.segs.sync(x, end); err != nil {
		return fmt.Errorf("sync commitlog: %w", err)
	}
	s.cl.writePos.Store(dispEnd)
	s.cl.flushed.Store(dispEnd)
	s.cl.written.Store(end)
	s.cl.synced.Store(end)
	if abnormal {
		s.log.Info("recovering after abnormal shutdown", "checkpoint", x, "end", end)
	}
	if s.cfg.EntryLog && x < dispEnd {
		// The checkpoint is older than the applied end (FlushDispatched was not called before
		// it was recorded): records the state machine refused cannot be told apart here.
		s.log.Warn("re-dispatching from the commitlog in EntryLog mode", "checkpoint", x, "to", dispEnd)
	}
	// rebuild: units and index entries past x (or dispEnd) may be stale and are redone.
	rebuild := abnormal || rollback

	// 3: consume queues.
	for _, q := range s.allQueues() {
		if err := q.repair(x, dispEnd, rebuild); err != nil {
			return err
		}
	}

	// 4: index files touched after the checkpoint (after a crash), and those holding entries
	// of records past the dispatched end (a cut, or an EntryLog rollback: after a clean
	// shutdown only those, since every index file is durable then).
	from := x
	idxFrom := int64(1<<63 - 1)
	if s.idx != nil && rebuild {
		if abnormal {
			idxFrom = max(min(cp.indexRebuildFrom, x), first.start)
			if cp.dispatchedOffset == 0 && cp.indexFileID == 0 {
				idxFrom = first.start
			}
		}
		err := s.idx.removeIf(func(f *indexFile, _ bool) bool {
			drop := abnormal && (cp.indexFileID == 0 || f.id >= cp.indexFileID)
			if cut && f.indexCount() > 1 && f.endPhyOffset() >= dispEnd {
				// entries of truncated records, possibly in a file older than the
				// checkpoint's; it is rebuilt from its first entry
				drop = true
				idxFrom = max(min(idxFrom, f.beginPhyOffset()), first.start)
			}
			return drop
		})
		from = min(x, idxFrom)
		if err != nil {
			return err
		}
	}

	// 5: re-dispatch.
	var hashes []int32
	redo := newScanProgress(s.log, "recovery: re-dispatching", from, dispEnd)
	_, err = s.cl.walk(from, func(phys int64, v message.View) error {
		if phys >= dispEnd {
			return errWalkDone
		}
		redo.at(phys)
		if phys >= x && message.IsDispatchable(v.SysFlag()) {
			if err := s.redispatchUnit(phys, v); err != nil {
				return err
			}
		}
		if s.idx != nil && phys >= idxFrom && message.TransactionType(v.SysFlag()) != message.TransactionRollbackType {
			hashes = viewIndexHashes(v, hashes[:0])
			if len(hashes) > 0 {
				if err := s.idx.ensure(len(hashes)); err != nil {
					return err
				}
				s.idx.add(hashes, phys, v.StoreTimestamp())
			}
		}
		s.lastStoreTS.Store(v.StoreTimestamp())
		return nil
	})
	if err != nil && !errors.Is(err, errWalkDone) {
		return fmt.Errorf("re-dispatch from %d: %w", from, err)
	}
	redo.done(dispEnd)
	clMin := s.cl.minOffset()
	for _, q := range s.allQueues() {
		q.recomputeMin(clMin)
	}

	// 6: make the repair durable.
	return s.flushLogics()
}

// errWalkDone stops a commitlog walk early; it is not a failure.
var errWalkDone = errors.New("walk done")

// syncEveryFile syncs every commitlog segment and consume-queue file before an abnormal
// shutdown's recovery writes anything (see segmentList.syncEvery): every writeback error the
// failed run left unseen is collected in this one start, which then fails with ErrIO (a disk
// failure: the broker exits with 74), instead of one error per start or one in service later.
func (s *Store) syncEveryFile() error {
	var errs []error
	if err := s.cl.segs.syncEvery(); err != nil {
		errs = append(errs, fmt.Errorf("commitlog: %w", err))
	}
	for _, q := range s.allQueues() {
		if err := q.segs.syncEvery(); err != nil {
			errs = append(errs, fmt.Errorf("consume queue %s-%d: %w", q.topic, q.qid, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: a writeback error left unseen by the previous run: %w", ErrIO, errors.Join(errs...))
	}
	return nil
}

// redispatchUnit writes the consume-queue unit of a record found after the checkpoint, if the
// queue does not hold it yet.
func (s *Store) redispatchUnit(phys int64, v message.View) error {
	q, err := s.queueOrCreate(v.Topic(), v.QueueID())
	if err != nil {
		return err
	}
	qo, next := v.QueueOffset(), q.max.Load()
	switch {
	case qo < next:
		if u, ok := q.unit(qo); ok && u.phys != phys {
			s.log.Warn("consume queue unit disagrees with commitlog", "topic", q.topic, "queue", q.qid, "offset", qo, "unit", u.phys, "record", phys)
		}
		return nil
	case qo > next:
		// Cannot happen if the checkpoint was honest; never create a hole.
		s.log.Error("record beyond consume queue end, not dispatched", "topic", q.topic, "queue", q.qid, "offset", qo, "max", next, "phys", phys)
		return nil
	}
	if err := q.ensure(qo); err != nil {
		return err
	}
	q.put(qo, cqUnit{phys: phys, size: int32(v.Size()), tags: message.TagsCodeBytes(v.Tags())})
	return nil
}

// repair cuts the queue after its last unit that is valid and points before x (the durable
// checkpoint), given that the commitlog now ends at end. Units after it belong to records at or
// after x and are rebuilt by re-dispatch. scrub zeroes stale bytes after the cut (see
// segmentList.removeFrom).
func (q *consumeQueue) repair(x, end int64, scrub bool) error {
	segs := q.segs.snapshot()
	cut := int64(0)
	if len(segs) > 0 {
		cut = segs[0].start / ConsumeQueueUnitSize
	}
	durable := func(b []byte) bool {
		phys := int64(binary.BigEndian.Uint64(b))
		size := int64(int32(binary.BigEndian.Uint32(b[8:])))
		if size == blankUnitSize && phys == 0 {
			return true
		}
		return size >= message.MinRecordSize && phys >= 0 && phys < x && phys+size <= end
	}
	for i := len(segs) - 1; i >= 0; i-- {
		sg := segs[i]
		if !durable(sg.b) {
			continue
		}
		p := int64(0)
		for p+ConsumeQueueUnitSize <= int64(len(sg.b)) && durable(sg.b[p:]) {
			p += ConsumeQueueUnitSize
		}
		cut = (sg.start + p) / ConsumeQueueUnitSize
		break
	}
	if err := q.segs.removeFrom(cut*ConsumeQueueUnitSize, scrub); err != nil {
		return fmt.Errorf("consume queue %s-%d: truncate at %d: %w", q.topic, q.qid, cut, err)
	}
	q.max.Store(cut)
	q.flushed = cut
	return nil
}
