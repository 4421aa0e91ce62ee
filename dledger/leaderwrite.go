package dledger

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hashicorp/raft"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"

	"rocketraft/internal/sendtrace"
	"rocketraft/internal/uring"
)

// The leader writes its own copy of new entries in parallel with replicating them (Raft thesis,
// §10.2.1), instead of fsyncing first and replicating after, as hashicorp/raft does: its
// dispatchLogs stores the batch, fsync included, on the leader loop and only then wakes the
// replicators, so an entry's commit waits for two fsyncs in sequence (the leader's, then the
// followers'), and the leader loop that takes the followers' acknowledgements spends about half
// its time in the leader's fsync (go-metrics, 2026-11-30: 1.7-1.9 ms of a 5.6-7.1 ms commit).
//
// hashicorp/raft counts the leader's own copy towards the quorum as soon as StoreLogs returns.
// Raft stays safe if the leader's copy is not yet durable at that point, as long as nothing
// depends on the commit until it is: an entry is durable on a majority once the leader's copy and
// the followers' copies that made the quorum are. So, on the leader only:
//
//   - leaderLog.StoreLogs writes the batch (readable at once) and returns; a background goroutine
//     fsyncs it and advances the durable index (raft-wal's Sync is deferred through syncVFS);
//   - durableFSM applies an entry only once the local durable index covers it, and a send is
//     acknowledged only once applied, so no acknowledgement precedes a majority's fsync;
//   - raftTransport (transport.go) never tells a follower a commit index beyond the leader's
//     durable index, so no follower applies an entry that a crash of the leader's machine could
//     still take back.
//
// A follower's StoreLogs stays synchronous (its acknowledgement is its vote for durability), and
// so does every other log operation, each after the outstanding background fsync: the order of
// writes on disk is the order Raft made them. So does the leader's write of a configuration entry,
// whose future Raft answers on commit without the state machine.

// syncTracker is the leader's background fsync: the files raft-wal asked to sync while a write
// was deferred, the highest index written and the highest known durable.
type syncTracker struct {
	mu       sync.Mutex
	cond     *sync.Cond
	deferred bool            // a leader's StoreLogs is running: Sync only records
	dirty    map[syncer]bool // files written since their last fsync
	written  uint64          // highest index written (durable or not)
	durable  atomic.Uint64   // every index <= durable is fsynced
	applied  atomic.Uint64   // the last entry this node's state machine applied (durableFSM)
	syncing  bool            // a background fsync round is running
	err      error           // the first failed fsync: the log is no longer trustworthy
	closed   bool
	kick     chan struct{}
	done     chan struct{}
	leading  atomic.Pointer[func() bool] // set once Raft runs; nil: every write synchronous
	base     types.VFS                   // the real file system under syncVFS
	ring     *uring.Ring                 // fsyncs that leave the processor free; nil: direct
	trace    *nodeTrace                  // nil unless Config.SendTrace
}

// newSyncTracker starts the background fsync goroutine for raft-wal files on base (the real file
// system when nil).
func newSyncTracker(base types.VFS) *syncTracker {
	if base == nil {
		base = walfs.New()
	}
	t := &syncTracker{dirty: map[syncer]bool{}, kick: make(chan struct{}, 1), done: make(chan struct{}), base: base}
	t.ring, _ = uring.Shared() // nil where io_uring is missing: fsync directly (Node.Open logs it)
	t.cond = sync.NewCond(&t.mu)
	go t.run()
	return t
}

// run fsyncs the dirty files whenever kicked, then publishes the index written before the round.
func (t *syncTracker) run() {
	defer close(t.done)
	for range t.kick {
		t.mu.Lock()
		if t.err != nil || (len(t.dirty) == 0 && t.durable.Load() >= t.written) {
			t.mu.Unlock()
			continue
		}
		files, target := t.dirty, t.written
		t.dirty = map[syncer]bool{}
		t.syncing = true
		t.mu.Unlock()

		var err error
		for f := range files {
			if e := f.syncNow(); e != nil && err == nil {
				err = fmt.Errorf("dledger: background fsync of the leader's raft log: %w", e)
			}
		}

		t.mu.Lock()
		t.syncing = false
		if err != nil && t.err == nil {
			t.err = err
		} else if prev := t.durable.Load(); err == nil && t.err == nil && target > prev {
			t.durable.Store(target)
			t.trace.leaderEntries().MarkRange(prev+1, target, sendtrace.Synced)
		}
		again := len(t.dirty) > 0 || t.written > t.durable.Load()
		t.cond.Broadcast()
		t.mu.Unlock()
		if again && err == nil {
			t.poke()
		}
	}
}

