package dledger

import (
	"fmt"
	"io"

	"github.com/hashicorp/raft"
)

// SnapshotExpander is a state machine whose snapshots, as persisted, name data it keeps itself
// instead of holding it (fsm.FSM: the store's append-only files). ExpandSnapshot turns such a
// snapshot into the self-contained stream its Restore reads, and passes any other through; it
// takes rc over and returns the stream's exact size.
type SnapshotExpander interface {
	ExpandSnapshot(rc io.ReadCloser, size int64) (io.ReadCloser, int64, error)
}

// expandingSnapshots is the node's snapshot store: snapshots are stored as the state machine
// persists them, and every Open (a restore at start, an InstallSnapshot to a follower) gets the
// expanded stream, with its size in the metadata, which Raft announces to the follower.
type expandingSnapshots struct {
	raft.SnapshotStore
	fsm SnapshotExpander
}

// Open opens the stored snapshot and expands it.
func (s expandingSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.SnapshotStore.Open(id)
	if err != nil {
		return nil, nil, err
	}
	out, size, err := s.fsm.ExpandSnapshot(rc, meta.Size)
	if err != nil {
		return nil, nil, fmt.Errorf("dledger: snapshot %s: %w", id, err)
	}
	m := *meta
	m.Size = size
	return &m, out, nil
}
