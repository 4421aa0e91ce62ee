package storage

import (
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
// failed: this append may or may not be durable and later writes are refused), ErrEntryLog (the
// store is in EntryLog mode: WriteEntry and DispatchWritten write it; so for every variant).
func (s *Store) Append(ctx context.Context, records [][]byte) ([]AppendResult, error) {
	return s.append(ctx, records, nil, true)
}

// AppendScanned is Append for records whose properties the caller has already read: scans[i],
// when set, is record i's (Scanned), and spares the append its own read of them. A record
// without one, or whose properties its Scanned does not describe, is read as Append reads it,
// so the outcome is Append's in every case.
func (s *Store) AppendScanned(ctx context.Context, records [][]byte, scans []Scanned) ([]AppendResult, error) {
	return s.append(ctx, records, scans, true)
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
	out, err := s.AppendReplicatedBatch([][][]byte{records})
	if err != nil {
		return nil, err
	}
	return out[0].Results, out[0].Err
}

// BatchOutcome is what AppendReplicatedBatch (or DispatchWritten) did with one of its appends.
type BatchOutcome struct {
	// Results has one entry per record of a stored (dispatched) append.
	Results []AppendResult
	// Err, when set, wraps ErrMessageIllegal (AppendReplicatedBatch) or ErrQueueOffsetStale
	// (DispatchWritten): the append was refused and nothing of it stored or dispatched (every
	// replica refuses it alike).
	Err error
}

// AppendReplicatedBatch stores several appends, in order, as AppendReplicated would one after
// the other: each is one unit that never spans commitlog files and is refused alone when its
// records are illegal. It exists for the state machine, which applies a Raft entry holding many
// sends: the entry's records are staged in memory and reach each commitlog file with one write
// (see vfs.Mapping.WriteAt) instead of a page fault per fresh page of the mapping, and the
// append lock is taken once.
//
// A local write failure (ErrDiskFull creating a file, ErrIO, ErrStoreClosed) stops the batch
// and is returned alone, as a *BatchWriteError when it happened while appends were being
// stored: which ones before it were stored is then for recovery to find out.
func (s *Store) AppendReplicatedBatch(appends [][][]byte) ([]BatchOutcome, error) {
	return s.AppendReplicatedBatchScanned(appends, nil)
}

// AppendReplicatedBatchScanned is AppendReplicatedBatch with the reads of the records'
// properties the caller already has: scans[i][j], when set, is record j of append i's, used as
// AppendScanned uses it. The state machine passes them for the entries its own node proposed
// (fsm.LeaderScans); every other apply reads the records, with the same outcome.
func (s *Store) AppendReplicatedBatchScanned(appends [][][]byte, scans [][]Scanned) ([]BatchOutcome, error) {
	if err := s.notEntryLog("append"); err != nil {
		return nil, err
	}
	gs := make([]group, len(appends))
	for i, recs := range appends {
		gs[i].idx = i
		var sc []Scanned
		if i < len(scans) {
			sc = scans[i]
		}
		gs[i].prepare(s, recs, sc)
	}
	err := s.appendGroups(gs, false)
	if err != nil {
		return nil, err
	}
	out := make([]BatchOutcome, len(gs))
	for i := range gs {
		out[i] = BatchOutcome{Results: gs[i].results, Err: gs[i].err}
	}
	return out, nil
}

// append is Append and AppendScanned (checkRatio true) and AppendReplicated (false).
func (s *Store) append(ctx context.Context, records [][]byte, scans []Scanned, checkRatio bool) ([]AppendResult, error) {
	if err := s.notEntryLog("append"); err != nil {
		return nil, err
	}
	gs := []group{{}}
	g := &gs[0]
	if g.prepare(s, records, scans); g.err != nil {
		return nil, g.err
	}
	if err := s.appendGroups(gs, checkRatio); err != nil {
		return nil, err
	}
	if s.cfg.FlushDiskType == SyncFlush && g.wait && checkRatio {
		if err := s.waitFlushed(ctx, g.end); err != nil {
			return g.results, err
		}
	}
	return g.results, nil
}

// BatchWriteError is a local write failure of AppendReplicatedBatch while storing the append
// at index At (appends before it may be stored).
type BatchWriteError struct {
	At  int
	Err error
}

func (e *BatchWriteError) Error() string { return fmt.Sprintf("append %d: %v", e.At, e.Err) }

// Unwrap returns the failure (ErrDiskFull, ErrIO).
func (e *BatchWriteError) Unwrap() error { return e.Err }

// group is one append (one unit of records) on its way through appendGroups.
type group struct {
	idx     int // in the caller's list
	plans   []plan
	total   int
	wait    bool  // some record wants SYNC_FLUSH's wait (WAIT != false)
	err     error // refused by prepare (ErrMessageIllegal): nothing of it is written
	results []AppendResult
	end     int64 // commitlog end after it, once staged
	stored  bool  // published: its records are readable
}

func (g *group) prepare(s *Store, records [][]byte, scans []Scanned) {
	if len(records) == 0 {
		g.err = fmt.Errorf("append: no records: %w", ErrMessageIllegal)
		return
	}
	g.plans, g.total, g.wait, g.err = s.prepare(records, scans)
}

// appendGroups stores gs (skipping those prepare refused) under the append lock, then counts
// and dispatches the stored ones. checkRatio refuses appends over diskMaxUsedSpaceRatio.
func (s *Store) appendGroups(gs []group, checkRatio bool) error {
	s.mu.Lock()
	err := s.appendLocked(gs, checkRatio)
	s.mu.Unlock()
	for i := range gs {
		g := &gs[i]
		if !g.stored {
			continue
		}
		s.putCount.Add(int64(len(g.plans)))
		s.putBytes.Add(int64(g.total))
		if cb := s.cfg.OnDispatch; cb != nil {
			for j := range g.plans {
				if p := &g.plans[j]; p.dispatch {
					cb(p.q.topic, p.q.qid, p.qoff, p.tags)
				}
			}
		}
	}
	return err
}

// prepare validates every record and computes what needs no lock: tags code, index hashes.
// scans[i], when it describes record i's properties, is used instead of reading them.
func (s *Store) prepare(records [][]byte, scans []Scanned) ([]plan, int, bool, error) {
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
		p.dispatch = message.IsDispatchable(v.SysFlag())
		indexed := s.idx != nil && message.TransactionType(v.SysFlag()) != message.TransactionRollbackType
		var w bool
		if sc := scannedAt(scans, i); sc != nil && sc.describes(v.Properties()) {
			w = readInto(p, v.Topic(), sc.Known, indexed) // the encoder's read of the properties
		} else {
			known := message.ReadKnown(v.Properties()) // the one scan of the record's properties
			w = readInto(p, v.Topic(), &known, indexed)
		}
		wait = wait || w
		total += len(r)
	}
	if int64(total)+message.BlankMarkerSize > s.cfg.MappedFileSizeCommitLog {
		return nil, 0, false, fmt.Errorf("append: %d bytes cannot fit one commitlog file of %d: %w", total, s.cfg.MappedFileSizeCommitLog, ErrMessageIllegal)
	}
	return plans, total, wait, nil
}

