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
)
