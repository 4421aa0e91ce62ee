package storage

// The commitlog as the Raft log (Config.EntryLog). The Raft log store (fsm's entry log) writes
// each entry's records, a header record of topic message.RaftEntryTopic first, at the written
// end as the entry reaches the log, fsyncs them, and reads them back for Raft; the state machine
// makes them visible once the entry is applied. Readers (pulls, lookups, the HA server, snapshot
// manifests, retention) are bounded by the dispatched end, CommitLogMaxOffset, so bytes a new
// leader may still cut are never served.

// DispatchGroup is one append of an applied entry, in DispatchWritten's walk order: how many of
// the entry's records (header records not counted) belong to it and whether the state machine
// refused it as a whole (Skip: a stale delay-delivery step), in which case none is dispatched.
type DispatchGroup struct {
	Records int
	Skip    bool
}

// WrittenEnd is the end of what WriteEntry wrote (>= CommitLogMaxOffset).
func (s *Store) WrittenEnd() int64 { panic("storage: WrittenEnd not implemented") }

// WriteEntry writes recs contiguously at the written end and returns where the first starts and
// the written end after the last. When they do not fit the current commitlog file with room for
// the end-of-file marker, the file is ended with the blank marker and they start the next file,
// exactly as Append would roll, so every replica writing the same entries lays out the same
// bytes. Each record's PHYSICALOFFSET is set to where it lands (in the written copy; recs are not
// modified); every other byte is written as given. Nothing is dispatched and nothing is synced.
// Every record must parse (message.ParseView) with a non-zero STORETIMESTAMP, the whole entry
// must fit in one file (else ErrMessageIllegal, nothing written). A failed write poisons the store
// (ErrIO). Refused unless Config.EntryLog (ErrEntryLog).
func (s *Store) WriteEntry(recs [][]byte) (pos, end int64, err error) {
	panic("storage: WriteEntry not implemented")
}

// SyncWritten makes every byte WriteEntry wrote durable (the range not yet synced, fdatasync of
// the mapped files). A failure poisons the store (ErrIO).
func (s *Store) SyncWritten() error { panic("storage: SyncWritten not implemented") }

// ReadWritten returns a copy of the n written bytes at pos (pos+n <= WrittenEnd, within one
// file), whether dispatched or not.
func (s *Store) ReadWritten(pos int64, n int) ([]byte, error) {
	panic("storage: ReadWritten not implemented")
}

// TruncateWritten cuts what was written back to pos, a record boundary (or the blank marker's
// position) at or after the dispatched end: the bytes after it are zeroed and files wholly past
// it removed, and the next WriteEntry starts there. pos below the dispatched end is
// ErrTruncateInvalid (applied entries are never cut).
func (s *Store) TruncateWritten(pos int64) error { panic("storage: TruncateWritten not implemented") }

// DispatchWritten makes the written bytes up to end visible, as Append would have: it walks the
// records from the dispatched end to end (crossing blank markers), skips header records
// (message.RaftEntryTopic), and splits the others, in order, among groups (their Records must add
// up to exactly that count, else an error and nothing changes). A group not Skip whose
// dispatchable records each carry the QUEUEOFFSET its queue expects next is dispatched (consume
// queue units, index entries, OnDispatch), its outcome's Results filled as Append's; a group with
// one record that does not gets ErrQueueOffsetStale and nothing of it is dispatched; a Skip group
// gets neither. Then the dispatched end is end. end must be a record boundary <= WrittenEnd.
// Failures to create a consume-queue or index file poison the store (ErrIO) like Append's.
func (s *Store) DispatchWritten(end int64, groups []DispatchGroup) ([]BatchOutcome, error) {
	panic("storage: DispatchWritten not implemented")
}
