package fsm

import (
	"sync"

	"rocketraft/storage"
)

// LeaderScans carries, on the leader only, what the send path already read of the properties of
// the records it proposes (storage.Scanned) to this node's own apply of the same entry, so a
// plain send's properties are read once on the leader instead of twice (broker/sendplan.go,
// then storage's prepare). Nothing of it travels in the entry: the replicated format, what
// replicas apply and what a replay applies are unchanged, and any apply that finds nothing here
// reads the records as before.
//
// An entry is identified by its encoded bytes themselves: hashicorp/raft hands the leader's
// state machine the very Data slice given to raft.Apply (its in-flight log futures), while an
// entry read back from the log store or received from a leader is a fresh slice. The table is
// keyed by the address of that slice's first byte, and also checks its length; holding the
// slice keeps the address from being reused while it is in the table. A lookup that succeeds
// therefore names exactly the bytes the reads were taken with, and each read is still checked
// against its record by the store (storage.Scanned), so a hit can only save a scan, and a miss
// only costs one.
//
// Lifetime: the proposer Puts an entry's reads before raft.Apply and Drops them once the entry
// has an outcome (committed and applied here, or failed: lost leadership, shutdown, a timeout);
// the apply takes them out when it uses them. Every Put is followed by a Drop, so the table holds
// at most the entries in flight (broker/raftgroup.go's batcher bounds them) and is empty when
// nothing is.
type LeaderScans struct {
	mu sync.Mutex
	m  map[*byte]entryScans
}

// entryScans is one proposed entry's reads: the entry's bytes and, per append, per record.
type entryScans struct {
	data  []byte
	scans [][]storage.Scanned
}

// NewLeaderScans returns an empty table.
func NewLeaderScans() *LeaderScans {
	return &LeaderScans{m: make(map[*byte]entryScans)}
}

// Put records scans (per append of the entry, per record; see
// storage.Store.AppendReplicatedBatchScanned) for the entry encoded as data, which the caller
// is about to propose and must not change.
func (t *LeaderScans) Put(data []byte, scans [][]storage.Scanned) {
	if len(data) == 0 {
		return
	}
	t.mu.Lock()
	t.m[&data[0]] = entryScans{data: data, scans: scans}
	t.mu.Unlock()
}

// Drop forgets data's reads, if still there; data may be nil (nothing was Put).
func (t *LeaderScans) Drop(data []byte) {
	if len(data) == 0 {
		return
	}
	t.mu.Lock()
	if e, ok := t.m[&data[0]]; ok && len(e.data) == len(data) {
		delete(t.m, &data[0])
	}
	t.mu.Unlock()
}

// Len is how many entries' reads the table holds.
func (t *LeaderScans) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// take removes and returns the reads Put for exactly data (the same slice), shaped like the
// entry's appends (counts: each append's records): one list per append, each nil or one Scanned
// per record. Otherwise, or on a nil table, it returns nil.
func (t *LeaderScans) take(data []byte, counts []int) [][]storage.Scanned {
	if t == nil || len(data) == 0 {
		return nil
	}
	t.mu.Lock()
	e, ok := t.m[&data[0]]
	if ok && len(e.data) == len(data) {
		delete(t.m, &data[0])
	}
	t.mu.Unlock()
	if !ok || len(e.data) != len(data) || len(e.scans) != len(counts) {
		return nil
	}
	for i, sc := range e.scans {
		if sc != nil && len(sc) != counts[i] {
			return nil
		}
	}
	return e.scans
}
