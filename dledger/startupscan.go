package dledger

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// Raft's start-up scan, read from entry headers.
//
// NewRaft (hashicorp/raft) reads the last entry, restores the latest snapshot, then reads every
// entry after that snapshot, one GetLog each and in order up to the last entry, looking for
// configuration changes; it starts Raft's goroutines only after that. On the commitlog store a
// GetLog rebuilds the entry's Data from its stored records (the records copied, an envelope
// allocated, copied into and CRC'd), so that scan cost a restarted node about a second per
// 1.4 GB written since the latest snapshot (a follower restarted by scripts/figures.sh, 5,592
// entries: 1.16 s of its 1.3-1.6 s to serving), and more the longer since the last snapshot
// (up to SnapshotInterval's worth of writes). The scan only looks at an entry's Type (and a
// configuration entry's Data, which the header holds), so while it runs the store answers from
// entry headers (fsm.EntryLog.GetLogHeader).
//
// The header-only answers must reach nothing else: a Raft goroutine replicating or applying an
// entry needs its Data. startupLogs recognizes the scan by its exact shape and stops answering
// from headers for good at the first read that does not fit it: the first read is the last entry
// (lastIndex, as LastIndex said before NewRaft), then ascending reads ending with the last entry
// again. It is armed only when a scan will run (some entry after the newest snapshot): with none,
// NewRaft reads the last entry once and nothing would end the mode.

// headerLogReader reads an entry from its header alone (fsm.EntryLog.GetLogHeader): Data is left
// nil, and omitted true, where rebuilding it would mean reading the entry's records.
type headerLogReader interface {
	GetLogHeader(index uint64, out *raft.Log) (omitted bool, err error)
}

// Start-up scan states.
const (
	scanOff       = iota // every read is whole
	scanFirst            // waiting for NewRaft's read of the last entry
	scanAscending        // in the scan: the next read is prev+1 (or any index, for the first)
)

// startupLogs is the log store handed to NewRaft: storeGuard, with the start-up scan answered
// from entry headers.
type startupLogs struct {
	storeGuard
	headers headerLogReader
	last    uint64
	// armed is false once reads are whole for good: every GetLog after the scan (a leader
	// reading entries its cache no longer holds) checks it without taking mu.
	armed atomic.Bool

	mu    sync.Mutex
	state int
	prev  uint64 // the scan's last read (0: none yet)
}

// newStartupLogs arms the header-only scan when headers is set and an entry follows the newest
// snapshot (newestSnap: its index, 0 without one).
func newStartupLogs(g storeGuard, headers headerLogReader, newestSnap uint64) (*startupLogs, error) {
	s := &startupLogs{storeGuard: g, headers: headers}
	if headers == nil {
		return s, nil
	}
	last, err := g.LastIndex()
	if err != nil {
		return nil, err
	}
	if last > 0 && newestSnap < last {
		s.last, s.state = last, scanFirst
		s.armed.Store(true)
	}
	return s, nil
}

// GetLog implements raft.LogStore: from the entry's header while NewRaft's scan runs, whole
// otherwise.
func (s *startupLogs) GetLog(index uint64, out *raft.Log) error {
	if !s.armed.Load() || !s.headerOnly(index) {
		return s.storeGuard.GetLog(index, out)
	}
	_, err := s.headers.GetLogHeader(index, out)
	return err
}

// headerOnly advances the scan's state for a read of index and reports whether it is part of
// the scan.
func (s *startupLogs) headerOnly(index uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case scanFirst:
		if index != s.last {
			s.offLocked()
			return false
		}
		s.state = scanAscending
		return true
	case scanAscending:
		if index > s.last || (s.prev != 0 && index != s.prev+1) {
			s.offLocked()
			return false
		}
		s.prev = index
		if index == s.last {
			s.offLocked() // the scan's last read
		}
		return true
	}
	return false
}

// offLocked makes every later read whole. Hold mu.
func (s *startupLogs) offLocked() {
	s.state = scanOff
	s.armed.Store(false)
}

// stop ends header-only reads: Open calls it once NewRaft has returned, which the scan's own end
// has already done unless NewRaft read the log in some other shape than the one expected (a
// Raft version that scans differently: TestStartupLogsRaftAppliesWholeEntries fails then).
func (s *startupLogs) stop() {
	s.mu.Lock()
	s.offLocked()
	s.mu.Unlock()
}

// scanning reports whether reads are still answered from headers (tests).
func (s *startupLogs) scanning() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state != scanOff
}
