package dledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/hashicorp/raft"
)

// countingStore is a raft.InmemStore that counts GetLog calls (cache misses) and can fail
// StoreLogs.
type countingStore struct {
	*raft.InmemStore
	gets      int
	failStore error
}

func (s *countingStore) GetLog(idx uint64, l *raft.Log) error {
	s.gets++
	return s.InmemStore.GetLog(idx, l)
}

func (s *countingStore) StoreLogs(logs []*raft.Log) error {
	if s.failStore != nil {
		return s.failStore
	}
	return s.InmemStore.StoreLogs(logs)
}

func (s *countingStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func entries(from, to uint64, size int) []*raft.Log {
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, size)})
	}
	return logs
}

// checkCache verifies the cache's bookkeeping against its ring and its bounds.
func checkCache(t *testing.T, c *logCache) {
	t.Helper()
	first, last, size := c.cached()
	if first == 0 {
		if last != 0 || size != 0 {
			t.Fatalf("empty cache with last %d, %d bytes", last, size)
		}
		for i, l := range c.ring {
			if l != nil {
				t.Fatalf("empty cache holds entry %d in slot %d", l.Index, i)
			}
		}
		return
	}
	n := int(last - first + 1)
	if n > c.maxEntries {
		t.Fatalf("cache holds %d entries [%d, %d], bound %d", n, first, last, c.maxEntries)
	}
	sum, held := 0, 0
	for i := first; i <= last; i++ {
		l := c.ring[i%uint64(len(c.ring))]
		if l == nil || l.Index != i {
			t.Fatalf("slot for entry %d holds %v", i, l)
		}
		sum += logSize(l)
	}
	for _, l := range c.ring {
		if l != nil {
			held++
		}
	}
	if held != n {
		t.Fatalf("ring holds %d entries, range [%d, %d] has %d", held, first, last, n)
	}
	if sum != size {
		t.Fatalf("cache counts %d bytes, entries hold %d", size, sum)
	}
	if keep := max(logCacheMinEntries, c.batch); size > c.maxBytes && n > keep {
		t.Fatalf("cache holds %d bytes in %d entries, bound %d bytes beyond the newest %d", size, n, c.maxBytes, keep)
	}
}

