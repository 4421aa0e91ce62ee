package storage

import (
	"fmt"
	"math/rand"
	"testing"

	"rocketraft/message"
	"rocketraft/storage/vfs"
)

// TestRecoverPeriodicIndexSync is TestRecoverRandomCrashes with the periodic flush, which leaves
// the active index file unsynced: after any crash every acknowledged record is still found by key
// (recovery rebuilds the active file), also across index file switches (200 entries per file).
func TestRecoverPeriodicIndexSync(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	fs := vfs.NewMemFS()
	type ack struct{ topic, key string }
	acked := map[int64]ack{}
	for round := 0; round < 40; round++ {
		cfg := testConfig(fs)
		cfg.FlushIntervalConsumeQueue = 1 << 40
		s := openT(t, cfg)
		for phys, a := range acked {
			found := false
			got, _, _ := s.QueryByKey(a.topic, a.key, 1<<20, 0, 1<<62)
			for _, r := range got {
				if v, _ := message.ParseView(r); v.PhysicalOffset() == phys {
					found = true
				}
			}
			if !found {
				t.Fatalf("round %d: record at %d not found by key %s", round, phys, a.key)
			}
		}
		checkInvariants(t, s)
		for i := rng.Intn(60) + 1; i > 0; i-- {
			a := ack{fmt.Sprintf("T%d", rng.Intn(3)), fmt.Sprintf("k%d", rng.Intn(50))}
			res := appendT(t, s, rec(t, a.topic, int32(rng.Intn(2)), "body", "x", a.key))
			acked[res[0].PhysicalOffset] = a
			if rng.Intn(8) == 0 {
				if err := s.flushLogicsOpt(true); err != nil {
					t.Fatal(err)
				}
			}
		}
		if rng.Intn(2) == 0 {
			if err := s.flushLogicsOpt(true); err != nil {
				t.Fatal(err)
			}
		}
		close(s.stop)
		s.wg.Wait()
		fs = fs.CrashKeeping(func(string, int) bool { return rng.Intn(2) == 0 })
	}
}

// TestPeriodicIndexSyncSkipsActiveFile: the periodic flush syncs sealed index files but not the
// active one, which stays dirty until a full flush (Close, Flush) syncs it.
func TestPeriodicIndexSyncSkipsActiveFile(t *testing.T) {
	cfg := testConfig(vfs.NewMemFS())
	cfg.FlushIntervalConsumeQueue = 1 << 40
	s := openT(t, cfg)
	defer s.Close()
	for i := 0; i < 250; i++ { // 200 entries per file: two files
		appendT(t, s, rec(t, "P", 0, "b", "", fmt.Sprintf("k%d", i)))
	}
	if err := s.flushLogicsOpt(true); err != nil {
		t.Fatal(err)
	}
	s.idx.mu.RLock()
	files := append([]*indexFile(nil), s.idx.files...)
	dirty := len(s.idx.dirty)
	_, stillDirty := s.idx.dirty[files[len(files)-1]]
	s.idx.mu.RUnlock()
	if len(files) < 2 || dirty != 1 || !stillDirty {
		t.Fatalf("after a periodic flush: %d files, %d dirty (active dirty: %v), want only the active one dirty", len(files), dirty, stillDirty)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.idx.mu.RLock()
	dirty = len(s.idx.dirty)
	s.idx.mu.RUnlock()
	if dirty != 0 {
		t.Fatalf("after Flush: %d index files dirty", dirty)
	}
}
