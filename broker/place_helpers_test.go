package broker

import (
	"testing"

	"rocketraft/storage"
)

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