func (t *syncTracker) poke() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// deferSync reports whether a Sync on f should be left to the background goroutine, recording f
// as dirty if so.
func (t *syncTracker) deferSync(f syncer) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.deferred {
		return false
	}
	t.dirty[f] = true
	return true
}

// drain waits until everything written is durable (or an fsync failed).
func (t *syncTracker) drain() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.err == nil && (t.syncing || len(t.dirty) > 0 || t.durable.Load() < t.written) {
		t.poke()
		t.cond.Wait()
	}
	return t.err
}

// awaitDurable waits until index idx is durable (or an fsync failed).
func (t *syncTracker) awaitDurable(idx uint64) error {
	if t.durable.Load() >= idx {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.err == nil && t.durable.Load() < idx {
		if t.written < idx {
			// Never written here (cannot happen: Raft applies what its log holds); do not wait
			// for ever.
			return fmt.Errorf("dledger: entry %d is to be applied but the log holds only %d", idx, t.written)
		}
		t.poke()
		t.cond.Wait()
	}
	return t.err
}

// setDurable records that every index up to idx is on disk (a synchronous write), or, after a
// suffix was deleted, that nothing beyond idx exists.
func (t *syncTracker) setDurable(idx uint64) {
	t.mu.Lock()
	t.written = idx
	t.durable.Store(idx)
	t.cond.Broadcast()
	t.mu.Unlock()
}

// fail records a failed fsync made outside the background rounds: the log is no longer
// trustworthy, and every wait for durability reports it from now on.
func (t *syncTracker) fail(err error) {
	t.mu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.cond.Broadcast()
	t.mu.Unlock()
}

// close syncs what is outstanding and stops the goroutine.
func (t *syncTracker) close() error {
	err := t.drain()
	t.mu.Lock()
	if !t.closed {
		t.closed = true
		close(t.kick)
	}
	t.mu.Unlock()
	<-t.done
	return err
}

// syncer is what the background goroutine fsyncs: a raft-wal file (syncFile) or a log store that
// writes without syncing on request (unsyncedStore).
type syncer interface{ syncNow() error }

// unsyncedStore is a log store that can leave a write's fsync for later (the state machine's
// commitlog, fsm.EntryLog): the leader writes its copy with StoreLogsUnsynced and the background
// goroutine calls SyncLogs; a follower (storeFollowing) writes with StoreLogsUnsynced and syncs
// right after, with SyncLogsBlocking when it has nothing else to run.
type unsyncedStore interface {
	StoreLogsUnsynced(logs []*raft.Log) error
	SyncLogs() error
	SyncLogsBlocking() error
}

// storeSyncer syncs an unsyncedStore for the tracker.
type storeSyncer struct{ s unsyncedStore }

func (s storeSyncer) syncNow() error { return s.s.SyncLogs() }

// syncVFS is raft-wal's file system with Sync left to the tracker while a leader's write runs.
type syncVFS struct {
	types.VFS
	t *syncTracker
}

func (v syncVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	sf := &syncFile{WritableFile: f, t: v.t}
	sf.fresh.Store(true)
	return sf, nil
}

func (v syncVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return &syncFile{WritableFile: f, t: v.t}, nil
}

// syncFile defers its Sync to the tracker while a leader's write runs.
type syncFile struct {
	types.WritableFile
	t     *syncTracker
	fresh atomic.Bool // created and never synced: raft-wal's first Sync also syncs the directory

	mu       sync.Mutex // serialises syncNow and Close
	closed   bool
	closeErr error // the fsync Close made
}

func (f *syncFile) Sync() error {
	if f.t.deferSync(f) {
		return nil
	}
	return f.syncNow()
}

// Close fsyncs the file, then closes it: the tracker may still hold it as dirty (a sealed
// segment's writer is closed as soon as its reads move to a reader, see releasingFiler), and a
// later syncNow of a closed file then reports what this fsync gave. A failed fsync here fails the
// tracker, as a failed background fsync does.
func (f *syncFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	if f.closeErr = f.fsyncLocked(); f.closeErr != nil {
		f.t.fail(fmt.Errorf("dledger: fsync of a raft log file on close: %w", f.closeErr))
	}
	if err := f.WritableFile.Close(); err != nil {
		return err
	}
	return f.closeErr
}

// syncNow fsyncs the file (see fsyncLocked); after Close it reports Close's fsync.
func (f *syncFile) syncNow() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return f.closeErr
	}
	return f.fsyncLocked()
}