// TestLogCacheBoundedByBytes: the newest entries are answered from memory; entries past the byte
// bound (beyond the newest logCacheMinEntries) come from the store.
func TestLogCacheBoundedByBytes(t *testing.T) {
	store := &countingStore{InmemStore: raft.NewInmemStore()}
	c, err := newLogCache(store, 512, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	// 40 entries of 4 KiB: 64 KiB holds 15 of them.
	for i := uint64(1); i <= 40; i += 4 {
		if err := c.StoreLogs(entries(i, i+3, 4<<10)); err != nil {
			t.Fatal(err)
		}
		checkCache(t, c)
	}
	first, last, size := c.cached()
	if last != 40 || size > 64<<10 || first != 41-uint64((64<<10)/(4<<10+logEntryOverhead)) {
		t.Fatalf("cached [%d, %d] in %d bytes", first, last, size)
	}
	var l raft.Log
	for i := first; i <= 40; i++ {
		if err := c.GetLog(i, &l); err != nil || l.Index != i || len(l.Data) != 4<<10 || l.Data[0] != byte(i) {
			t.Fatalf("GetLog(%d): %v, %+v", i, err, l.Index)
		}
	}
	if store.gets != 0 {
		t.Fatalf("%d reads of cached entries went to the store", store.gets)
	}
	if err := c.GetLog(first-1, &l); err != nil || l.Index != first-1 {
		t.Fatalf("GetLog(%d) past the cache: %v", first-1, err)
	}
	if store.gets != 1 {
		t.Fatalf("an entry past the cache was read %d times from the store, want 1", store.gets)
	}

	// A batch larger than the whole budget stays cached whole until the next store (a follower
	// applies it right after storing it); then the newest logCacheMinEntries stay.
	if err := c.StoreLogs(entries(41, 60, 100<<10)); err != nil {
		t.Fatal(err)
	}
	checkCache(t, c)
	if first, last, _ := c.cached(); first != 41 || last != 60 {
		t.Fatalf("after a batch of oversized entries the cache holds [%d, %d], want the batch [41, 60]", first, last)
	}
	if err := c.StoreLogs(entries(61, 61, 100<<10)); err != nil {
		t.Fatal(err)
	}
	checkCache(t, c)
	if first, last, _ := c.cached(); first != 61-logCacheMinEntries+1 || last != 61 {
		t.Fatalf("after one more oversized entry the cache holds [%d, %d], want the newest %d", first, last, logCacheMinEntries)
	}
}

// TestLogCacheBoundedByCount: the entry bound evicts the oldest entry as a new one comes.
func TestLogCacheBoundedByCount(t *testing.T) {
	c, err := newLogCache(raft.NewInmemStore(), 16, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 100; i++ {
		if err := c.StoreLog(entries(i, i, 10)[0]); err != nil {
			t.Fatal(err)
		}
		checkCache(t, c)
	}
	if first, last, _ := c.cached(); first != 85 || last != 100 {
		t.Fatalf("cached [%d, %d], want [85, 100]", first, last)
	}
	if _, err := newLogCache(raft.NewInmemStore(), 0, 1); err == nil {
		t.Fatal("a cache of 0 entries was accepted")
	}
}

// TestLogCacheStoreFailureCachesNothing: an entry the store refused is not answered from memory.
func TestLogCacheStoreFailureCachesNothing(t *testing.T) {
	store := &countingStore{InmemStore: raft.NewInmemStore()}
	c, err := newLogCache(store, 64, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StoreLogs(entries(1, 5, 10)); err != nil {
		t.Fatal(err)
	}
	store.failStore = errors.New("disk on fire")
	if err := c.StoreLogs(entries(6, 8, 10)); err == nil || !errors.Is(err, store.failStore) {
		t.Fatalf("StoreLogs with a failing store: %v", err)
	}
	checkCache(t, c)
	var l raft.Log
	if err := c.GetLog(6, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog of a refused entry: %v, %+v", err, l)
	}
}

// TestLogCacheMatchesStore drives the cache and a bare store through the same random appends,
// prefix deletions (compaction), suffix deletions (a conflicting leader) and reads: every read
// answers what the store holds, and the bookkeeping holds after every step.
func TestLogCacheMatchesStore(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for round := 0; round < 20; round++ {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			bare := raft.NewInmemStore()
			store := &countingStore{InmemStore: raft.NewInmemStore()}
			c, err := newLogCache(store, 1+rng.IntN(64), 1+rng.IntN(32<<10))
			if err != nil {
				t.Fatal(err)
			}
			var first, last uint64 // what the store holds; 0, 0 = nothing
			term := uint64(1)
			for step := 0; step < 400; step++ {
				switch op := rng.IntN(10); {
				case op < 5: // append, now and then after a gap (a restored snapshot on a store that allows gaps)
					n, gap := uint64(1+rng.IntN(6)), uint64(0)
					if rng.IntN(20) == 0 {
						gap = uint64(1 + rng.IntN(3))
					}
					logs := entries(last+gap+1, last+gap+n, rng.IntN(4<<10))
					for _, l := range logs {
						l.Term = term
					}
					if err := bare.StoreLogs(logs); err != nil {
						t.Fatal(err)
					}
					if err := c.StoreLogs(logs); err != nil {
						t.Fatal(err)
					}
					if first == 0 {
						first = last + gap + 1
					}
					last += gap + n
				case op < 6 && first != 0 && last > first: // compaction: a prefix
					max := first + uint64(rng.IntN(int(last-first)))
					must(t, bare.DeleteRange(first, max), c.DeleteRange(first, max))
					first = max + 1
				case op < 7 && first != 0 && last > first: // conflict: a suffix, then a new term
					min := first + 1 + uint64(rng.IntN(int(last-first)))
					must(t, bare.DeleteRange(min, last), c.DeleteRange(min, last))
					last = min - 1
					term++
				case op < 8 && first != 0 && last > first+2 && rng.IntN(4) == 0: // everything (a snapshot restore)
					must(t, bare.DeleteRange(first, last), c.DeleteRange(first, last))
					first = 0 // the next append continues at last+1
				default: // reads around the held range
					if last == 0 {
						continue
					}
					lo := uint64(1)
					if first > 3 {
						lo = first - 3
					}
					for i := lo; i <= last+2; i++ {
						var want, got raft.Log
						werr := bare.GetLog(i, &want)
						gerr := c.GetLog(i, &got)
						if (werr == nil) != (gerr == nil) || werr == nil && (got.Index != want.Index || got.Term != want.Term || !bytes.Equal(got.Data, want.Data)) {
							t.Fatalf("step %d: GetLog(%d) = %d/%d %v, store has %d/%d %v", step, i, got.Index, got.Term, gerr, want.Index, want.Term, werr)
						}
					}
				}
				checkCache(t, c)
			}
		})
	}
}

func must(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestLogCacheMonotonic: raft-wal's IsMonotonic reaches Raft through the cache.
func TestLogCacheMonotonic(t *testing.T) {
	c, _ := newLogCache(&raft.MockMonotonicLogStore{}, 4, 1024)
	if !c.IsMonotonic() {
		t.Fatal("the cache hides the store's MonotonicLogStore")
	}
	c, _ = newLogCache(raft.NewInmemStore(), 4, 1024)
	if c.IsMonotonic() {
		t.Fatal("an InmemStore reported monotonic through the cache")
	}
}

// TestSmallLogCacheReplicates: a group whose cache holds a few entries replicates and applies
// everything identically (entries past the cache are read back from raft-wal), restarts a
// follower that catches up from the log, and reports the cache within its bound.
func TestSmallLogCacheReplicates(t *testing.T) {
	const budget = 64 << 10
	c := newCluster(t, 3, func(cfg *Config) { cfg.LogCacheBytes = budget }, nil)
	lead := c.leader(electionBound)
	var want [][]byte
	big := string(bytes.Repeat([]byte("x"), 8<<10))
	ctx := context.Background()
	apply := func(from, to int) {
		for i := from; i < to; i++ {
			cmd := []byte(fmt.Sprintf("%d-%s", i, big))
			if _, err := lead.Apply(ctx, cmd); err != nil {
				t.Fatalf("apply %d: %v", i, err)
			}
			want = append(want, cmd)
		}
	}
	apply(0, 60)
	f := c.follower()
	c.stop(f.ID())
	apply(60, 120) // the stopped follower's missing entries are long gone from the leader's cache
	c.restart(f.ID())
	c.sameLogs(electionBound, want)
	// Beyond the byte bound the cache keeps the newest logCacheMinEntries, or the last batch
	// stored whole: at most one AppendEntries' worth on a follower.
	maxBatch := raft.DefaultConfig().MaxAppendEntries
	for id, n := range c.nodes {
		st := n.Status()
		if st.LogCacheEntries == 0 || st.LogCacheEntries > max(logCacheMinEntries, maxBatch) && st.LogCacheBytes > budget {
			t.Errorf("%s: cache holds %d entries, %d bytes (bound %d bytes beyond the newest %d)", id, st.LogCacheEntries, st.LogCacheBytes, budget, max(logCacheMinEntries, maxBatch))
		}
	}
}
