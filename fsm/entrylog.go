package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"rocketraft/message"
	"rocketraft/storage"
)

// EntryLog is the Raft log store whose entries live in the state machine's commitlog
// (Config.EntryLog, dLegerLogStore=commitlog): each entry is written once, as a header record
// (entryheader.go) followed by the entry's records, where the state machine later makes them
// visible without copying them. It keeps, in memory, where each index starts; Open rebuilds that
// from the headers. The FSM owns it and swaps its store on a snapshot restore; Raft's node puts its
// log cache in front.
//
// Truncation: Raft cuts a conflicting uncommitted suffix with DeleteRange(i, last); the store cuts
// its written tail back to entry i. Compaction (DeleteRange from the first index after a
// snapshot) keeps the bytes: the commitlog's retention decides when they go, and FirstIndex is
// the first entry still on disk, so a follower far behind catches up from the log, not a snapshot.
type EntryLog struct {
	log      hclog.Logger
	fileSize int64

	swap  sync.RWMutex // held by SyncLogs (read) and detach (write)
	mu    sync.RWMutex
	store *storage.Store // nil while a restore swaps the store
	first uint64         // index of slots[0]
	slots []entrySlot
}

// entrySlot is where one entry lies in the commitlog and how it is stored (its term and the
// rest are in its header), so that applying it reads nothing back.
type entrySlot struct {
	pos  int64  // the header record
	size uint32 // header record and records
	form uint8  // formOpaque, formMessages or formSchedule
}

// errNoEntryStore: the store is being replaced (snapshot restore) or closed.
var errNoEntryStore = errors.New("fsm: raft log unavailable: the store is being replaced")

func newEntryLog(log hclog.Logger, fileSize int64) *EntryLog {
	return &EntryLog{log: log.Named("entrylog"), fileSize: fileSize}
}

// FirstIndex is the first entry still in the commitlog (0 when the log is empty).
func (e *EntryLog) FirstIndex() (uint64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dropRetained()
	if len(e.slots) == 0 {
		return 0, nil
	}
	return e.first, nil
}

// LastIndex is the last entry written (0 when the log is empty).
func (e *EntryLog) LastIndex() (uint64, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.lastLocked(), nil
}

func (e *EntryLog) lastLocked() uint64 {
	if len(e.slots) == 0 {
		return 0
	}
	return e.first + uint64(len(e.slots)) - 1
}

// dropRetained forgets entries whose file retention removed. Hold mu for writing.
func (e *EntryLog) dropRetained() {
	if e.store == nil {
		return
	}
	min := e.store.CommitLogMinOffset()
	n := 0
	for n < len(e.slots) && e.slots[n].pos < min {
		n++
	}
	if n > 0 {
		e.slots = append(e.slots[:0:0], e.slots[n:]...)
		e.first += uint64(n)
	}
}

// GetLog reads entry index back from the commitlog.
func (e *EntryLog) GetLog(index uint64, out *raft.Log) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.store == nil {
		return errNoEntryStore
	}
	if len(e.slots) == 0 || index < e.first || index > e.lastLocked() {
		return raft.ErrLogNotFound
	}
	s := e.slots[index-e.first]
	if s.pos < e.store.CommitLogMinOffset() {
		return raft.ErrLogNotFound
	}
	b, err := e.store.ReadWritten(s.pos, int(s.size))
	if err != nil {
		return fmt.Errorf("fsm: read raft entry %d at %d: %w", index, s.pos, err)
	}
	h, recs, err := parseEntry(b)
	if err != nil {
		return fmt.Errorf("fsm: raft entry %d at %d: %w", index, s.pos, err)
	}
	if h.Index != index {
		return fmt.Errorf("fsm: raft entry at %d is %d, not %d: %w", s.pos, h.Index, index, errBadEntryHeader)
	}
	data, err := entryData(h, recs)
	if err != nil {
		return fmt.Errorf("fsm: raft entry %d: %w", index, err)
	}
	*out = raft.Log{Index: h.Index, Term: h.Term, Type: h.Type, Data: data, Extensions: h.Extensions}
	if h.AppendedAt != 0 {
		out.AppendedAt = time.Unix(0, h.AppendedAt)
	}
	return nil
}