// fsyncLocked fsyncs the file through the tracker's io_uring (internal/uring: the goroutine waits
// without holding its processor, so a broker on one processor goes on serving meanwhile), or
// directly where there is none. A new file's first Sync is raft-wal's own, which syncs the
// directory entry as well.
func (f *syncFile) fsyncLocked() error {
	sc, ok := f.WritableFile.(syscall.Conn)
	if f.t.ring == nil || !ok || f.fresh.Load() {
		err := f.WritableFile.Sync()
		if err == nil {
			f.fresh.Store(false)
		}
		return err
	}
	return f.t.ring.FsyncFile(sc, false)
}

// syncMeta is raft-wal's meta store, committed only once the log files it describes are durable
// (a segment sealed by a deferred write must be on disk before the meta data says it is sealed).
type syncMeta struct {
	types.MetaStore
	t *syncTracker
}

func (m syncMeta) CommitState(s types.PersistentState) error {
	if err := m.t.drain(); err != nil {
		return err
	}
	return m.MetaStore.CommitState(s)
}

// leaderLog is the log store wrapper that defers the leader's fsync (see the top of this file).
type leaderLog struct {
	raft.LogStore
	t *syncTracker
}

func newLeaderLog(store raft.LogStore, t *syncTracker) (*leaderLog, error) {
	last, err := store.LastIndex()
	if err != nil {
		return nil, fmt.Errorf("dledger: raft log last index: %w", err)
	}
	t.setDurable(last)
	return &leaderLog{LogStore: store, t: t}, nil
}

