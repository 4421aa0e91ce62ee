package dledger

import (
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// logCacheMinEntries is how many of the newest entries logCache keeps whatever their size: a
// full replication pipeline (the batcher's in-flight entries, the one a follower is about to be
// told is committed) must not fall through to the log store even when every entry is as large as
// the batcher allows.
const logCacheMinEntries = 8

// logEntryOverhead approximates what a cached raft.Log costs beyond its Data and Extensions.
const logEntryOverhead = 96

// logCache keeps the newest Raft log entries in memory in front of the log store, so the leader's
// replicators and a follower's apply read them without decoding from disk. It does the job of
// raft.LogCache, which is bounded by entry count only: with group-committed entries of up to
// dLegerBatchMaxBytes its 512 entries held hundreds of MiB, and that live heap (the broker runs
// GOGC=400, so the heap grows to five times it) cost more CPU in page faults and cache misses than
// the cache saved. Measured on the 2-core machine (scripts/cpubench.sh R3, 2026-11-30): 512 entries
// -> 48 entries took batch sends from ~21,000 to 37,000-41,000 msg/s and single sends from 79-100
// to 61-79 us of CPU per message. So this one is bounded by bytes as well.
//
// The cached entries are always one contiguous range of indexes [first, last]; a store that is
// not contiguous with it (which Raft does not do) restarts the range.
type logCache struct {
	store      raft.LogStore
	maxEntries int
	maxBytes   int

	mu    sync.RWMutex
	ring  []*raft.Log // entry i at ring[i%len(ring)] while first <= i <= last
	first uint64      // 0: empty
	last  uint64
	bytes int
	batch int // entries in the last StoreLogs, kept whatever their size
}

// newLogCache wraps store with a cache of at most maxEntries entries and, beyond the newest
// logCacheMinEntries, at most maxBytes bytes.
func newLogCache(store raft.LogStore, maxEntries, maxBytes int) (*logCache, error) {
	if maxEntries <= 0 || maxBytes <= 0 {
		return nil, fmt.Errorf("dledger: log cache needs positive bounds, got %d entries, %d bytes", maxEntries, maxBytes)
	}
	return &logCache{store: store, maxEntries: maxEntries, maxBytes: maxBytes, ring: make([]*raft.Log, maxEntries)}, nil
}

func logSize(l *raft.Log) int { return len(l.Data) + len(l.Extensions) + logEntryOverhead }

// IsMonotonic passes on the store's answer (raft.MonotonicLogStore): Raft changes how it clears
// the log after a snapshot restore for stores that cannot have gaps, such as raft-wal.
func (c *logCache) IsMonotonic() bool {
	m, ok := c.store.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// GetLog answers from the cache when it holds idx, else from the store. Like raft.LogCache it
// hands out a shallow copy: Data is shared, and Raft never modifies it.
func (c *logCache) GetLog(idx uint64, log *raft.Log) error {
	c.mu.RLock()
	if c.first != 0 && idx >= c.first && idx <= c.last {
		*log = *c.ring[idx%uint64(len(c.ring))]
		c.mu.RUnlock()
		return nil
	}
	c.mu.RUnlock()
	return c.store.GetLog(idx, log)
}

// StoreLog stores one entry.
func (c *logCache) StoreLog(log *raft.Log) error { return c.StoreLogs([]*raft.Log{log}) }

// StoreLogs stores the entries, then caches them (only once the store has them). The whole batch
// stays cached whatever its size, until the next one: a follower applies what an AppendEntries
// brought right after storing it (hashicorp/raft's appendEntries), and those entries are alive
// anyway until the state machine has them. Trimmed to the byte bound, a catching-up follower read
// 56 of every 64 entries back from its log store to apply them (with the commitlog store, two
// copies of each, 14 % of its CPU: pprof, 2026-12-02).
func (c *logCache) StoreLogs(logs []*raft.Log) error {
	if err := c.store.StoreLogs(logs); err != nil {
		return fmt.Errorf("dledger: store %d log entries: %w", len(logs), err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range logs {
		if c.first != 0 && l.Index != c.last+1 {
			c.clearLocked()
		}
		if c.first != 0 && int(l.Index-c.first) >= len(c.ring) {
			c.dropLocked(c.first)
		}
		c.ring[l.Index%uint64(len(c.ring))] = l
		c.bytes += logSize(l)
		c.last = l.Index
		if c.first == 0 {
			c.first = l.Index
		}
	}
	c.batch = len(logs)
	keep := uint64(max(logCacheMinEntries, c.batch))
	for c.bytes > c.maxBytes && c.last-c.first+1 > keep {
		c.dropLocked(c.first)
	}
	return nil
}

// FirstIndex is the store's.
func (c *logCache) FirstIndex() (uint64, error) { return c.store.FirstIndex() }

// LastIndex is the store's.
func (c *logCache) LastIndex() (uint64, error) { return c.store.LastIndex() }

// DeleteRange drops [min, max] from the cache, then from the store. Raft deletes a prefix after
// a snapshot and a suffix when a new leader's log conflicts with this one; the cached entries
// outside the range stay.
func (c *logCache) DeleteRange(min, max uint64) error {
	c.mu.Lock()
	switch {
	case c.first == 0 || max < c.first || min > c.last:
	case min <= c.first && max >= c.last:
		c.clearLocked()
	case min <= c.first:
		for c.first <= max {
			c.dropLocked(c.first)
		}
	case max >= c.last:
		for c.last >= min {
			c.dropLocked(c.last)
		}
	default: // a hole in the middle: Raft never asks for one, so simply forget everything
		c.clearLocked()
	}
	c.mu.Unlock()
	return c.store.DeleteRange(min, max)
}

// dropLocked forgets the cached entry idx, which is the first or the last one.
func (c *logCache) dropLocked(idx uint64) {
	slot := idx % uint64(len(c.ring))
	c.bytes -= logSize(c.ring[slot])
	c.ring[slot] = nil
	switch {
	case c.first == c.last:
		c.first, c.last, c.bytes = 0, 0, 0
	case idx == c.first:
		c.first++
	default:
		c.last--
	}
}

// clearLocked drops every cached entry.
func (c *logCache) clearLocked() {
	for c.first != 0 {
		c.dropLocked(c.first)
	}
}

// cached reports the cached range and its size in bytes (first is 0 when empty), for tests and
// status.
func (c *logCache) cached() (first, last uint64, bytes int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.first, c.last, c.bytes
}