// headerReadSize is how much of an entry GetLogHeader reads first: a header record of a message
// entry is about 100 bytes plus 4 per send.
const headerReadSize = 1024

// GetLogHeader reads entry index as GetLog does but from its header record alone: Index, Term,
// Type, Extensions and AppendedAt, and Data only where the header holds it (an opaque entry:
// configuration changes, metadata commands). For a message or delivery-step entry Data is left nil
// and omitted is true: rebuilding it means reading and copying every record, CRC and all, which is
// what GetLog does. Raft's start-up scan for configuration entries reads every entry after its
// latest snapshot and looks at their Type only (dledger's start-up log store).
func (e *EntryLog) GetLogHeader(index uint64, out *raft.Log) (omitted bool, err error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.store == nil {
		return false, errNoEntryStore
	}
	if len(e.slots) == 0 || index < e.first || index > e.lastLocked() {
		return false, raft.ErrLogNotFound
	}
	s := e.slots[index-e.first]
	if s.pos < e.store.CommitLogMinOffset() {
		return false, raft.ErrLogNotFound
	}
	b, err := e.store.ReadWritten(s.pos, min(int(s.size), headerReadSize))
	if err == nil && len(b) >= 4 {
		if size := int(binary.BigEndian.Uint32(b)); size > len(b) && size <= int(s.size) {
			b, err = e.store.ReadWritten(s.pos, size)
		}
	}
	if err != nil {
		return false, fmt.Errorf("fsm: read the header of raft entry %d at %d: %w", index, s.pos, err)
	}
	h, _, err := parseHeaderRecord(b)
	if err != nil {
		return false, fmt.Errorf("fsm: raft entry %d at %d: %w", index, s.pos, err)
	}
	if h.Index != index {
		return false, fmt.Errorf("fsm: raft entry at %d is %d, not %d: %w", s.pos, h.Index, index, errBadEntryHeader)
	}
	*out = raft.Log{Index: h.Index, Term: h.Term, Type: h.Type, Extensions: h.Extensions}
	if h.Form == formOpaque {
		out.Data = h.Payload
	} else {
		omitted = true
	}
	if h.AppendedAt != 0 {
		out.AppendedAt = time.Unix(0, h.AppendedAt)
	}
	return omitted, nil
}

// parseEntry splits an entry's bytes into its header and records.
func parseEntry(b []byte) (*entryHeader, [][]byte, error) {
	h, hsize, err := parseHeaderRecord(b)
	if err != nil {
		return nil, nil, err
	}
	rest := b[hsize:]
	if len(rest) != h.RecordsLen {
		return nil, nil, fmt.Errorf("%w: %d bytes of records, header says %d", errBadEntryHeader, len(rest), h.RecordsLen)
	}
	recs, err := splitRecords(rest, h.Records)
	if err != nil {
		return nil, nil, err
	}
	return h, recs, nil
}

// parseHeaderRecord decodes the entry header record b starts with and returns its size.
func parseHeaderRecord(b []byte) (*entryHeader, int, error) {
	v, err := message.ParseView(b)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: header record: %w", errBadEntryHeader, err)
	}
	if string(v.Topic()) != message.RaftEntryTopic {
		return nil, 0, fmt.Errorf("%w: a record of topic %q where an entry header belongs", errBadEntryHeader, v.Topic())
	}
	h, err := decodeEntryHeader(v.Body())
	if err != nil {
		return nil, 0, err
	}
	return h, v.Size(), nil
}

// StoreLog stores one entry.
func (e *EntryLog) StoreLog(l *raft.Log) error { return e.StoreLogs([]*raft.Log{l}) }

// StoreLogs writes the entries into the commitlog and syncs them before returning.
func (e *EntryLog) StoreLogs(logs []*raft.Log) error {
	if err := e.StoreLogsUnsynced(logs); err != nil {
		return err
	}
	if err := e.SyncLogs(); err != nil {
		return fmt.Errorf("fsm: sync raft entries %d-%d: %w", logs[0].Index, logs[len(logs)-1].Index, err)
	}
	return nil
}

// StoreLogsUnsynced writes the entries as StoreLogs does and leaves them unsynced: the leader's
// node writes its own copy so and syncs it (SyncLogs) while the followers write theirs
// (dledger/leaderwrite.go), never acknowledging an entry before its copy is durable.
func (e *EntryLog) StoreLogsUnsynced(logs []*raft.Log) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.store == nil {
		return errNoEntryStore
	}
	for _, l := range logs {
		if err := e.storeLocked(l); err != nil {
			return err
		}
	}
	return nil
}

