package dledger

import (
	"fmt"
	"strings"
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

// A data directory tells which Raft log store it was created with, the commitlog store included
// (it leaves only a mark), and a store of another kind is refused there instead of starting on an
// empty log beside the node's term and applied state.
func TestStoreOnDiskAndRefusal(t *testing.T) {
	if got := StoreOnDisk(t.TempDir()); got != "" {
		t.Fatalf("an empty directory holds %q", got)
	}
	for _, kind := range []string{LogStoreWAL, LogStoreBolt} {
		dir := t.TempDir()
		_, c, err := openLogStore(dir, kind, -1, 0, 1<<20, nil, testLogger(kind))
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if got := StoreOnDisk(dir); got != kind {
			t.Fatalf("a %s directory holds %q", kind, got)
		}
		if _, _, err := openEntryLog(dir, raft.NewInmemStore(), -1, 0, nil); err == nil {
			t.Fatalf("the commitlog store opened in a %s directory", kind)
		}
	}
	dir := t.TempDir()
	if _, _, err := openEntryLog(dir, raft.NewInmemStore(), -1, 0, nil); err != nil {
		t.Fatal(err)
	}
	if got := StoreOnDisk(dir); got != LogStoreCommitLog {
		t.Fatalf("a commitlog-store directory holds %q", got)
	}
	if _, _, err := openEntryLog(dir, raft.NewInmemStore(), -1, 0, nil); err != nil {
		t.Fatalf("reopening the commitlog store: %v", err)
	}
	for _, kind := range []string{LogStoreWAL, LogStoreBolt} {
		_, c, err := openLogStore(dir, kind, -1, 0, 1<<20, nil, testLogger(kind))
		if err == nil {
			c.Close()
			t.Fatalf("%s opened in a commitlog-store directory", kind)
		}
		if !strings.Contains(err.Error(), entryLogMark) {
			t.Fatalf("%s refused without naming the mark: %v", kind, err)
		}
	}
}
