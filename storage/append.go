package storage

import (
	"bytes"
	"context"
	"fmt"

	"rocketraft/message"
)

// AppendResult describes one appended record.
type AppendResult struct {
	// PhysicalOffset is the record's commitlog offset (for the offset msgId).
	PhysicalOffset int64
	// QueueOffset is the record's logical offset in its consume queue (0 for PREPARED and
	// ROLLBACK records, which get no unit).
	QueueOffset int64
	// Size is TOTALSIZE.
	Size int32
	// StoreTimestamp is the record's store time: the one it carried, or the append time if it
	// carried 0.
	StoreTimestamp int64
}

// plan is what the append path works out for one record before and under the lock.
type plan struct {
	v        message.View
	tags     int64
	dispatch bool
	hashes   []int32
	q        *consumeQueue
	qoff     int64
}

// Append appends records (each encoded by message.EncodeRecord) contiguously, as one unit
// that never spans commitlog files. Under the append lock it assigns each record its queue
// offset (per topic/queueId, from the record's own fields) and physical offset, patches them
// into the copy it writes into the mapped commitlog, and writes the consume-queue units and
// index entries, so a record is visible to GetMessages as soon as Append returns. A record
// whose STORETIMESTAMP is 0 is stamped with the current time; otherwise its value is kept, so
// a replicated log applies identically everywhere.
//
// Durability: with SYNC_FLUSH, Append waits until a group-commit sync covers its bytes (unless
// every record says WAIT=false); on timeout it returns the results with ErrFlushDiskTimeout.
// With ASYNC_FLUSH it returns at once.
//
// Append neither modifies nor retains records.
//
// Errors: ErrMessageIllegal (nothing appended), ErrDiskFull, ErrStoreClosed, ErrIO (a sync
// failed: this append may or may not be durable and later writes are refused).
func (s *Store) Append(ctx context.Context, records [][]byte) ([]AppendResult, error) {
	return s.append(ctx, records, true)
}

// AppendReplicated appends records as Append does, for the state machine of a replicated log
// (DLedger mode), where every replica must apply every committed entry the same way:
//   - it never refuses for diskMaxUsedSpaceRatio. Usage differs between replicas, so a refusal
//     here would leave a replica stuck or diverged; the leader decides before proposing
//     (CheckDiskSpace) and replicas follow.
//   - it never waits for a flush, whatever FlushDiskType says: the replicated log is the
//     durable copy.
//
// It still fails, as Append does, with ErrMessageIllegal (nothing appended; every replica
// meets it identically), and on real write failures, which are local to this replica:
// ErrDiskFull wrapping ENOSPC when a file cannot be created, ErrIO, ErrStoreClosed.
func (s *Store) AppendReplicated(records [][]byte) ([]AppendResult, error) {
	return s.append(context.Background(), records, false)
}

// append is Append (checkRatio true) and AppendReplicated (false).
func (s *Store) append(ctx context.Context, records [][]byte, checkRatio bool) ([]AppendResult, error) {
	if len(records) == 0 {
		return nil, fmt.Errorf("append: no records: %w", ErrMessageIllegal)
	}
	plans, total, wait, err := s.prepare(records)
	if err != nil {
		return nil, err
	}
	results := make([]AppendResult, len(records))
	end, err := s.appendLocked(plans, total, results, checkRatio)
	if err != nil {
		return nil, err
	}
	s.putCount.Add(int64(len(records)))
	s.putBytes.Add(int64(total))
	if cb := s.cfg.OnDispatch; cb != nil {
		for i := range plans {
			if p := &plans[i]; p.dispatch {
				cb(p.q.topic, p.q.qid, p.qoff, p.tags)
			}
		}
	}
	if s.cfg.FlushDiskType == SyncFlush && wait && checkRatio {
		if err := s.waitFlushed(ctx, end); err != nil {
			return results, err
		}
	}
	return results, nil
}

