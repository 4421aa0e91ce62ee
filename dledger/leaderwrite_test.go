package dledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	walfs "github.com/hashicorp/raft-wal/fs"
	walTypes "github.com/hashicorp/raft-wal/types"
)

// gateVFS is the real raft-wal file system whose fsyncs block while the gate is shut, or fail.
type gateVFS struct {
	walTypes.VFS
	mu     sync.Mutex
	shut   chan struct{} // non-nil: Sync waits for it to close
	fail   error
	syncs  atomic.Int64
	parked atomic.Int64 // Syncs waiting at the gate now
}

func newGateVFS() *gateVFS { return &gateVFS{VFS: walfs.New()} }

func (v *gateVFS) close() {
	v.mu.Lock()
	v.shut = make(chan struct{})
	v.mu.Unlock()
}

func (v *gateVFS) open() {
	v.mu.Lock()
	if v.shut != nil {
		close(v.shut)
		v.shut = nil
	}
	v.mu.Unlock()
}

func (v *gateVFS) failWith(err error) {
	v.mu.Lock()
	v.fail = err
	v.mu.Unlock()
}

func (v *gateVFS) Create(dir, name string, size uint64) (walTypes.WritableFile, error) {
	f, err := v.VFS.Create(dir, name, size)
	return &gateFile{WritableFile: f, v: v}, err
}

func (v *gateVFS) OpenWriter(dir, name string) (walTypes.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	return &gateFile{WritableFile: f, v: v}, err
}

type gateFile struct {
	walTypes.WritableFile
	v *gateVFS
}

func (f *gateFile) Sync() error {
	f.v.mu.Lock()
	shut := f.v.shut
	f.v.mu.Unlock()
	if shut != nil {
		f.v.parked.Add(1)
		<-shut
		f.v.parked.Add(-1)
	}
	f.v.mu.Lock()
	fail := f.v.fail
	f.v.mu.Unlock()
	if fail != nil {
		return fail
	}
	f.v.syncs.Add(1)
	return f.WritableFile.Sync()
}

// lastLogIndex is the node's last Raft log index (written, durable or not).
func lastLogIndex(n *Node) uint64 { return n.raft.LastIndex() }

// TestLeaderWritesInParallel holds the leader's fsync and checks what may and may not happen
// meanwhile: the followers store the entry (the leader replicated it before its own copy was
// durable), but nobody applies it and the client gets no answer; once the fsync completes,
// everyone applies it. With SerialLeaderWrite the followers do not even receive it.
func TestLeaderWritesInParallel(t *testing.T) {
	for _, serial := range []bool{false, true} {
		t.Run(fmt.Sprintf("serial=%v", serial), func(t *testing.T) {
			gates := map[string]*gateVFS{}
			c := newCluster(t, 3, func(cfg *Config) {
				gates[cfg.SelfID] = newGateVFS()
				cfg.walVFS, cfg.SerialLeaderWrite = gates[cfg.SelfID], serial
			}, nil)
			lead := c.leader(10 * time.Second)
			want := applyN(t, lead, "before", 3)
			c.sameLogs(5*time.Second, want)

			gate := gates[lead.ID()]
			gate.close()
			defer gate.open()
			idx := lastLogIndex(lead) + 1
			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				_, err := lead.Apply(ctx, []byte("held"))
				done <- err
			}()
			// The leader's write is stuck at its fsync (serial: on the leader loop; parallel: in the
			// background) ...
			awaitParked(t, gate)
			followersHave := func() error {
				for id, n := range c.nodes {
					if n != lead && lastLogIndex(n) < idx {
						return fmt.Errorf("%s has log index %d, not %d", id, lastLogIndex(n), idx)
					}
				}
				return nil
			}
			if serial {
				time.Sleep(300 * time.Millisecond)
				if followersHave() == nil {
					t.Fatal("serial: a follower stored the entry before the leader's fsync completed")
				}
			} else {
				eventually(t, 5*time.Second, followersHave)
				// ... and nothing may depend on the commit meanwhile: six commit-timeout rounds
				// in which the followers hear the leader's commit index.
				time.Sleep(6 * DefaultCommitTimeout)
				select {
				case err := <-done:
					t.Fatalf("the client was answered (%v) before the leader's copy was durable", err)
				default:
				}
				for id := range c.nodes {
					if got := c.fsms[id].(*testFSM).log(); len(got) != len(want) {
						t.Fatalf("%s applied %q before the leader's copy was durable", id, got[len(got)-1])
					}
				}
				if ci := lead.raft.CommitIndex(); ci < idx {
					t.Logf("leader commit index %d (entry %d): the followers' acks arrived after the check", ci, idx)
				}
			}
			openAndAwait(t, gate, done, "apply")
			c.sameLogs(5*time.Second, append(want, []byte("held")))
		})
	}
}

