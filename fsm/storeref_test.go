package fsm

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rocketraft/message"
	"rocketraft/storage"
	"rocketraft/storage/vfs"
)

// growingSnapshots returns snapshots of one source taken every step entries of logs, each
// ahead of the one before, so that restoring them in order swaps the store every time.
func growingSnapshots(t *testing.T, logs int, step int) (snaps [][]byte, indexes []uint64) {
	t.Helper()
	src := newFSM(t, vfs.NewMemFS(), nil)
	defer src.Close()
	all := workload(t, logs)
	for i := step; i <= len(all); i += step {
		applyAll(src, all[i-step:i])
		snaps = append(snaps, snapshotBytes(t, src))
		indexes = append(indexes, uint64(i))
	}
	return snaps, indexes
}

// readThrough does what a pull, a query and an offset lookup do with a store, and returns an
// error for anything a store in service must not show.
func readThrough(st *storage.Store) error {
	if st.Closed() {
		return errors.New("acquired a closed store")
	}
	for q := int32(0); q < 3; q++ {
		res := st.GetMessages("A", q, st.MinOffset("A", q), 16, 0, nil)
		for _, r := range res.Records {
			v, err := message.ParseView(r)
			if err != nil {
				return fmt.Errorf("queue A-%d: record does not parse: %w", q, err)
			}
			if string(v.Topic()) != "A" || v.QueueID() != q {
				return fmt.Errorf("queue A-%d: record of %s-%d", q, v.Topic(), v.QueueID())
			}
		}
		st.SearchOffsetByTimestamp("A", q, 1_700_000_000_050, false)
	}
	st.QueryByKey("A", "key1700000000010", 4, 0, 1<<62)
	if end := st.CommitLogMaxOffset(); end > 0 {
		if _, err := st.ReadCommitLog(st.CommitLogMinOffset(), 512); err != nil {
			return fmt.Errorf("read commitlog: %w", err)
		}
	}
	if st.Closed() {
		return errors.New("store closed while held")
	}
	return nil
}

// TestReadersDuringRestores (run with -race): readers acquire the store and read through it
// while Restore swaps it again and again. No reader ever holds a closed store, every read
// succeeds, and every Restore completes. On the OS file system the old store's files are really
// unmapped, so a reader that kept one would fault.
func TestReadersDuringRestores(t *testing.T) {
	snaps, indexes := growingSnapshots(t, 240, 30)
	for _, fsName := range []string{"memfs", "os"} {
		t.Run(fsName, func(t *testing.T) {
			cfg := Config{Store: storeConfig(vfs.NewMemFS())}
			if fsName == "os" {
				cfg.Store = storeConfigAt(vfs.OS{}, filepath.Join(t.TempDir(), "store"))
			}
			f, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			stop := make(chan struct{})
			var reads atomic.Int64
			errs := make(chan error, 8)
			var wg sync.WaitGroup
			for g := 0; g < 4; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						st, release, err := f.Acquire(context.Background())
						if err != nil {
							errs <- fmt.Errorf("acquire: %w", err)
							return
						}
						err = readThrough(st)
						release()
						if err != nil {
							errs <- err
							return
						}
						reads.Add(1)
					}
				}()
			}
			for i, snap := range snaps {
				before := reads.Load()
				if err := f.Restore(reader(snap)); err != nil {
					t.Fatalf("restore %d: %v", i, err)
				}
				if f.AppliedIndex() != indexes[i] {
					t.Fatalf("restore %d: applied %d, want %d", i, f.AppliedIndex(), indexes[i])
				}
				// let the readers get going on the new store before swapping it again
				eventually(t, 10*time.Second, func() error {
					select {
					case err := <-errs:
						t.Fatalf("reader during restore %d: %v", i, err)
					default:
					}
					if reads.Load() < before+20 {
						return fmt.Errorf("%d reads since the last restore", reads.Load()-before)
					}
					return nil
				})
			}
			close(stop)
			wg.Wait()
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
			t.Logf("%d reads across %d restores", reads.Load(), len(snaps))
		})
	}
}