// prepare validates every record and computes what needs no lock: tags code, index hashes.
func (s *Store) prepare(records [][]byte) ([]plan, int, bool, error) {
	plans := make([]plan, len(records))
	total := 0
	wait := false
	for i, r := range records {
		if len(r) > s.cfg.maxRecordSize() {
			return nil, 0, false, fmt.Errorf("append: record %d is %d bytes, limit %d: %w", i, len(r), s.cfg.maxRecordSize(), ErrMessageIllegal)
		}
		v, err := message.ParseView(r)
		if err == nil && v.Size() != len(r) {
			err = fmt.Errorf("%d trailing bytes after the record", len(r)-v.Size())
		}
		if err == nil {
			err = v.CheckStored() // what recovery will demand of it
		}
		if err == nil && v.QueueID() < 0 {
			err = fmt.Errorf("negative queue id %d", v.QueueID())
		}
		if err == nil && len(v.Body()) > s.cfg.MaxMessageSize {
			err = fmt.Errorf("body is %d bytes, maxMessageSize %d", len(v.Body()), s.cfg.MaxMessageSize)
		}
		if err != nil {
			return nil, 0, false, fmt.Errorf("append: record %d: %w: %w", i, ErrMessageIllegal, err)
		}
		p := &plans[i]
		p.v = v
		p.tags = message.TagsCodeBytes(v.Tags())
		p.dispatch = message.IsDispatchable(v.SysFlag())
		if w, ok := v.Property(message.PropertyWaitStoreMsgOK); !ok || string(w) != "false" {
			wait = true
		}
		if s.idx != nil && message.TransactionType(v.SysFlag()) != message.TransactionRollbackType {
			p.hashes = indexHashes(v, nil)
		}
		total += len(r)
	}
	if int64(total)+message.BlankMarkerSize > s.cfg.MappedFileSizeCommitLog {
		return nil, 0, false, fmt.Errorf("append: %d bytes cannot fit one commitlog file of %d: %w", total, s.cfg.MappedFileSizeCommitLog, ErrMessageIllegal)
	}
	return plans, total, wait, nil
}

// indexHashes appends the index key hashes of a record: UNIQ_KEY and each KEYS element.
func indexHashes(v message.View, out []int32) []int32 {
	topic := v.Topic()
	if u, ok := v.Property(message.PropertyUniqClientMessageID); ok {
		out = append(out, message.IndexKeyHashParts(topic, u))
	}
	keys := v.Keys()
	for len(keys) > 0 {
		k := keys
		if i := bytes.IndexByte(keys, ' '); i >= 0 {
			k, keys = keys[:i], keys[i+1:]
		} else {
			keys = nil
		}
		if len(k) > 0 {
			out = append(out, message.IndexKeyHashParts(topic, k))
		}
	}
	return out
}

// appendLocked is the critical section: offsets, copy, dispatch. It returns the commitlog end
// after the records. checkRatio refuses appends over diskMaxUsedSpaceRatio (Append, not
// AppendReplicated).
func (s *Store) appendLocked(plans []plan, total int, results []AppendResult, checkRatio bool) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrStoreClosed
	}
	if err := s.failed(); err != nil {
		return 0, err
	}
	if checkRatio {
		if err := s.checkSpace(total); err != nil {
			return 0, fmt.Errorf("append: %w", err)
		}
	}
	// Phase 1: everything that can fail, before any byte is written.
	nkeys := 0
	var pending map[*consumeQueue]int64 // units already planned per queue, for big calls
	if len(plans) > 16 {
		pending = map[*consumeQueue]int64{}
	}
	for i := range plans {
		p := &plans[i]
		nkeys += len(p.hashes)
		if !p.dispatch {
			continue
		}
		q, err := s.queueOrCreate(p.v.Topic(), p.v.QueueID())
		if err != nil {
			return 0, fmt.Errorf("append: %w", createErr(err))
		}
		p.q = q
		var before int64
		if pending != nil {
			before = pending[q]
			pending[q]++
		} else {
			for j := 0; j < i; j++ {
				if plans[j].q == q {
					before++
				}
			}
		}
		if err := q.ensure(q.max.Load() + before); err != nil {
			return 0, fmt.Errorf("append: %w", createErr(err))
		}
	}
	if s.idx != nil && nkeys > 0 {
		if err := s.idx.ensure(nkeys); err != nil {
			return 0, fmt.Errorf("append: %w", createErr(err))
		}
	}
	seg, pos, err := s.cl.reserve(total)
	if err != nil {
		return 0, fmt.Errorf("append: %w", createErr(err))
	}
	// Phase 2: copy, patch, dispatch. Nothing here can fail.
	var now int64
	dst := seg.b[pos-seg.start:]
	off := 0
	for i := range plans {
		p := &plans[i]
		src := p.v.Bytes()
		copy(dst[off:], src)
		v, _ := message.ParseView(dst[off : off+len(src)])
		phys := pos + int64(off)
		if p.dispatch {
			p.qoff = p.q.max.Load()
		}
		v.SetQueueOffset(p.qoff)
		v.SetPhysicalOffset(phys)
		ts := v.StoreTimestamp()
		if ts == 0 {
			if now == 0 {
				now = s.cfg.Now().UnixMilli()
			}
			ts = now
			v.SetStoreTimestamp(ts)
		}
		if p.dispatch {
			p.q.put(p.qoff, cqUnit{phys: phys, size: int32(len(src)), tags: p.tags})
		}
		if s.idx != nil {
			s.idx.add(p.hashes, phys, ts)
		}
		results[i] = AppendResult{PhysicalOffset: phys, QueueOffset: p.qoff, Size: int32(len(src)), StoreTimestamp: ts}
		off += len(src)
		s.lastStoreTS.Store(ts)
	}
	end := pos + int64(total)
	s.cl.writePos.Store(end)
	return end, nil
}
