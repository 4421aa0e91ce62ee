package storage

import (
	"encoding/binary"
	"errors"
	"fmt"

	"rocketraft/message"
)

// The commitlog as the Raft log (Config.EntryLog). The Raft log store (fsm's entry log) writes
// each entry's records, a header record of topic message.RaftEntryTopic first, at the written
// end as the entry reaches the log, fsyncs them, and reads them back for Raft; the state machine
// makes them visible once the entry is applied. Readers (pulls, lookups, the HA server, snapshot
// manifests, retention) are bounded by the dispatched end, CommitLogMaxOffset, so bytes a new
// leader may still cut are never served.
//
// Locking: WriteEntry, TruncateWritten and DispatchWritten write under the append lock
// (Store.mu); ReadWritten copies under the segment list's lock (as every reader does) and may
// run beside them, since they only write past the written end (TruncateWritten zeroes under the
// segment list's write lock). SyncWritten and TruncateWritten hold Store.clFlushMu, so a sync
// never runs over bytes being cut.

// DispatchGroup is one append of an applied entry, in DispatchWritten's walk order: how many of
// the entry's records (header records not counted) belong to it and whether the state machine
// refused it as a whole (Skip: a stale delay-delivery step), in which case none is dispatched.
// Scans, when set, holds the proposer's reads of the records' properties (one per record, as
// AppendScanned takes them: fsm.LeaderScans on the leader), used where they describe the record.
type DispatchGroup struct {
	Records int
	Skip    bool
	Scans   []Scanned
}

// WrittenEnd is the end of what WriteEntry wrote (>= CommitLogMaxOffset). Outside EntryLog
// mode it is CommitLogMaxOffset.
func (s *Store) WrittenEnd() int64 { return s.cl.appendEnd() }

// entryLogOnly refuses an entry-log call on a store that is not in EntryLog mode.
func (s *Store) entryLogOnly(op string) error {
	if !s.cfg.EntryLog {
		return fmt.Errorf("%s: not an entry-log store: %w", op, ErrEntryLog)
	}
	return nil
}

// notEntryLog refuses an append other than WriteEntry on a store in EntryLog mode.
func (s *Store) notEntryLog(op string) error {
	if s.cfg.EntryLog {
		return fmt.Errorf("%s: %w", op, ErrEntryLog)
	}
	return nil
}

// WriteEntry writes recs contiguously at the written end and returns where the first starts and
// the written end after the last. When they do not fit the current commitlog file with room for
// the end-of-file marker, the file is ended with the blank marker and they start the next file,
// exactly as Append would roll, so every replica writing the same entries lays out the same
// bytes. Each record's PHYSICALOFFSET is set to where it lands (in the written copy; recs are not
// modified, and must not be until the records are dispatched: DispatchWritten reads them from
// recs instead of from the file); every other byte is written as given. Nothing is dispatched
// and nothing is synced.
// Every record must parse (message.ParseView) with a non-zero STORETIMESTAMP, the whole entry
// must fit in one file (else ErrMessageIllegal, nothing written). A failed write poisons the store
// (ErrIO). Refused unless Config.EntryLog (ErrEntryLog).
//
// Each record must also pass the check crash recovery applies (message.View.CheckStored: a
// record that fails it would end the log there on the next start) and be exactly one record, and
// a dispatchable one must have a non-negative queue id, as Append demands. Failing to create the
// next file is ErrDiskFull or ErrIO without poisoning the store (nothing was written), as for
// Append.
func (s *Store) WriteEntry(recs [][]byte) (pos, end int64, err error) {
	if err := s.entryLogOnly("write entry"); err != nil {
		return 0, 0, err
	}
	total, err := s.checkEntry(recs)
	if err != nil {
		return 0, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, 0, ErrStoreClosed
	}
	if err := s.failed(); err != nil {
		return 0, 0, err
	}
	at := s.cl.written.Load()
	from := at
	seg, ok := s.cl.fits(at, total)
	if !ok {
		if seg, at, err = s.cl.rollFile(at); err != nil {
			return 0, 0, fmt.Errorf("write entry: %w", createErr(err))
		}
	}
	buf := s.entryBuf[:0]
	for _, r := range recs {
		off := len(buf)
		buf = append(buf, r...)
		// checkEntry parsed the same bytes: the field is there, at its fixed place
		binary.BigEndian.PutUint64(buf[off+message.OffsetPhysicalOffset:], uint64(at+int64(off)))
	}
	if cap(buf) <= maxStageKeep {
		s.entryBuf = buf[:0]
	} else {
		s.entryBuf = nil
	}
	// Through the file even when small: every entry is synced right after (SyncWritten), and a
	// store into a page of the mapping that the last sync cleaned faults again and shoots the
	// page's translation down on every CPU (writeThroughMin); a lone producer's entry is ~1.2 KB.
	if err := seg.write(at, buf, false); err != nil {
		return 0, 0, s.fail(fmt.Errorf("write entry: commitlog write of %d bytes at %d: %w", len(buf), at, err))
	}
	end = at + int64(len(buf))
	s.cl.written.Store(end)
	s.keepUndispatched(from, at, end, recs)
	return at, end, nil
}

