package dledger

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

// TestLogStoreReopensAfterTailTruncation: a follower that held an uncommitted entry past the
// new leader's log truncates it ("clearing log suffix", DeleteRange of the tail), and must
// restart on that log. raft-wal v0.4.0 marked the truncated tail segment sealed without writing
// its index, so the restart panicked in raft.NewRaft with "sealed segment has no index block"
// (hashicorp/raft-wal#31, fixed in v0.4.1); a transactions chaos test hit it after a leader kill.
func TestLogStoreReopensAfterTailTruncation(t *testing.T) {
	for _, kind := range []string{LogStoreWAL, LogStoreBolt} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			store, c, err := openLogStore(dir, kind, -1, 0, 1<<20, nil, testLogger(kind))
			if err != nil {
				t.Fatal(err)
			}
			var logs []*raft.Log
			for i := uint64(1); i <= 20; i++ {
				logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("e%d", i))})
			}
			if err := store.StoreLogs(logs); err != nil {
				t.Fatal(err)
			}
			if err := store.DeleteRange(20, 20); err != nil { // the uncommitted tail
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			store, c, err = openLogStore(dir, kind, -1, 0, 1<<20, nil, testLogger(kind))
			if err != nil {
				t.Fatalf("reopen after tail truncation: %v", err)
			}
			defer c.Close()
			var l raft.Log
			if err := store.GetLog(1, &l); err != nil || string(l.Data) != "e1" {
				t.Fatalf("entry 1 after reopen: %v %q", err, l.Data)
			}
			if last, err := store.LastIndex(); err != nil || last != 19 {
				t.Fatalf("last index after reopen: %d, %v (want 19)", last, err)
			}
			// The log goes on from the truncation point.
			if err := store.StoreLog(&raft.Log{Index: 20, Term: 2, Type: raft.LogCommand, Data: []byte("new20")}); err != nil {
				t.Fatalf("append after reopen: %v", err)
			}
		})
	}
}
