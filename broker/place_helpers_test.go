package broker

import (
	"testing"

	"rocketraft/fsm"
	"rocketraft/storage"
	"rocketraft/storage/vfs"
)

// memFSM is a state machine over a store on an in-memory file system (usage: its disk usage,
// nil for the default), closed when the test ends.
func memFSM(t *testing.T, usage *vfs.Usage) *fsm.FSM {
	t.Helper()
	fs := vfs.NewMemFS()
	if usage != nil {
		fs.SetUsage(usage)
	}
	sc := storage.DefaultConfig("/data/store")
	sc.FS = fs
	sc.MappedFileSizeCommitLog = 1 << 20
	f, err := fsm.New(fsm.Config{Store: sc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// raftOf is b's Raft place (the test fails in classic mode).
func raftOf(t *testing.T, b *Broker) *raftPlace {
	t.Helper()
	rp, err := b.place.raft()
	if err != nil {
		t.Fatal(err)
	}
	return rp
}

// localStore is a classic broker's store (held for the broker's lifetime: nothing to release).
func localStore(t *testing.T, b *Broker) *storage.Store {
	t.Helper()
	st, _, err := b.acquireStore()
	if err != nil {
		t.Fatal(err)
	}
	return st
}