// The records of the entries written and not yet dispatched stay in memory, as the caller gave
// them, so that DispatchWritten parses them there. Read back through the commitlog's mapping,
// each page just written through the file costs a page fault first (a fault maps 16 pages:
// one for every 16-26 pages written, more than half of a node's page faults under load, and a
// fault costs several microseconds on a virtual machine). The bytes are the file's but for each
// record's PHYSICALOFFSET, which the dispatch takes from the position. Entries are kept up to
// maxUndispatched entries and maxUndispatchedBytes (the entries' records stay referenced, not
// copied: under load a few entries are written ahead of the dispatch); past either, or after a
// truncation, the dispatch reads the file as before until it has caught up.
const (
	maxUndispatched      = 256
	maxUndispatchedBytes = 32 << 20
)

// writtenEntry is one entry's records, written at [at, end) when the written end was from: from
// and at differ when the entry started the next file, the rest of the file before it holding
// the blank end-of-file marker.
type writtenEntry struct {
	from, at, end int64
	recs          [][]byte
}

// keepUndispatched records an entry just written. Hold s.mu.
func (s *Store) keepUndispatched(from, at, end int64, recs [][]byte) {
	if n := len(s.undispatched); n >= maxUndispatched || n > 0 && end-s.undispatched[0].from > maxUndispatchedBytes {
		s.undispatched = nil // the dispatch is far behind: it reads the file until it catches up
		return
	}
	s.undispatched = append(s.undispatched, writtenEntry{from: from, at: at, end: end, recs: recs})
}

// undispatchedRecords returns the records from d (the dispatched end) to end from the entries
// kept in memory, with where each lies, or false when the kept entries do not cover exactly that
// range (the dispatch then reads the file): each kept entry must have been written at the end of
// the one before it, the first at d. Hold s.mu.
func (s *Store) undispatchedRecords(d, end int64) ([]laidRecord, bool) {
	pos := d
	var recs []laidRecord
	for _, e := range s.undispatched {
		if e.end <= d {
			continue
		}
		if pos >= end {
			break
		}
		if e.from != pos {
			return nil, false // an entry before it is not kept (dropped, or written before a truncation)
		}
		at := e.at
		for _, r := range e.recs {
			v, err := message.ParseView(r)
			if err != nil || v.Size() != len(r) {
				return nil, false // WriteEntry checked these bytes: not what it wrote
			}
			if string(v.Topic()) != message.RaftEntryTopic {
				recs = append(recs, laidRecord{phys: at, v: v})
			}
			at += int64(len(r))
		}
		if at != e.end {
			return nil, false
		}
		pos = e.end
	}
	return recs, pos == end
}

// dropUndispatched forgets the kept entries that end at or before d. Hold s.mu.
func (s *Store) dropUndispatched(d int64) {
	i := 0
	for i < len(s.undispatched) && s.undispatched[i].end <= d {
		s.undispatched[i] = writtenEntry{}
		i++
	}
	s.undispatched = s.undispatched[i:]
	if len(s.undispatched) == 0 {
		s.undispatched = nil
	}
}

