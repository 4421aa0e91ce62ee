package dledger

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// checkEntries reads every entry in [from, to] back from the store and compares it with what
// entries(from, to, size) wrote.
func checkEntries(t *testing.T, store raft.LogStore, from, to uint64, size int) {
	t.Helper()
	for _, want := range entries(from, to, size) {
		var got raft.Log
		if err := store.GetLog(want.Index, &got); err != nil {
			t.Fatalf("entry %d: %v", want.Index, err)
		}
		if !bytes.Equal(got.Data, want.Data) {
			t.Fatalf("entry %d: read %d bytes that differ from what was written", want.Index, len(got.Data))
		}
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestSealedSegmentsReleaseWriters: raft-wal keeps a sealed segment's writer, write buffer and
// all, as its reader until the segment is deleted; through releasingFiler the heap no longer
// grows with the log, and every entry still reads back, before and after a reopen.
func TestSealedSegmentsReleaseWriters(t *testing.T) {
	const (
		size    = 32 << 10 // 8 entries per write: 256 KiB, a 512 KiB write buffer per segment
		perCall = 8
		calls   = 96 // 1 MiB segments: about 24 of them
	)
	dir := t.TempDir()
	store, c, err := openLogStore(dir, LogStoreWAL, -1, 0, 1<<20, nil, testLogger("wal"))
	if err != nil {
		t.Fatal(err)
	}
	before := liveHeap()
	for i := uint64(0); i < calls; i++ {
		if err := store.StoreLogs(entries(i*perCall+1, (i+1)*perCall, size)); err != nil {
			t.Fatal(err)
		}
	}
	// Released writers are closed in the background; the write buffers of 24 kept writers would
	// be 12 MiB.
	var grown uint64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		grown = 0
		if h := liveHeap(); h > before {
			grown = h - before
		}
		if grown < 4<<20 || time.Now().After(deadline) {
			break
		}
	}
	if grown >= 4<<20 {
		t.Errorf("live heap grew by %d KiB over %d sealed segments, want under 4 MiB", grown>>10, calls*perCall*size/(1<<20))
	}
	last := uint64(calls * perCall)
	checkEntries(t, store, 1, last, size)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	store, c, err = openLogStore(dir, LogStoreWAL, -1, 0, 1<<20, nil, testLogger("wal"))
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer c.Close()
	checkEntries(t, store, 1, last, size)
	if err := store.StoreLogs(entries(last+1, last+perCall, size)); err != nil {
		t.Fatalf("append after reopen: %v", err)
	}
	checkEntries(t, store, last-perCall, last+perCall, size)
}

// TestSealedSegmentReleaseWaitsForFsync: a segment the leader sealed while its fsync was still
// outstanding is read through its reader at once, its writer's close fsyncs it (held here like
// the background fsync), and the durable index moves only once that fsync completes. A failed
// fsync on close fails the log as a failed background fsync does.
func TestSealedSegmentReleaseWaitsForFsync(t *testing.T) {
	for _, fail := range []bool{false, true} {
		name := map[bool]string{false: "fsync-ok", true: "fsync-fails"}[fail]
		t.Run(name, func(t *testing.T) {
			store, tr, gate, leading := openGatedWAL(t, 256<<10)
			leading.Store(true)
			if err := store.StoreLogs(entries(1, 1, 1024)); err != nil {
				t.Fatal(err)
			}
			if err := tr.awaitDurable(1); err != nil {
				t.Fatal(err)
			}
			gate.close()
			const size = 64 << 10 // 8 entries seal the first 256 KiB segment
			if err := store.StoreLogs(entries(2, 9, size)); err != nil {
				t.Fatal(err)
			}
			awaitParked(t, gate) // the background fsync, or the released writer's close
			checkEntries(t, store, 2, 9, size)
			if d := tr.durable.Load(); d != 1 {
				t.Fatalf("durable index %d while the fsyncs are held", d)
			}
			if fail {
				gate.failWith(errors.New("EIO"))
			}
			gate.open()
			err := tr.awaitDurable(9)
			if fail {
				if err == nil {
					t.Fatal("entries of a segment whose fsync failed reported durable")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkEntries(t, store, 2, 9, size)
			if err := store.StoreLogs(entries(10, 12, size)); err != nil {
				t.Fatalf("write to the next segment: %v", err)
			}
			if err := tr.awaitDurable(12); err != nil {
				t.Fatal(err)
			}
		})
	}
}