// SyncLogs makes every entry written so far durable. It runs beside writes (the leader's next
// batch goes on while this one is synced) but not beside a store swap: a store a restore
// replaced has nothing left worth syncing.
func (e *EntryLog) SyncLogs() error { return e.syncLogs((*storage.Store).SyncWritten) }

// SyncLogsBlocking is SyncLogs with the fdatasync on the calling thread
// (storage.Store.SyncWrittenBlocking), for a caller that only waits for it and whose process has
// nothing else to run meanwhile (a follower with nothing left to apply: dledger's
// storeFollowing). Through the process's io_uring (SyncLogs) the waiting goroutine leaves its
// processor to others; with nothing else to run, the ring's two wake-ups (its kernel worker, then
// the goroutine through the network poller) only lengthen the wait.
func (e *EntryLog) SyncLogsBlocking() error {
	return e.syncLogs((*storage.Store).SyncWrittenBlocking)
}

func (e *EntryLog) syncLogs(sync func(*storage.Store) error) error {
	e.swap.RLock()
	defer e.swap.RUnlock()
	e.mu.RLock()
	st := e.store
	e.mu.RUnlock()
	if st == nil {
		return nil
	}
	return sync(st)
}

func (e *EntryLog) storeLocked(l *raft.Log) error {
	last := e.lastLocked()
	switch {
	case len(e.slots) == 0:
		e.first = l.Index
	case l.Index == last+1:
	case l.Index > last+1:
		// After a snapshot install the log resumes past entries this store never held.
		e.log.Info("raft log resumes after a gap", "last", last, "next", l.Index)
		e.slots, e.first = e.slots[:0], l.Index
	default:
		return fmt.Errorf("fsm: store raft entry %d: the log ends at %d (Raft deletes a suffix before rewriting it)", l.Index, last)
	}
	p := splitEntry(l)
	pos, end, err := e.write(&p)
	if err != nil && p.hdr.Form != formOpaque && errors.Is(err, storage.ErrMessageIllegal) {
		// Records the store refuses (every replica refuses them alike): keep the entry whole
		// in its header; the state machine refuses its appends when it applies it.
		e.log.Warn("raft entry's records refused by the store; keeping the entry whole in its header", "index", l.Index, "error", err)
		p = entryParts{hdr: p.hdr}
		p.hdr.Form, p.hdr.Records, p.hdr.RecordsLen, p.hdr.RecordsCRC, p.hdr.Payload = formOpaque, 0, 0, 0, l.Data
		pos, end, err = e.write(&p)
	}
	if err != nil {
		return fmt.Errorf("fsm: store raft entry %d: %w", l.Index, err)
	}
	e.slots = append(e.slots, entrySlot{pos: pos, size: uint32(end - pos), form: p.hdr.Form})
	return nil
}

func (e *EntryLog) write(p *entryParts) (pos, end int64, err error) {
	hdr, err := headerRecord(&p.hdr)
	if err != nil {
		return 0, 0, fmt.Errorf("encode header: %w: %w", storage.ErrMessageIllegal, err)
	}
	recs := make([][]byte, 0, 1+len(p.recs))
	recs = append(recs, hdr)
	recs = append(recs, p.recs...)
	return e.store.WriteEntry(recs)
}

// DeleteRange removes entries min..max. A range that starts past the state machine's applied
// bytes is a conflicting suffix: the commitlog is cut back to entry min. A range that starts at
// or below them is compaction after a snapshot, which the commitlog's retention does instead.
func (e *EntryLog) DeleteRange(min, max uint64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.store == nil {
		return errNoEntryStore
	}
	last := e.lastLocked()
	if len(e.slots) == 0 || max < e.first || min > last {
		return nil
	}
	if min < e.first || max < last {
		return nil // compaction
	}
	s := e.slots[min-e.first]
	if s.pos < e.store.CommitLogMaxOffset() {
		return nil // compaction of applied entries
	}
	// Cut where the previous entry ended, not where entry min starts: if min started a new
	// file, the next entry may fit the old one, as it does on a replica that never held min.
	at := s.pos
	if min > e.first {
		p := e.slots[min-e.first-1]
		at = p.pos + int64(p.size)
	}
	if err := e.store.TruncateWritten(at); err != nil {
		return fmt.Errorf("fsm: cut raft log back to entry %d at %d: %w", min, at, err)
	}
	e.log.Info("raft log suffix cut", "from", min, "to", last, "at", at)
	e.slots = e.slots[:min-e.first]
	return nil
}