// viewIndexHashes is indexHashes for a record read back (recovery), scanning its properties.
func viewIndexHashes(v message.View, out []int32) []int32 {
	known := message.ReadKnown(v.Properties())
	return indexHashes(v.Topic(), &known, out)
}

// readInto sets what p takes from its record's properties, read into known (from the record's
// bytes, or the encoder's string: Scanned): the tags code and, when indexed, the index key
// hashes. It reports the record's WAIT (Known.WaitStore).
func readInto[T string | []byte](p *plan, topic []byte, known *message.Known[T], indexed bool) bool {
	p.tags = message.TagsCodeBytes(known.Tags)
	if indexed {
		p.hashes = indexHashes(topic, known, nil)
	}
	return known.WaitStore()
}

// indexHashes appends the index key hashes of a record of topic: UNIQ_KEY and each KEYS element.
func indexHashes[T string | []byte](topic []byte, known *message.Known[T], out []int32) []int32 {
	if known.Has&message.KnownUniqKey != 0 {
		out = append(out, message.IndexKeyHashParts(topic, known.UniqKey))
	}
	keys := known.Keys
	for len(keys) > 0 {
		k := keys
		if i := indexSpace(keys); i >= 0 {
			k, keys = keys[:i], keys[i+1:]
		} else {
			keys = keys[:0]
		}
		if len(k) > 0 {
			out = append(out, message.IndexKeyHashParts(topic, k))
		}
	}
	return out
}