// checkEntry validates WriteEntry's records without any lock and returns their total size.
func (s *Store) checkEntry(recs [][]byte) (int, error) {
	if len(recs) == 0 {
		return 0, fmt.Errorf("write entry: no records: %w", ErrMessageIllegal)
	}
	total := 0
	for i, r := range recs {
		v, err := message.ParseView(r)
		if err == nil && v.Size() != len(r) {
			err = fmt.Errorf("%d trailing bytes after the record", len(r)-v.Size())
		}
		if err == nil {
			err = v.CheckStored()
		}
		if err == nil && v.StoreTimestamp() == 0 {
			err = errors.New("STORETIMESTAMP is 0")
		}
		if err == nil && v.QueueID() < 0 && message.IsDispatchable(v.SysFlag()) {
			err = fmt.Errorf("negative queue id %d", v.QueueID())
		}
		if err != nil {
			return 0, fmt.Errorf("write entry: record %d: %w: %w", i, ErrMessageIllegal, err)
		}
		total += len(r)
	}
	if int64(total)+message.BlankMarkerSize > s.cl.size {
		return 0, fmt.Errorf("write entry: %d bytes cannot fit one commitlog file of %d: %w", total, s.cl.size, ErrMessageIllegal)
	}
	return total, nil
}

// SyncWritten makes every byte WriteEntry wrote durable (the range not yet synced, fdatasync of
// the mapped files, through the process's io_uring where there is one: vfs.Mapping.Sync). A
// failure poisons the store (ErrIO).
func (s *Store) SyncWritten() error { return s.syncWritten(false) }

// SyncWrittenBlocking is SyncWritten with the fdatasync on the calling thread
// (vfs.Mapping.SyncBlocking), for a caller that only waits for it: a follower storing the
// leader's entries.
func (s *Store) SyncWrittenBlocking() error { return s.syncWritten(true) }

func (s *Store) syncWritten(blocking bool) error {
	if err := s.entryLogOnly("sync written"); err != nil {
		return err
	}
	s.clFlushMu.Lock()
	defer s.clFlushMu.Unlock()
	if s.released {
		return ErrStoreClosed
	}
	if err := s.failed(); err != nil {
		return err
	}
	return s.syncWrittenLocked(blocking)
}

// syncWrittenLocked syncs the written bytes not yet synced and moves the flushed end (the
// durable part of the dispatched bytes) up to what that covers. It is EntryLog mode's commitlog
// flush (flushCommitLog). The caller holds clFlushMu. blocking: the fdatasyncs on this thread
// (vfs.Mapping.SyncBlocking).
func (s *Store) syncWrittenLocked(blocking bool) error {
	target, from := s.cl.written.Load(), s.cl.synced.Load()
	if target > from {
		sync := s.cl.segs.sync
		if blocking {
			sync = s.cl.segs.syncBlocking
		}
		if err := sync(from, target); err != nil {
			return s.fail(fmt.Errorf("commitlog sync of written bytes [%d,%d): %w", from, target, err))
		}
		s.cl.synced.Store(target)
	}
	// The dispatched end never passes the written end, but may have moved since target was read.
	if d := min(target, s.cl.writePos.Load()); d > s.cl.flushed.Load() {
		s.cl.flushed.Store(d)
	}
	return nil
}

// ReadWritten returns a copy of the n written bytes at pos (pos+n <= WrittenEnd, within one
// file), whether dispatched or not.
func (s *Store) ReadWritten(pos int64, n int) ([]byte, error) {
	if err := s.entryLogOnly("read written"); err != nil {
		return nil, err
	}
	if w := s.cl.written.Load(); pos < 0 || n < 0 || pos+int64(n) > w {
		return nil, fmt.Errorf("read written: %d bytes at %d: outside the written commitlog (end %d)", n, pos, w)
	}
	b, ok := s.cl.segs.copyAt(pos, n)
	if !ok {
		return nil, fmt.Errorf("read written: %d bytes at %d: not in one stored file", n, pos)
	}
	if w := s.cl.written.Load(); pos+int64(n) > w {
		return nil, fmt.Errorf("read written: %d bytes at %d: truncated meanwhile (end %d)", n, pos, w)
	}
	return b, nil
}