// TestLeaderWriteMembershipDurable: a membership change is answered when its entry commits, on
// Raft's leader loop rather than through the state machine that waits for durability, so the
// leader writes a configuration entry synchronously: while its fsync is held, AddVoter must not
// return, and it does once the fsync completes.
func TestLeaderWriteMembershipDurable(t *testing.T) {
	gates := map[string]*gateVFS{}
	c := newCluster(t, 3, func(cfg *Config) {
		gates[cfg.SelfID] = newGateVFS()
		cfg.walVFS = gates[cfg.SelfID]
	}, nil)
	lead := c.leader(10 * time.Second)
	c.sameLogs(5*time.Second, applyN(t, lead, "before", 3))
	var peer Peer
	for _, p := range c.peers {
		if p.ID != lead.ID() {
			peer = p
		}
	}

	gate := gates[lead.ID()]
	gate.close()
	defer gate.open()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- lead.AddVoter(ctx, peer.ID, peer.Addr) // re-addressing appends a configuration entry
	}()
	awaitParked(t, gate)
	time.Sleep(6 * DefaultCommitTimeout) // rounds in which the followers could acknowledge it
	select {
	case err := <-done:
		t.Fatalf("AddVoter returned (%v) before the leader's copy of the configuration was durable", err)
	default:
	}
	openAndAwait(t, gate, done, "AddVoter")
}

// awaitParked waits until an fsync is held at the gate.
func awaitParked(t *testing.T, gate *gateVFS) {
	t.Helper()
	eventually(t, 5*time.Second, func() error {
		if gate.parked.Load() == 0 {
			return errors.New("the leader has not reached its fsync")
		}
		return nil
	})
}

// openAndAwait opens the gate and waits for the result of the call it held.
func openAndAwait(t *testing.T, gate *gateVFS, done <-chan error, what string) {
	t.Helper()
	gate.open()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not finish after the fsync completed", what)
	}
}

// TestLeaderWriteFsyncFailure: a background fsync that fails makes the log refuse further writes
// (the leader steps down and stays out) and the entry is never applied or acknowledged here.
func TestLeaderWriteFsyncFailure(t *testing.T) {
	store, tr, gate, leading := openGatedWAL(t, 1<<20)
	leading.Store(true)
	entry := func(i uint64) []*raft.Log { return entries(i, i, 16) }
	if err := store.StoreLogs(entry(1)); err != nil {
		t.Fatal(err)
	}
	if err := tr.awaitDurable(1); err != nil {
		t.Fatalf("entry 1 not durable: %v", err)
	}

	// The leader's write returns while its fsync is held; the entry is readable at once.
	gate.close()
	if err := store.StoreLogs(entry(2)); err != nil {
		t.Fatal(err)
	}
	var got raft.Log
	if err := store.GetLog(2, &got); err != nil || !bytes.Equal(got.Data, entry(2)[0].Data) {
		t.Fatalf("entry 2 not readable before its fsync: %v %q", err, got.Data)
	}
	if d := tr.durable.Load(); d != 1 {
		t.Fatalf("durable index %d while the fsync of 2 is held", d)
	}
	gate.failWith(errors.New("EIO"))
	gate.open()
	if err := tr.awaitDurable(2); err == nil || !errors.Is(err, gate.fail) {
		t.Fatalf("awaitDurable after a failed fsync = %v, want the fsync error", err)
	}
	if err := store.StoreLogs(entry(3)); err == nil {
		t.Fatal("a write after a failed background fsync succeeded")
	}
	leading.Store(false)
	if err := store.StoreLogs(entry(3)); err == nil {
		t.Fatal("a follower's write after a failed background fsync succeeded")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("durableFSM applied an entry that is not durable")
			}
		}()
		durableFSM{FSM: &testFSM{}, t: tr}.Apply(&raft.Log{Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte("2")})
	}()
}