// indexSpace is the index of the first space in keys (KEYS' separator), or -1.
func indexSpace[T string | []byte](keys T) int {
	for i := 0; i < len(keys); i++ {
		if keys[i] == ' ' {
			return i
		}
	}
	return -1
}

// stage is what appendLocked has assigned offsets to but not yet made readable: the records'
// bytes for one commitlog file, from start, and the units and index entries that point at
// them. Guarded by Store.mu; its buffers are reused across appends.
type stage struct {
	seg    *segment
	start  int64
	buf    []byte
	units  []stagedUnit
	keys   int // index entries among units
	groups []*group
	// mapSmall lets a small stage be copied into the mapping (see segment.write): set for
	// Append with ASYNC_FLUSH.
	mapSmall bool
}

// stagedUnit is one record's consume-queue unit and index keys, published after its bytes.
type stagedUnit struct {
	q      *consumeQueue // nil: not dispatched
	qoff   int64
	unit   cqUnit
	hashes []int32
	ts     int64
}

// end is the commitlog offset after what is staged.
func (st *stage) end() int64 { return st.start + int64(len(st.buf)) }

// appendLocked is the critical section: for each group, offsets, a patched copy in the stage,
// and at the end (or before a commitlog file is rolled) one write of the stage and then the
// consume-queue units, index entries and commitlog end that make it readable, in that order,
// so a reader never follows a unit to bytes not yet written. checkRatio refuses appends over
// diskMaxUsedSpaceRatio (Append, not AppendReplicated).
func (s *Store) appendLocked(gs []group, checkRatio bool) error {
	if s.closed {
		return ErrStoreClosed
	}
	if err := s.failed(); err != nil {
		return err
	}
	s.appendGen++
	st := &s.stage
	st.seg, st.start = nil, s.cl.writePos.Load()
	st.mapSmall = checkRatio && s.cfg.FlushDiskType == AsyncFlush
	for i := range gs {
		g := &gs[i]
		if g.err != nil {
			continue
		}
		if err := s.stageGroup(g, checkRatio); err != nil {
			// what is staged before g is complete: make it readable, then report g
			if perr := s.publishGroups(len(gs)); perr != nil {
				return perr
			}
			return batchErr(len(gs), g, err)
		}
	}
	return s.publishGroups(len(gs))
}

// publishGroups is publish for a call storing n groups: a failure names the first group staged.
func (s *Store) publishGroups(n int) error {
	if len(s.stage.groups) == 0 {
		return s.publish()
	}
	first := s.stage.groups[0]
	return batchErr(n, first, s.publish())
}

// batchErr wraps err, met storing g in a call storing n groups, as a *BatchWriteError; a call
// with one group gets err as is.
func batchErr(n int, g *group, err error) error {
	if err == nil || n == 1 {
		return err
	}
	return &BatchWriteError{At: g.idx, Err: err}
}