// TruncateWritten cuts what was written back to pos, a record boundary (or the blank marker's
// position) at or after the dispatched end: the bytes after it are zeroed and files wholly past
// it removed, and the next WriteEntry starts there. pos below the dispatched end is
// ErrTruncateInvalid (applied entries are never cut).
//
// pos may also be the start of the file after a blank marker, which keeps the marker; replicas
// lay out the same bytes only if they cut alike, so the log store cuts at the end WriteEntry
// returned for the last entry it keeps. pos past the written end, or not reachable by walking
// the records from the dispatched end, is ErrTruncateInvalid; pos equal to the written end
// changes nothing. The zeroing is synced before it returns; a failure poisons the store (ErrIO).
func (s *Store) TruncateWritten(pos int64) error {
	if err := s.entryLogOnly("truncate written"); err != nil {
		return err
	}
	s.clFlushMu.Lock()
	defer s.clFlushMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.released {
		return ErrStoreClosed
	}
	if err := s.failed(); err != nil {
		return err
	}
	d, w := s.cl.writePos.Load(), s.cl.written.Load()
	switch {
	case pos < d:
		return fmt.Errorf("truncate written to %d: below the dispatched end %d: %w", pos, d, ErrTruncateInvalid)
	case pos > w:
		return fmt.Errorf("truncate written to %d: past the written end %d: %w", pos, w, ErrTruncateInvalid)
	case pos == w:
		return nil
	}
	if err := s.cl.walkWritten(d, pos, nil); err != nil {
		return fmt.Errorf("truncate written to %d: not a record boundary: %w: %w", pos, ErrTruncateInvalid, err)
	}
	s.log.Info("truncating written commitlog", "from", w, "to", pos)
	// From here the bytes past pos are being cut: whatever fails, they are no longer written.
	s.undispatched = nil
	s.cl.written.Store(pos)
	if s.cl.synced.Load() > pos {
		s.cl.synced.Store(pos)
	}
	if err := s.cl.cutWritten(pos, w); err != nil {
		return s.fail(fmt.Errorf("truncate written to %d: %w", pos, err))
	}
	return nil
}

