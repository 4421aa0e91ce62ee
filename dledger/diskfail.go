package dledger

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// Disk failures of the Raft storage. hashicorp/raft treats a failed write in several ways: a
// leader whose StoreLogs fails steps down and goes on, a follower answers the AppendEntries with
// a failure and is retried for ever, a failed term write panics. None of them is safe after a
// failed fsync: Linux reports a writeback error once and may mark the pages clean, so a later
// write or fsync that succeeds says nothing about the data before it. The wrappers here report
// every failed write through Config.OnDiskFailure before Raft sees it, so the node can leave
// service at once (the broker exits and a restart re-reads the files, see broker/diskfail.go).

// failReporter reports a failed write once per call; nil does nothing.
type failReporter func(op string, err error)

func (r failReporter) check(op string, err error) error {
	if err != nil && r != nil {
		r(op, err)
	}
	return err
}

// reportingLogStore reports the log store's failed writes.
type reportingLogStore struct {
	raft.LogStore
	report failReporter
}

func (s reportingLogStore) StoreLog(l *raft.Log) error {
	return s.report.check(fmt.Sprintf("raft log write of entry %d", l.Index), s.LogStore.StoreLog(l))
}

func (s reportingLogStore) StoreLogs(logs []*raft.Log) error {
	err := s.LogStore.StoreLogs(logs)
	if err != nil && len(logs) > 0 {
		return s.report.check(fmt.Sprintf("raft log write of entries %d-%d", logs[0].Index, logs[len(logs)-1].Index), err)
	}
	return err
}

func (s reportingLogStore) DeleteRange(min, max uint64) error {
	return s.report.check(fmt.Sprintf("raft log deletion of entries %d-%d", min, max), s.LogStore.DeleteRange(min, max))
}

// IsMonotonic passes on the store's answer (see logCache.IsMonotonic).
func (s reportingLogStore) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// reportingStable reports the stable store's failed writes (current term, vote).
type reportingStable struct {
	raft.StableStore
	report failReporter
}

func (s reportingStable) Set(key, val []byte) error {
	return s.report.check(fmt.Sprintf("raft stable store write of %q", key), s.StableStore.Set(key, val))
}

func (s reportingStable) SetUint64(key []byte, val uint64) error {
	return s.report.check(fmt.Sprintf("raft stable store write of %q", key), s.StableStore.SetUint64(key, val))
}