// messageCounts is entrySpan for an entry to apply, with, when it is stored as a message entry
// (formMessages), the record count of each of its appends, read from its header record. The apply
// dispatches such an entry from these counts instead of decoding its Data again: splitEntry
// decoded that Data, its checksum included, when the entry was stored, and what is dispatched
// are the records in the commitlog. counts is nil for the other forms.
func (e *EntryLog) messageCounts(index uint64) (end int64, form uint8, counts []int, err error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	s, err := e.slotLocked(index)
	if err != nil {
		return 0, 0, nil, err
	}
	end, form = s.pos+int64(s.size), s.form
	if form != formMessages {
		return end, form, nil, nil
	}
	h, err := e.readHeaderLocked(s)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("fsm: raft entry %d at %d: %w", index, s.pos, err)
	}
	if h.Index != index || h.Form != formMessages {
		return 0, 0, nil, fmt.Errorf("fsm: raft entry at %d is %d of form %d, not %d of form %d: %w", s.pos, h.Index, h.Form, index, formMessages, errBadEntryHeader)
	}
	if counts, err = messageCountsOf(h); err != nil {
		return 0, 0, nil, fmt.Errorf("fsm: raft entry %d: %w", index, err)
	}
	return end, form, counts, nil
}

// readHeaderLocked reads and decodes the header record of slot s. Hold e.mu.
func (e *EntryLog) readHeaderLocked(s entrySlot) (*entryHeader, error) {
	head, err := e.store.ReadWritten(s.pos, int(min(int64(s.size), 512)))
	if err != nil {
		return nil, err
	}
	if len(head) < 4 {
		return nil, fmt.Errorf("%w: %d bytes", errBadEntryHeader, len(head))
	}
	hsize := int(int32(binary.BigEndian.Uint32(head)))
	if hsize < message.MinRecordSize || hsize > int(s.size) {
		return nil, fmt.Errorf("%w: header record of %d bytes in an entry of %d", errBadEntryHeader, hsize, s.size)
	}
	if hsize > len(head) {
		if head, err = e.store.ReadWritten(s.pos, hsize); err != nil {
			return nil, err
		}
	}
	h, _, err := parseHeaderRecord(head[:hsize])
	return h, err
}

// messageCountsOf reads a message entry header's payload: the number of appends, then each
// append's record count, which must add up to the header's records.
func messageCountsOf(h *entryHeader) ([]int, error) {
	p := h.Payload
	if len(p) < 4 {
		return nil, fmt.Errorf("%w: message payload of %d bytes", errBadEntryHeader, len(p))
	}
	n := int(binary.BigEndian.Uint32(p))
	if n < 0 || len(p) != 4+4*n {
		return nil, fmt.Errorf("%w: message payload of %d bytes for %d appends", errBadEntryHeader, len(p), n)
	}
	counts := make([]int, n)
	total := 0
	for i := range counts {
		counts[i] = int(binary.BigEndian.Uint32(p[4+4*i:]))
		total += counts[i]
	}
	if total != h.Records {
		return nil, fmt.Errorf("%w: appends of %d records in all, the header says %d", errBadEntryHeader, total, h.Records)
	}
	return counts, nil
}

// entrySpan is where entry index ends in the commitlog and how it is stored.
func (e *EntryLog) entrySpan(index uint64) (int64, uint8, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	s, err := e.slotLocked(index)
	if err != nil {
		return 0, 0, err
	}
	return s.pos + int64(s.size), s.form, nil
}

// slotLocked is where entry index lies, for the apply (an entry it applies must be stored). Hold
// e.mu.
func (e *EntryLog) slotLocked(index uint64) (entrySlot, error) {
	if e.store == nil {
		return entrySlot{}, errNoEntryStore
	}
	if len(e.slots) == 0 || index < e.first || index > e.lastLocked() {
		return entrySlot{}, fmt.Errorf("fsm: raft entry %d is not in the commitlog (it holds %d-%d)", index, e.first, e.lastLocked())
	}
	return e.slots[index-e.first], nil
}