// DispatchWritten makes the written bytes up to end visible, as Append would have: it walks the
// records from the dispatched end to end (crossing blank markers), skips header records
// (message.RaftEntryTopic), and splits the others, in order, among groups (their Records must add
// up to exactly that count, else an error and nothing changes). A group not Skip whose
// dispatchable records each carry the QUEUEOFFSET its queue expects next is dispatched (consume
// queue units, index entries, OnDispatch), its outcome's Results filled as Append's; a group with
// one record that does not gets ErrQueueOffsetStale and nothing of it is dispatched; a Skip group
// gets neither. Then the dispatched end is end. end must be a record boundary <= WrittenEnd.
// Failures to create a consume-queue or index file poison the store (ErrIO) like Append's.
//
// The expected offsets account for the groups dispatched before in the same call. Records that
// are not dispatchable (PREPARED, ROLLBACK) are not checked and get no unit (QueueOffset 0 in
// their result), but are indexed unless ROLLBACK, as Append does.
func (s *Store) DispatchWritten(end int64, groups []DispatchGroup) ([]BatchOutcome, error) {
	if err := s.entryLogOnly("dispatch written"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	out, done, err := s.dispatchWrittenLocked(end, groups)
	s.mu.Unlock()
	if len(done) > 0 {
		n, bytes := 0, 0
		cb := s.cfg.OnDispatch
		for _, r := range done {
			n++
			bytes += r.size
			if cb != nil && r.q != nil {
				cb(r.q.topic, r.q.qid, r.qoff, r.tags)
			}
		}
		s.putCount.Add(int64(n))
		s.putBytes.Add(int64(bytes))
	}
	if err != nil {
		return nil, err
	}
	s.kickFlushIfDue(end)
	return out, nil
}

// dispatchWrittenLocked is DispatchWritten under the append lock. It returns, with the
// outcomes, the records it dispatched (for the counters and OnDispatch, outside the lock).
func (s *Store) dispatchWrittenLocked(end int64, groups []DispatchGroup) ([]BatchOutcome, []laidRecord, error) {
	if s.closed {
		return nil, nil, ErrStoreClosed
	}
	if err := s.failed(); err != nil {
		return nil, nil, err
	}
	d, w := s.cl.writePos.Load(), s.cl.written.Load()
	if end < d || end > w {
		return nil, nil, fmt.Errorf("dispatch written to %d: outside [%d, %d] (dispatched, written)", end, d, w)
	}
	recs, kept := s.undispatchedRecords(d, end)
	s.dropUndispatched(end)
	var err error
	if !kept {
		recs = recs[:0]
		err = s.cl.walkWritten(d, end, func(phys int64, v message.View, blank bool) error {
			if !blank && string(v.Topic()) != message.RaftEntryTopic {
				recs = append(recs, laidRecord{phys: phys, v: v})
			}
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("dispatch written to %d: %w", end, err)
		}
	}
	n := 0
	for i, g := range groups {
		if g.Records < 0 {
			return nil, nil, fmt.Errorf("dispatch written to %d: group %d has %d records", end, i, g.Records)
		}
		n += g.Records
	}
	if n != len(recs) {
		return nil, nil, fmt.Errorf("dispatch written to %d: groups hold %d records, [%d, %d) holds %d", end, n, d, end, len(recs))
	}

	// Decide every group before dispatching any: all or nothing per group.
	out := make([]BatchOutcome, len(groups))
	accept := make([]bool, len(groups))
	check := newOffsetCheck(s)
	for i, at := 0, 0; i < len(groups); i++ {
		part := recs[at : at+groups[i].Records]
		at += groups[i].Records
		if groups[i].Skip {
			continue
		}
		if err := check.check(part, ErrQueueOffsetStale); err != nil {
			out[i].Err = fmt.Errorf("dispatch written: %w", err)
			continue
		}
		accept[i] = true
		if err := s.ensureQueues(part); err != nil {
			return nil, nil, s.fail(fmt.Errorf("dispatch written: %w", err))
		}
	}

	var done []laidRecord
	var hashes []int32
	for i, at := 0, 0; i < len(groups); i++ {
		part := recs[at : at+groups[i].Records]
		at += groups[i].Records
		if !accept[i] {
			continue
		}
		res := make([]AppendResult, len(part))
		for j := range part {
			r := &part[j]
			if hashes, err = s.dispatchLaid(r, hashes, scannedAt(groups[i].Scans, j)); err != nil {
				return nil, done, s.fail(fmt.Errorf("dispatch written: record at %d: %w", r.phys, err))
			}
			res[j] = AppendResult{PhysicalOffset: r.phys, QueueOffset: r.qoff, Size: int32(r.size), StoreTimestamp: r.v.StoreTimestamp()}
			r.v = message.View{} // its bytes are not to be touched outside the lock
			done = append(done, *r)
		}
		out[i].Results = res
	}
	s.cl.writePos.Store(end)
	return out, done, nil
}

// FlushDispatched makes durable everything dispatched so far: the commitlog up to the
// dispatched end (in EntryLog mode, the written bytes not yet synced), then the consume queues,
// the sealed index files and the checkpoint, which then vouches for the dispatched end. The state
// machine of an EntryLog store calls it before it writes its applied marker, so that a restart
// truncating the dispatch back to that marker (Config.TruncateTo) finds every unit before it
// durable and never re-dispatches from the commitlog, which may hold records the state machine
// refused (ErrQueueOffsetStale, Skip groups) that a re-dispatch could not tell apart. The active
// index file is left to the periodic flush, as there (flushLogicsOpt): after a crash recovery
// rebuilds it from the commitlog whatever was synced, and QueryByKey leaves out the refused
// records the rebuild indexes.
func (s *Store) FlushDispatched() error {
	if err := s.flushCommitLog(); err != nil {
		return fmt.Errorf("flush dispatched: %w", err)
	}
	if err := s.flushLogicsOpt(true); err != nil {
		return fmt.Errorf("flush dispatched: %w", err)
	}
	return nil
}
