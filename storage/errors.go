package storage

import "errors"

// Sentinel errors, checked with errors.Is. The broker maps them to RocketMQ response codes.
var (
	// ErrMessageIllegal: a record is malformed or too big (MESSAGE_ILLEGAL).
	ErrMessageIllegal = errors.New("message illegal")
	// ErrDiskFull: disk usage is over diskMaxUsedSpaceRatio even after cleaning; writes are
	// refused, nothing is corrupted (SERVICE_NOT_AVAILABLE).
	ErrDiskFull = errors.New("disk full")
	// ErrStoreClosed: the store has been closed.
	ErrStoreClosed = errors.New("store closed")
	// ErrFlushDiskTimeout: the records were appended but not synced within syncFlushTimeout
	// (FLUSH_DISK_TIMEOUT); the results are returned with it.
	ErrFlushDiskTimeout = errors.New("flush disk timeout")
	// ErrIO: a write or sync failed. The store refuses every later write, since it can no
	// longer tell what reached the disk; reads keep working. Reopen to recover.
	ErrIO = errors.New("storage I/O error")
	// ErrOffsetMismatch: AppendRaw was given an offset other than the commitlog end.
	ErrOffsetMismatch = errors.New("commitlog offset mismatch")
	// ErrTruncateBeyondEnd: Open was asked (Config.Truncate) to truncate the commitlog to an
	// offset past the end of its valid data: bytes the caller counts on were lost.
	ErrTruncateBeyondEnd = errors.New("commitlog ends before the truncation point")
	// ErrTruncateInvalid: Config.TruncateTo is not a record boundary within the commitlog.
	ErrTruncateInvalid = errors.New("invalid commitlog truncation point")
	// ErrEntryLog: an append other than WriteEntry on a store whose commitlog is the Raft log
	// (Config.EntryLog), or an entry-log call on a store that is not.
	ErrEntryLog = errors.New("commitlog is the raft log")
	// ErrQueueOffsetStale: DispatchWritten found a record whose QUEUEOFFSET is not the next
	// offset of its queue (the leader assigned it from counters that had moved on: a topic was
	// deleted, a delivery step refused, an entry lost on the way into Raft's log). The group's
	// records stay in the commitlog, never dispatched; the sender is told to retry.
	ErrQueueOffsetStale = errors.New("queue offset stale")
)