// detach takes the store away for a restore; attach gives the new one back and rebuilds.
func (e *EntryLog) detach() {
	e.swap.Lock()
	e.mu.Lock()
	e.store, e.slots, e.first = nil, nil, 0
	e.mu.Unlock()
	e.swap.Unlock()
}

// attach scans the commitlog's entry headers from its first byte to the written end and
// rebuilds the index -> position map. Entries past the applied bytes are checked in full (their
// records' checksum); the first that is torn or does not follow its predecessor ends the log, and
// the commitlog is cut there.
func (e *EntryLog) attach(st *storage.Store) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.store, e.slots, e.first = st, nil, 0
	start := time.Now()
	pos, end, applied := st.CommitLogMinOffset(), st.WrittenEnd(), st.CommitLogMaxOffset()
	kept := pos // the end of the last whole entry: a cut goes there (see DeleteRange)
	cut := func(_ int64, why error) error {
		at := kept
		if at < applied {
			return fmt.Errorf("fsm: the commitlog's raft entries are damaged at %d, below the applied end %d: %w", at, applied, why)
		}
		e.log.Warn("raft log ends at a torn or foreign entry; cutting it", "at", at, "writtenEnd", end, "reason", why)
		if err := st.TruncateWritten(at); err != nil {
			return fmt.Errorf("fsm: cut the torn raft log tail at %d: %w", at, err)
		}
		return nil
	}
	for pos < end {
		head, err := st.ReadWritten(pos, int(min(end-pos, 512, e.fileSize-pos%e.fileSize)))
		if err != nil {
			return fmt.Errorf("fsm: scan raft entries at %d: %w", pos, err)
		}
		if len(head) >= 8 && binary.BigEndian.Uint32(head[4:]) == message.BlankMagicCode {
			pos = pos - pos%e.fileSize + e.fileSize
			continue
		}
		if len(head) < 8 {
			return cut(pos, fmt.Errorf("%d bytes left", len(head)))
		}
		hsize := int64(int32(binary.BigEndian.Uint32(head)))
		if hsize < message.MinRecordSize || pos+hsize > end {
			return cut(pos, fmt.Errorf("header record size %d", hsize))
		}
		if hsize > int64(len(head)) {
			if head, err = st.ReadWritten(pos, int(hsize)); err != nil {
				return fmt.Errorf("fsm: scan raft entries at %d: %w", pos, err)
			}
		}
		h, _, err := parseHeaderRecord(head[:hsize])
		if err != nil {
			return cut(pos, err)
		}
		size := hsize + int64(h.RecordsLen)
		if pos+size > end {
			return cut(pos, fmt.Errorf("entry %d's records end at %d, past the written end", h.Index, pos+size))
		}
		if pos >= applied && h.Records > 0 {
			b, err := st.ReadWritten(pos+hsize, h.RecordsLen)
			if err != nil {
				return fmt.Errorf("fsm: scan raft entry %d: %w", h.Index, err)
			}
			recs, err := splitRecords(b, h.Records)
			if err == nil && recordsCRC(recs) != h.RecordsCRC {
				err = fmt.Errorf("entry %d's records do not match their checksum", h.Index)
			}
			if err != nil {
				return cut(pos, err)
			}
		}
		if last := e.lastLocked(); len(e.slots) > 0 && h.Index != last+1 {
			if h.Index <= last {
				return cut(pos, fmt.Errorf("entry %d follows entry %d", h.Index, last))
			}
			e.slots = e.slots[:0] // the log resumed after a snapshot install (storeLocked)
		}
		if len(e.slots) == 0 {
			e.first = h.Index
		}
		e.slots = append(e.slots, entrySlot{pos: pos, size: uint32(size), form: h.Form})
		pos += size
		kept = pos
	}
	e.log.Info("raft log read from the commitlog", "first", e.first, "last", e.lastLocked(), "entries", len(e.slots),
		"bytes", end-st.CommitLogMinOffset(), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// Close does nothing: the FSM owns the store.
func (e *EntryLog) Close() error { return nil }