// IsMonotonic passes on the store's answer (see logCache.IsMonotonic).
func (l *leaderLog) IsMonotonic() bool {
	m, ok := l.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// follow makes writes deferred while r is the leader. StoreLogs runs on Raft's own goroutine,
// which is also the one that changes the state, so the answer holds for the whole call.
func (t *syncTracker) follow(r *raft.Raft) {
	f := func() bool { return r.State() == raft.Leader }
	t.leading.Store(&f)
}

// leading reports whether this write is the leader's.
func (l *leaderLog) leading() bool {
	f := l.t.leading.Load()
	return f != nil && (*f)()
}

// StoreLog stores one entry.
func (l *leaderLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

// StoreLogs writes the entries; on the leader it leaves the fsync to the background goroutine.
func (l *leaderLog) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	last := logs[len(logs)-1].Index
	if !l.leading() {
		if err := l.t.drain(); err != nil {
			return err
		}
		if err := l.storeFollowing(logs, last); err != nil {
			return err
		}
		l.t.setDurable(last)
		return nil
	}
	t := l.t
	t.mu.Lock()
	if t.err != nil {
		t.mu.Unlock()
		return t.err
	}
	t.deferred = true
	t.mu.Unlock()
	var err error
	if u, ok := l.LogStore.(unsyncedStore); ok {
		err = u.StoreLogsUnsynced(logs)
	} else {
		err = l.LogStore.StoreLogs(logs)
	}
	if err == nil {
		markLogs(t.trace.leaderEntries(), logs, sendtrace.Written)
	}
	t.mu.Lock()
	t.deferred = false
	if err == nil {
		t.written = last
		if u, ok := l.LogStore.(unsyncedStore); ok {
			t.dirty[storeSyncer{u}] = true
		}
	}
	t.mu.Unlock()
	t.poke()
	if err == nil && holdsConfiguration(logs) {
		// hashicorp/raft answers a membership change (AddVoter, RemoveServer) as soon as its
		// entry commits, on the leader loop and not through the state machine, and counts the
		// leader's copy as soon as this returns: write it synchronously, as the serial order
		// would. Membership changes are rare; the fsync also covers the writes before it.
		return t.drain()
	}
	return err
}

// storeFollowing is a follower's write: entries written and synced before StoreLogs returns.
// A store that can sync apart (the commitlog) is written, then synced: on this thread when the
// state machine has nothing left to apply (followerIdle), else through the ring as the leader's
// background sync does. With tracing the trace tells the write from the fsync.
func (l *leaderLog) storeFollowing(logs []*raft.Log, last uint64) error {
	e := l.t.trace.followerEntries()
	e.Mark(last, sendtrace.FollowerStoring)
	u, ok := l.LogStore.(unsyncedStore)
	if !ok {
		if err := l.LogStore.StoreLogs(logs); err != nil {
			return err
		}
		e.Mark(last, sendtrace.FollowerWritten) // the write and the fsync were one call
		e.Mark(last, sendtrace.FollowerSynced)
		return nil
	}
	if err := u.StoreLogsUnsynced(logs); err != nil {
		return err
	}
	e.Mark(last, sendtrace.FollowerWritten)
	sync := u.SyncLogs
	if l.t.followerIdle(logs[0].Index) {
		sync = u.SyncLogsBlocking
	}
	if err := sync(); err != nil {
		return fmt.Errorf("dledger: sync raft entries %d-%d: %w", logs[0].Index, last, err)
	}
	e.Mark(last, sendtrace.FollowerSynced)
	return nil
}

// followerIdle reports whether a follower storing entries from first on has nothing else to run
// while it waits for their fsync: its state machine has applied everything before first but the
// entry just before it, whose commit hashicorp/raft hands to the state machine only after this
// write. Then the fsync is cheapest on this thread (no kernel worker to wake, no wake-up through
// the network poller: a lone producer's follower spent 5-10 % less CPU per message and its sync
// step took 111-114 us at the median against 200-220). With applies pending, the thread's
// processor must pass to the state machine meanwhile, and at 8 sends in flight that hand-off
// cost a follower a third more CPU per message than the ring's parked wait
// (docs/benchmarks.md, "A follower's fsync on its own thread").
func (t *syncTracker) followerIdle(first uint64) bool {
	return t.applied.Load()+2 >= first
}

// holdsConfiguration reports whether logs include a membership change.
func holdsConfiguration(logs []*raft.Log) bool {
	for _, l := range logs {
		if l.Type == raft.LogConfiguration {
			return true
		}
	}
	return false
}

// DeleteRange deletes entries. Raft deletes a prefix after a snapshot (from its snapshot
// goroutine, possibly while the leader writes: raft-wal's meta commit waits for the outstanding
// fsync) and a suffix on a follower whose log conflicts with the leader's or that installs a
// snapshot: that runs after the outstanding fsync, and nothing beyond the cut is written after it.
func (l *leaderLog) DeleteRange(min, max uint64) error {
	t := l.t
	t.mu.Lock()
	// A prefix never reaches the last entry written: Raft keeps at least one trailing entry
	// (TrailingLogs is never 0 here, see Config.setDefaults).
	suffix := max >= t.written
	t.mu.Unlock()
	if suffix {
		if err := t.drain(); err != nil {
			return err
		}
	}
	if err := l.LogStore.DeleteRange(min, max); err != nil {
		return err
	}
	if suffix && min > 0 {
		t.setDurable(min - 1)
	}
	return nil
}

// durableFSM applies an entry only once this node's copy of it is durable.
type durableFSM struct {
	raft.FSM
	t      *syncTracker
	report failReporter       // Config.OnDiskFailure (diskfail.go)
	trace  *sendtrace.Entries // nil unless Config.SendTrace
}

func (f durableFSM) Apply(l *raft.Log) interface{} {
	f.trace.Mark(l.Index, sendtrace.Applying)
	defer f.trace.Mark(l.Index, sendtrace.Applied)
	defer f.t.applied.Store(l.Index)
	if err := f.t.awaitDurable(l.Index); err != nil {
		_ = f.report.check(fmt.Sprintf("fsync of the leader's raft log before applying entry %d", l.Index), err)
		// Applying would let this replica (and the client's acknowledgement) run ahead of a log
		// that may not be on disk: stop, as the state machine does on a failed store.
		panic(fmt.Sprintf("dledger: raft entry %d (term %d) is committed but this node's copy is not durable: %v", l.Index, l.Term, err))
	}
	return f.FSM.Apply(l)
}
