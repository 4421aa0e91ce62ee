// Package storetest opens small stores in temporary directories for the broker's subsystem
// tests, so they exercise real reads and appends without a broker or a process.
package storetest

import (
	"context"
	"net/netip"
	"testing"

	"rocketraft/message"
	"rocketraft/storage"
)

// Host is the store host the helpers stamp on records.
var Host = netip.MustParseAddrPort("127.0.0.1:10911")

// Open opens a store with 1 MiB commitlog files under a temporary directory; it is closed when
// the test ends.
func Open(t testing.TB) *storage.Store {
	t.Helper()
	cfg := storage.DefaultConfig(t.TempDir())
	cfg.MappedFileSizeCommitLog = 1 << 20
	cfg.MappedFileSizeConsumeQueue = 1000 * storage.ConsumeQueueUnitSize
	cfg.MaxHashSlotNum, cfg.MaxIndexNum = 100, 400
	st, err := storage.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// Acquire is a store's acquire function as the broker's classic mode has it (nothing to release).
func Acquire(st *storage.Store) func() (*storage.Store, func(), error) {
	return func() (*storage.Store, func(), error) { return st, func() {}, nil }
}

// Put encodes m (store host Host) and appends it, returning its result.
func Put(t testing.TB, st *storage.Store, m *message.Message) storage.AppendResult {
	t.Helper()
	if !m.StoreHost.IsValid() {
		m.StoreHost = Host
	}
	if !m.BornHost.IsValid() {
		m.BornHost = Host
	}
	rec, err := message.EncodeRecord(m)
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Append(context.Background(), [][]byte{rec})
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

// Read returns the messages of topic/queue from offset 0, decoded.
func Read(t testing.TB, st *storage.Store, topic string, qid int32) []*message.Message {
	t.Helper()
	r := st.GetMessages(topic, qid, 0, 1000, 0, nil)
	var out []*message.Message
	for _, raw := range r.Records {
		m, _, err := message.DecodeRecord(raw)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}