// TestLeaderWriteThenFollowerWrite: after leading, a follower's write (and a suffix delete, as a
// new leader's conflicting log causes) waits for the outstanding fsync, and the durable index
// follows what the log holds.
func TestLeaderWriteThenFollowerWrite(t *testing.T) {
	store, tr, gate, leading := openGatedWAL(t, 1<<20)
	leading.Store(true)
	gate.close()
	if err := store.StoreLogs(entries(1, 5, 16)); err != nil {
		t.Fatal(err)
	}
	leading.Store(false)
	deleted := make(chan error, 1)
	go func() { deleted <- store.DeleteRange(4, 5) }()
	select {
	case err := <-deleted:
		t.Fatalf("DeleteRange ran before the outstanding fsync (%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	gate.open()
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if d := tr.durable.Load(); d != 3 {
		t.Fatalf("durable index after deleting 4-5 = %d, want 3", d)
	}
	if err := store.StoreLogs(entries(4, 6, 16)); err != nil {
		t.Fatal(err)
	}
	if d := tr.durable.Load(); d != 6 {
		t.Fatalf("durable index after a follower's write = %d, want 6", d)
	}
	if n := gate.syncs.Load(); n < 2 {
		t.Fatalf("%d fsyncs, want the background one and the follower's", n)
	}
}

// openGatedWAL opens a raft-wal log store (segments of segmentSize bytes, no cache) with deferred
// leader writes on a gateVFS; the returned flag says whether its writes are the leader's.
func openGatedWAL(t *testing.T, segmentSize int) (raft.LogStore, *syncTracker, *gateVFS, *atomic.Bool) {
	t.Helper()
	gate := newGateVFS()
	tr := newSyncTracker(gate)
	store, closer, err := openLogStore(t.TempDir(), LogStoreWAL, -1, 0, segmentSize, tr, testLogger("wal"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	leading := new(atomic.Bool)
	f := leading.Load
	tr.leading.Store(&f)
	return store, tr, gate, leading
}

// recordingStore is an in-memory log store that can sync apart and records which sync a write
// used.
type recordingStore struct {
	*raft.InmemStore
	ring, blocking int
}

func (s *recordingStore) StoreLogsUnsynced(logs []*raft.Log) error { return s.StoreLogs(logs) }
func (s *recordingStore) SyncLogs() error                          { s.ring++; return nil }
func (s *recordingStore) SyncLogsBlocking() error                  { s.blocking++; return nil }

// TestFollowerSyncOnItsThreadWhenIdle: a follower's write fsyncs on its own thread while its
// state machine has applied everything but the entry before the write (a lone producer's pace:
// nothing else to run during the fsync) and through the ring when applies are pending (entries
// arriving faster than they are applied), and the durable index follows either way.
func TestFollowerSyncOnItsThreadWhenIdle(t *testing.T) {
	st := &recordingStore{InmemStore: raft.NewInmemStore()}
	tr := newSyncTracker(nil)
	t.Cleanup(func() { _ = tr.close() })
	l, err := newLeaderLog(st, tr)
	if err != nil {
		t.Fatal(err)
	}
	notLeading := func() bool { return false }
	tr.leading.Store(&notLeading)
	fsm := durableFSM{FSM: &testFSM{}, t: tr}
	write := func(i uint64) {
		t.Helper()
		if err := l.StoreLogs(entries(i, i, 8)); err != nil {
			t.Fatal(err)
		}
		if d := tr.durable.Load(); d != i {
			t.Fatalf("durable index %d after writing %d", d, i)
		}
	}
	// Entries 1 and 2: nothing applied yet and nothing before them: idle.
	write(1)
	write(2)
	if st.blocking != 2 || st.ring != 0 {
		t.Fatalf("writes 1-2: %d blocking, %d ring syncs; want 2 blocking", st.blocking, st.ring)
	}
	// Entry 3 while 1 is not applied: applies pending, the ring.
	write(3)
	if st.ring != 1 {
		t.Fatalf("write 3 with entry 1 unapplied: %d ring syncs, want 1", st.ring)
	}
	// 1 and 2 applied: entry 4 (3's commit comes with it) is idle again.
	for i := uint64(1); i <= 2; i++ {
		fsm.Apply(&raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte("x")})
	}
	write(4)
	if st.blocking != 3 || st.ring != 1 {
		t.Fatalf("write 4 with 1-2 applied: %d blocking, %d ring syncs; want 3 and 1", st.blocking, st.ring)
	}
}