// TestRestoreWaitsForReader: a store held by a reader is not closed under it; readers arriving
// meanwhile wait and get the restored store; Restore completes once the holder releases.
func TestRestoreWaitsForReader(t *testing.T) {
	snaps, indexes := growingSnapshots(t, 60, 30)
	f := newFSM(t, vfs.NewMemFS(), nil)
	defer f.Close()
	if err := f.Restore(reader(snaps[0])); err != nil {
		t.Fatal(err)
	}
	held, release, err := f.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	restored := make(chan error, 1)
	go func() { restored <- f.Restore(reader(snaps[1])) }()
	eventually(t, 10*time.Second, func() error {
		if r := f.current.Load(); r == nil || r.refs.Load() < retiring {
			return errors.New("restore has not retired the store yet")
		}
		return nil
	})
	// a reader arriving now waits for the restored store
	late := make(chan *storage.Store, 1)
	go func() {
		st, rel, err := f.Acquire(context.Background())
		if err != nil {
			t.Error(err)
			late <- nil
			return
		}
		defer rel()
		if st.Closed() {
			t.Error("late reader got a closed store")
		}
		late <- st
	}()
	select {
	case err := <-restored:
		t.Fatalf("restore finished while a reader held the store: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	select {
	case <-late:
		t.Fatal("a reader got a store while the restore was waiting")
	default:
	}
	if held.Closed() {
		t.Fatal("held store closed")
	}
	if err := readThrough(held); err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-restored; err != nil {
		t.Fatal(err)
	}
	if st := <-late; st == nil || st == held {
		t.Fatal("late reader did not get the restored store")
	}
	if !held.Closed() || f.AppliedIndex() != indexes[1] {
		t.Fatalf("old store closed %v, applied %d", held.Closed(), f.AppliedIndex())
	}
}

// TestRestoreGivesUpOnStuckReader: a reader that never releases makes Restore give up after
// DrainTimeout with ErrReadersHoldStore, leaving the old store open and in service; once the
// reader is gone, the same snapshot restores.
func TestRestoreGivesUpOnStuckReader(t *testing.T) {
	snaps, indexes := growingSnapshots(t, 60, 30)
	fs := vfs.NewMemFS()
	f, err := New(Config{Store: storeConfig(fs), DrainTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	applyAll(f, workload(t, 10))
	held, release, err := f.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(reader(snaps[1])); !errors.Is(err, ErrReadersHoldStore) {
		t.Fatalf("restore with a stuck reader: %v", err)
	}
	if held.Closed() || f.AppliedIndex() != 10 {
		t.Fatalf("abandoned restore changed the store (closed %v, applied %d)", held.Closed(), f.AppliedIndex())
	}
	if _, err := fs.Stat(f.staging); err == nil {
		t.Fatal("abandoned restore left its staging directory")
	}
	st, rel, err := f.Acquire(context.Background())
	if err != nil || st != held {
		t.Fatalf("acquire after an abandoned restore: %v", err)
	}
	rel()
	applyAll(f, workload(t, 12)[10:]) // Apply goes on with the old store
	release()
	if err := f.Restore(reader(snaps[1])); err != nil {
		t.Fatal(err)
	}
	if !held.Closed() || f.AppliedIndex() != indexes[1] {
		t.Fatalf("second restore: old closed %v, applied %d", held.Closed(), f.AppliedIndex())
	}
}

// TestAcquireAfterClose: Close waits for holders like Restore; afterwards Acquire fails with
// ErrClosed instead of handing out a closed store.
func TestAcquireAfterClose(t *testing.T) {
	f := newFSM(t, vfs.NewMemFS(), nil)
	applyAll(f, workload(t, 5))
	st, release, err := f.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- f.Close() }()
	eventually(t, 10*time.Second, func() error {
		if !f.isClosed.Load() {
			return errors.New("close not started")
		}
		return nil
	})
	if st.Closed() {
		t.Fatal("store closed under its holder")
	}
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if !st.Closed() {
		t.Fatal("store not closed")
	}
	if _, _, err := f.Acquire(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("acquire after close: %v", err)
	}
}

// TestApplyAfterClose: an entry Raft hands over after Close (dledger's bounded Shutdown can
// return while Raft still runs) is refused with ErrClosed, not a panic, and not applied.
func TestApplyAfterClose(t *testing.T) {
	f := newFSM(t, vfs.NewMemFS(), nil)
	logs := workload(t, 6)
	applyAll(f, logs[:3])
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	before := f.AppliedIndex()
	resp := f.Apply(logs[3])
	if err, ok := resp.(error); !ok || !errors.Is(err, ErrClosed) {
		t.Fatalf("apply after close answered %v (%T), want an error wrapping ErrClosed", resp, resp)
	}
	if f.AppliedIndex() != before {
		t.Fatalf("applied index moved after close: %d -> %d", before, f.AppliedIndex())
	}
}