// stageGroup assigns g's records their offsets and stages their patched bytes. Everything that
// can fail comes before the first byte of g is staged.
func (s *Store) stageGroup(g *group, checkRatio bool) error {
	st := &s.stage
	if checkRatio {
		if err := s.checkSpace(g.total); err != nil {
			return fmt.Errorf("append: %w", err)
		}
	}
	nkeys := 0
	for i := range g.plans {
		p := &g.plans[i]
		nkeys += len(p.hashes)
		if !p.dispatch {
			continue
		}
		q, err := s.queueOrCreate(p.v.Topic(), p.v.QueueID())
		if err != nil {
			return fmt.Errorf("append: %w", createErr(err))
		}
		p.q = q
		p.qoff = q.assign(s.appendGen)
		if err := q.ensure(p.qoff); err != nil {
			return fmt.Errorf("append: %w", createErr(err))
		}
	}
	if s.idx != nil && nkeys > 0 {
		// Entries staged so far go to the active index file, as they would have one append at
		// a time: publish them before a new file is started.
		if _, ok := s.idx.fits(st.keys + nkeys); !ok && st.keys > 0 {
			if err := s.publish(); err != nil {
				return err
			}
		}
		if err := s.idx.ensure(st.keys + nkeys); err != nil {
			return fmt.Errorf("append: %w", createErr(err))
		}
	}
	if err := s.place(g.total); err != nil {
		return fmt.Errorf("append: %w", createErr(err))
	}
	// Nothing below can fail.
	g.results = make([]AppendResult, len(g.plans))
	var now int64
	for i := range g.plans {
		p := &g.plans[i]
		src := p.v.Bytes()
		off := len(st.buf)
		st.buf = append(st.buf, src...)
		v, _ := message.ParseView(st.buf[off:])
		phys := st.start + int64(off)
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
		u := stagedUnit{qoff: p.qoff, unit: cqUnit{phys: phys, size: int32(len(src)), tags: p.tags}, hashes: p.hashes, ts: ts}
		if p.dispatch {
			u.q = p.q
		}
		st.units = append(st.units, u)
		g.results[i] = AppendResult{PhysicalOffset: phys, QueueOffset: p.qoff, Size: int32(len(src)), StoreTimestamp: ts}
	}
	st.keys += nkeys
	g.end = st.end()
	st.groups = append(st.groups, g)
	return nil
}

// place makes room for n contiguous bytes at the end of the stage: in the stage's commitlog
// file if they fit with the end-of-file marker, else after publishing the stage and rolling to
// a new file (createErr-classified errors).
func (s *Store) place(n int) error {
	st := &s.stage
	pos := st.end()
	seg, ok := s.cl.fits(pos, n)
	if ok {
		if st.seg == nil {
			st.seg = seg
		}
		return nil
	}
	if err := s.publish(); err != nil {
		return err
	}
	ns, next, err := s.cl.roll(pos)
	if err != nil {
		return err
	}
	st.seg, st.start = ns, next
	return nil
}

// publish writes the stage into its commitlog file, then makes it readable: consume-queue
// units, index entries, the last store time and the commitlog end. A failed write poisons the
// store (ErrIO): what was staged is neither readable nor reported stored.
func (s *Store) publish() error {
	st := &s.stage
	if len(st.buf) > 0 {
		if err := st.seg.write(st.start, st.buf, st.mapSmall); err != nil {
			err = s.fail(fmt.Errorf("commitlog write of %d bytes at %d: %w", len(st.buf), st.start, err))
			st.reset(st.start)
			return err
		}
	}
	for i := range st.units {
		u := &st.units[i]
		if u.q != nil {
			u.q.put(u.qoff, u.unit)
		}
		if s.idx != nil {
			s.idx.add(u.hashes, u.unit.phys, u.ts)
		}
	}
	if n := len(st.units); n > 0 {
		s.lastStoreTS.Store(st.units[n-1].ts)
	}
	for _, g := range st.groups {
		g.stored = true
	}
	end := st.end()
	s.cl.writePos.Store(end)
	st.reset(end)
	s.kickFlushIfDue(end)
	return nil
}

// reset empties the stage at commitlog offset start, keeping its buffers (not the units'
// references into the plans, which belong to finished appends).
func (st *stage) reset(start int64) {
	clear(st.units)
	clear(st.groups)
	st.seg, st.start, st.buf, st.units, st.keys, st.groups = nil, start, st.buf[:0], st.units[:0], 0, st.groups[:0]
	if cap(st.buf) > maxStageKeep {
		st.buf = nil
	}
}

// maxStageKeep bounds the stage buffer kept between appends (a Raft entry is at most a few MiB).
const maxStageKeep = 8 << 20
