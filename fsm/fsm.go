package fsm

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"rocketraft/message"
	"rocketraft/storage"
	"rocketraft/storage/vfs"
)

// Sentinel errors.
var (
	// ErrStoreBehindMarker: the commitlog is shorter than the applied marker says; the node
	// must be rebuilt from a snapshot (see the package doc).
	ErrStoreBehindMarker = errors.New("fsm: commitlog is behind the applied-index marker")
	// ErrNoMarker: the store holds data but no applied-index marker, so it was not written by
	// this state machine (or the marker was destroyed).
	ErrNoMarker = errors.New("fsm: store has data but no applied-index marker")
	// ErrClosed: the FSM has been closed.
	ErrClosed = errors.New("fsm: closed")
)

// MetaApplier is the broker's metadata tables (topic configs, subscription groups, consumer
// offsets), as the state machine drives them. The broker implements it with broker/meta's
// deterministic ...At methods. Apply, Snapshot and Restore call it one at a time.
type MetaApplier interface {
	// ApplyMeta applies one operation to the in-memory tables. It must be deterministic: use
	// op.Now for every recorded time, never the clock, and leave the same state on every
	// replica whatever it returns. A returned error is the operation's outcome, reported to the
	// proposer (an invalid argument, say); failing to save a table file is not an error here,
	// since the Raft log, not the file, is the source of truth.
	ApplyMeta(op *MetaOp) error
	// SnapshotMeta returns the current tables as files (the config/*.json contents), called
	// under the FSM lock when Raft takes a snapshot. It should be quick (serialize only). The
	// FSM keeps the slices until the snapshot is persisted: they must not change afterwards.
	SnapshotMeta() ([]MetaFile, error)
	// RestoreMeta replaces every table with the contents of files from SnapshotMeta; nil files
	// mean empty tables. It is called by New (nil) and by Restore.
	RestoreMeta(files []MetaFile) error
}

// MetaFile is one metadata table file, named as in the store's config/ directory
// ("topics.json", "subscriptionGroup.json", "consumerOffset.json").
type MetaFile struct {
	Name string
	Data []byte
}

// ApplyResult is what Apply returns (as *ApplyResult) for a KindMessages entry: one outcome per
// append, in order.
type ApplyResult struct {
	Appends []AppendOutcome
}

// AppendOutcome is the result of one append of a KindMessages entry. Err is set only for a
// failure every replica meets identically (storage.ErrMessageIllegal: a malformed record, a
// record without store timestamp, a batch too big for one commitlog file); then nothing of that
// append was stored. Failures that could differ between replicas never surface here: disk usage
// over the ratio is not a failure at apply time (the leader refused before proposing), and a
// write failure (ENOSPC, I/O error) makes Apply panic.
type AppendOutcome struct {
	Results []storage.AppendResult
	Err     error
}

// MetaResult is what Apply returns (as *MetaResult) for a KindMetadata entry: the MetaApplier's
// outcome.
type MetaResult struct {
	Err error
}

// Config configures an FSM.
type Config struct {
	// Store is the store's configuration. The FSM opens the store itself (and reopens it after
	// Restore): Store.StorePathCommitLog must be empty or <root>/commitlog, and FlushDiskType is
	// forced to ASYNC_FLUSH (durability comes from the Raft log). Every replica must use the
	// same mappedFileSizeCommitLog, mapedFileSizeConsumeQueue and maxMessageSize.
	Store storage.Config
	// DataDir holds the FSM's scratch directories (a snapshot being restored, the store it
	// replaces). It must be on the store root's file system; default: the root's parent.
	DataDir string
	// Logger receives the FSM's logs (default: null).
	Logger hclog.Logger
	// Meta applies metadata entries; nil: metadata entries are decoded, checked and ignored.
	Meta MetaApplier
	// Scans, when set, holds what this node's proposer already read of the records it proposed
	// (leaderscans.go); the apply of those very entries uses it instead of reading the records'
	// properties again. Nil: every apply reads them.
	Scans *LeaderScans
	// DrainTimeout bounds how long Restore and Close wait for readers (Acquire) to release the
	// store before closing it; past it they give up and leave it open rather than unmap memory
	// a reader may still touch. Default: DefaultDrainTimeout.
	DrainTimeout time.Duration
	// MarkerSyncInterval is how often the applied marker is made durable (after the commitlog
	// bytes it names): what a node replays after a power loss. Default DefaultMarkerSyncInterval;
	// negative: only at snapshots, topic deletions and Close.
	MarkerSyncInterval time.Duration
	// OnDiverged is called (in its own goroutine) when a digest check finds that this replica
	// applied other entries than its leader (digest.go). The FSM has stopped applying by then.
	OnDiverged func(*Divergence)
	// OnDiskFailure, when set, is called when a write of this replica's store fails (an apply's
	// commitlog write, a flush of the commitlog or the applied marker), before Apply stops the
	// replica (panics) or the marker sync gives up a round. A failed fsync is not retryable, so
	// the caller is expected to take the node out of service; it may not return (the broker
	// exits, broker/diskfail.go).
	OnDiskFailure func(op string, err error)
	// EntryLog makes the commitlog also the Raft log (dLegerLogStore=commitlog): LogStore is the
	// raft.LogStore to give Raft, which writes each entry once, into the commitlog (entrylog.go),
	// and Apply makes an entry's records visible where they lie instead of copying them. The
	// leader's proposals must then carry their queue offsets (Sequencer). Every node of a group
	// must use the same log store.
	EntryLog bool
}

// DefaultMarkerSyncInterval bounds what a node replays after a power loss to about a second of
// entries (measured in the package's benchmarks: no throughput cost at this rate).
const DefaultMarkerSyncInterval = time.Second

// FSM is the Raft state machine: it applies committed entries to the store and the metadata
// tables, exactly once per node across crashes and replays. See the package doc.
type FSM struct {
	cfg      Config
	scfg     storage.Config
	log      hclog.Logger
	fs       vfs.FS
	root     string
	dataDir  string
	staging  string // a snapshot being installed
	replaced string // the store a restore replaced, until removed

	// mu is held by Apply, Snapshot, Restore and Close.
	mu    sync.Mutex
	store *storage.Store
	mk    *marker
	cur   applied // the store's state, as in the marker
	// metaThrough: the metadata tables hold every metadata entry with index <= metaThrough and
	// none after it.
	metaThrough uint64
	closed      bool
	dig         *digester // the running digest of applied entries (digest.go)

	divergence atomic.Pointer[Divergence] // set once a digest check failed
	checked    atomic.Uint64              // the last index a digest check confirmed
	syncStop   chan struct{}              // closed by Close: stops syncLoop
	syncDone   chan struct{}

	appliedIdx atomic.Uint64
	// current is what Acquire hands to readers: f.store with its reader count (storeref.go).
	current      atomic.Pointer[storeRef]
	isClosed     atomic.Bool // closed, for Acquire without the lock
	drainTimeout time.Duration

	// entries is the Raft log in the commitlog and seq the leader's queue-offset sequencer
	// (Config.EntryLog); both nil otherwise.
	entries *EntryLog
	seq     *Sequencer
}

var _ raft.FSM = (*FSM)(nil)

const completeName = "restore-complete"

// flushBurstBytes bounds how much commitlog one flush writes. The Raft log is the durable copy
// of every entry, so the commitlog flush only sets how much a node replays after a power loss;
// but one msync of what a node writes in 500 ms at 24 MB/s (12 MB) queued the Raft fsyncs
// behind it and set the p99 of every send (scripts/cpubench.sh R3, 256 in flight, two
// alternated pairs: p99 50.7/54.8 ms, max 62/67 ms; with this bound 22.5/18.3 and 39/35).
const flushBurstBytes = 1 << 20

// New opens the store of cfg.Store, finishing a restore a crash interrupted, reads the applied
// marker and truncates the commitlog back to it (Raft's replay writes the rest again), and
// resets the metadata tables to empty (Raft's start-up Restore and replay rebuild them).
func New(cfg Config) (*FSM, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	sc := cfg.Store
	if sc.StorePathRootDir == "" {
		return nil, fmt.Errorf("fsm: storePathRootDir is empty")
	}
	root := filepath.Clean(sc.StorePathRootDir)
	if sc.StorePathCommitLog != "" && filepath.Clean(sc.StorePathCommitLog) != filepath.Join(root, "commitlog") {
		return nil, fmt.Errorf("fsm: storePathCommitLog %q: must be empty or under storePathRootDir in DLedger mode (a restore swaps the root as a whole)", sc.StorePathCommitLog)
	}
	sc.StorePathRootDir, sc.StorePathCommitLog = root, ""
	sc.FlushDiskType = storage.AsyncFlush
	sc.FlushCommitLogBytes = flushBurstBytes
	sc.Truncate, sc.TruncateTo = false, 0
	sc.EntryLog = cfg.EntryLog
	if sc.FS == nil {
		sc.FS = vfs.OS{}
	}
	if sc.Logger == nil {
		sc.Logger = cfg.Logger
	}
	dataDir := cfg.DataDir
	if dataDir == "" {
		dataDir = filepath.Dir(root)
	}
	base := filepath.Base(root)
	f := &FSM{
		cfg: cfg, scfg: sc, log: cfg.Logger.Named("fsm"), fs: sc.FS, root: root, dataDir: dataDir,
		dig: newDigester(), syncStop: make(chan struct{}), syncDone: make(chan struct{}),
		staging:      filepath.Join(dataDir, base+".restore"),
		replaced:     filepath.Join(dataDir, base+".replaced"),
		drainTimeout: cfg.DrainTimeout,
	}
	if f.drainTimeout <= 0 {
		f.drainTimeout = DefaultDrainTimeout
	}
	if cfg.EntryLog {
		f.entries = newEntryLog(f.log, sc.MappedFileSizeCommitLog)
		f.seq = NewSequencer(f.nextQueueOffset)
		// room for the entry header record and the end-of-file marker
		f.seq.maxEntry = int(sc.MappedFileSizeCommitLog) - 4096
	}
	if err := f.fs.MkdirAll(dataDir); err != nil {
		return nil, fmt.Errorf("fsm: %w", err)
	}
	if err := checkNotDiverged(f.fs, dataDir); err != nil {
		return nil, err
	}
	if err := f.finishSwap(); err != nil {
		return nil, err
	}
	if err := f.open(); err != nil {
		return nil, err
	}
	if cfg.Meta != nil {
		if err := cfg.Meta.RestoreMeta(nil); err != nil {
			f.closeStore()
			return nil, fmt.Errorf("fsm: reset metadata: %w", err)
		}
	}
	f.publish(f.store)
	f.log.Info("state machine open", "appliedIndex", f.cur.Index, "term", f.cur.Term, "commitLogEnd", f.cur.End, "digestKnown", f.dig.known)
	go f.syncLoop()
	return f, nil
}

// finishSwap completes or discards a restore a crash interrupted: if the root is missing, the
// crash came between the two renames and the staged store (complete, or the root would not
// have been moved) becomes the root. Leftovers are removed.
func (f *FSM) finishSwap() error {
	_, rootErr := f.fs.Stat(f.root)
	_, doneErr := f.fs.Stat(filepath.Join(f.staging, completeName))
	if errors.Is(rootErr, fs.ErrNotExist) && doneErr == nil {
		f.log.Warn("finishing an interrupted snapshot restore", "from", f.staging)
		if err := f.fs.Rename(f.staging, f.root); err != nil {
			return fmt.Errorf("fsm: finish restore: %w", err)
		}
	}
	for _, p := range []string{f.staging, filepath.Join(f.root, completeName), f.replaced} {
		if err := f.removeIfExists(p); err != nil {
			return err
		}
	}
	return nil
}

// removeIfExists removes a file or directory tree if it is there.
func (f *FSM) removeIfExists(p string) error {
	if _, err := f.fs.Stat(p); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := f.fs.Remove(p); err != nil {
		return fmt.Errorf("fsm: remove %s: %w", p, err)
	}
	return nil
}

// open opens the marker and the store, truncated to the marker's end. A store that no longer
// reaches the marker's end (it lost bytes it had synced: the marker is only ever written after
// the bytes it names are durable) restarts from the marker's floor, the latest state a full store
// flush made durable before a snapshot or a topic deletion named it: the store is truncated
// there, and Raft's log, which holds every entry after the latest snapshot, replays the rest.
func (f *FSM) open() error {
	if err := f.fs.MkdirAll(f.root); err != nil {
		return fmt.Errorf("fsm: %w", err)
	}
	mk, ms, found, err := openMarker(f.fs, f.root)
	if err != nil {
		return err
	}
	a := ms.Cur
	cfg := f.scfg
	if found {
		cfg.Truncate, cfg.TruncateTo = true, a.End
	}
	st, err := storage.Open(cfg)
	if err != nil && errors.Is(err, storage.ErrTruncateBeyondEnd) && mk.written {
		f.log.Warn("the commitlog is behind the applied marker (it lost bytes it had synced); restarting from the marker's floor and replaying the Raft log from there",
			"markerIndex", a.Index, "markerEnd", a.End, "floorIndex", ms.Floor.Index, "floorEnd", ms.Floor.End, "error", err)
		cfg.TruncateTo = ms.Floor.End
		if st, err = storage.Open(cfg); err == nil {
			a = ms.Floor
			ms = markerState{Cur: a, Floor: a, DigestKnown: ms.DigestKnown}
			if err = mk.rewind(ms); err != nil {
				st.Close()
			}
		}
	}
	if err != nil {
		mk.close()
		if errors.Is(err, storage.ErrTruncateBeyondEnd) {
			return fmt.Errorf("%w: entry %d left the commitlog at offset %d (latest durable floor: entry %d at %d), but %w. The disk lost bytes that were synced, so this node cannot tell which entries its store holds. Rebuild it from its group: remove it with mqadmin removePeer, delete its data directory (%s and the Raft state next to it), start it with dLegerJoin=true and add it back with mqadmin addPeer; the leader sends it a snapshot",
				ErrStoreBehindMarker, a.Index, a.End, ms.Floor.Index, ms.Floor.End, err, filepath.Dir(f.root))
		}
		return fmt.Errorf("fsm: %w", err)
	}
	if !found {
		if end := st.CommitLogMaxOffset(); end != 0 {
			st.Close()
			mk.close()
			return fmt.Errorf("%w: %s ends at %d", ErrNoMarker, f.root, end)
		}
		a = applied{}
		ms = markerState{DigestKnown: true}
		if err := mk.writeSync(ms); err != nil {
			st.Close()
			mk.close()
			return err
		}
	}
	if f.entries != nil {
		if err := f.entries.attach(st); err != nil {
			f.entries.detach()
			st.Close()
			mk.close()
			return err
		}
	}
	f.store, f.mk, f.cur = st, mk, a
	f.dig.reset(a.Index, a.Digest, ms.DigestKnown)
	f.appliedIdx.Store(a.Index)
	return nil
}

// closeStore closes the store, then syncs and closes the marker: after the store's final flush
// the marker is never ahead of the durable commitlog. Readers must have been drained
// (drainReaders) if the store was ever published.
func (f *FSM) closeStore() error {
	var errs []error
	flushed := false
	if f.entries != nil {
		f.entries.detach()
	}
	if f.store != nil {
		err := f.store.Close()
		flushed = err == nil
		errs = append(errs, err)
		f.store = nil
	}
	if f.mk != nil {
		if flushed && f.divergence.Load() == nil {
			errs = append(errs, f.mk.writeSync(markerState{Cur: f.cur, DigestKnown: f.dig.known}))
		}
		errs = append(errs, f.mk.close())
		f.mk = nil
	}
	return errors.Join(errs...)
}

// AppliedIndex is the Raft index of the last entry whose effects are in the store (the index
// in the marker). Entries at or below it are skipped when Raft replays them.
func (f *FSM) AppliedIndex() uint64 { return f.appliedIdx.Load() }

// Close waits for readers to release the store (see Acquire), then closes it (flushing it) and
// the marker. Apply afterwards applies nothing (an error); Acquire fails with ErrClosed. If readers
// still hold the store after DrainTimeout, it is left open and mapped (the process is expected
// to exit; recovery at the next start truncates to the marker) and the error says so.
func (f *FSM) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	f.isClosed.Store(true)
	close(f.syncStop)
	f.mu.Unlock()
	<-f.syncDone // it takes f.mu
	f.mu.Lock()
	if err := f.drainReaders("close"); err != nil {
		f.publish(nil)
		return fmt.Errorf("fsm close: store left open: %w", err)
	}
	err := f.closeStore()
	f.publish(nil)
	return err
}

// Apply applies one committed entry. It returns *ApplyResult for KindMessages, *MetaResult for
// KindMetadata, and nil for an entry already applied (a replay after a restart; no client waits
// for it) or one that is not a LogCommand. It panics on an entry it cannot decode, of an unknown
// kind, or when the store fails in a way that could make this replica differ from the others:
// a state machine must stop rather than skip an entry. After Close it applies nothing and
// returns an error wrapping ErrClosed.
func (f *FSM) Apply(l *raft.Log) interface{} {
	if l.Type != raft.LogCommand {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		// Raft outlived Close (dledger's Shutdown stops waiting for it, dledger/shutdown.go):
		// the entry is not applied here, and the next start replays it from the Raft log.
		return fmt.Errorf("fsm: apply raft entry %d after close: %w", l.Index, ErrClosed)
	}
	if f.store == nil {
		panic(fmt.Sprintf("fsm: apply raft entry %d: the state machine has no store (closed, or a restore failed)", l.Index))
	}
	if len(l.Data) == 0 {
		panic(fmt.Sprintf("fsm: raft entry %d (term %d) is empty; a state machine must not skip an entry", l.Index, l.Term))
	}
	if f.divergence.Load() != nil {
		return nil // diverged: this replica applies nothing more (digest.go)
	}
	f.dig.add(l)
	var res interface{}
	switch l.Data[0] {
	case KindMessages:
		res = f.applyMessages(l)
	case KindMetadata:
		res = f.applyMetadata(l)
	case KindScheduleDeliver: // delay scheduler step (broker/schedule)
		res = f.applySchedule(l)
	case KindDigestCheck: // digest.go
		res = f.applyDigestCheck(l)
	default:
		panic(fmt.Sprintf("fsm: raft entry %d (term %d) has unknown kind %d; a state machine must not skip an entry (was it written by a newer version?)", l.Index, l.Term, l.Data[0]))
	}
	f.metaThrough = max(f.metaThrough, l.Index)
	return res
}

func (f *FSM) applyMessages(l *raft.Log) interface{} {
	if l.Index <= f.cur.Index {
		return nil
	}
	var res *ApplyResult
	if f.entries != nil {
		res = &ApplyResult{Appends: f.dispatchMessages(l)}
	} else {
		appends := mustDecodeMessages(l)
		res = &ApplyResult{Appends: f.appendAll(l, appends, f.cfg.Scans.take(l.Data, recordCounts(appends)))}
	}
	f.advance(l, false)
	return res
}

// mustDecodeMessages decodes message entry l or stops the replica: skipping an entry would
// diverge from the others.
func mustDecodeMessages(l *raft.Log) [][][]byte {
	appends, err := DecodeMessages(l.Data)
	if err != nil {
		panic(fmt.Sprintf("fsm: raft entry %d (term %d): %v; a state machine must not skip an entry", l.Index, l.Term, err))
	}
	return appends
}

// recordCounts is how many records each append holds.
func recordCounts(appends [][][]byte) []int {
	counts := make([]int, len(appends))
	for i, recs := range appends {
		counts[i] = len(recs)
	}
	return counts
}

// appendAll stores the appends of entry l, all in one store call (one write per commitlog
// file instead of a page fault per fresh page of the mapping). scans, when not nil, is the
// proposer's read of the records' properties, one list per append (LeaderScans). Only outcomes
// every replica reaches identically are returned; a local write failure stops the replica.
func (f *FSM) appendAll(l *raft.Log, appends [][][]byte, scans [][]storage.Scanned) []AppendOutcome {
	outs := make([]AppendOutcome, len(appends))
	batch := make([][][]byte, 0, len(appends))
	orig := make([]int, 0, len(appends)) // batch index -> appends index
	var batchScans [][]storage.Scanned
	if scans != nil {
		batchScans = make([][]storage.Scanned, 0, len(appends))
	}
	for i, recs := range appends {
		if err := checkStamped(i, recs); err != nil {
			outs[i].Err = err
			continue
		}
		batch = append(batch, recs)
		orig = append(orig, i)
		if scans != nil {
			batchScans = append(batchScans, scans[i])
		}
	}
	if len(batch) == 0 {
		return outs
	}
	stored, err := f.store.AppendReplicatedBatchScanned(batch, batchScans)
	if err != nil {
		// A local write failure (ENOSPC creating a file, an I/O error, a store poisoned by an
		// earlier failed sync): skipping the entry would diverge from the other replicas,
		// retrying blindly could write it twice. Stop before the marker and AppliedIndex move
		// past it; a restart truncates to the marker and Raft replays from there.
		at := orig[0]
		var be *storage.BatchWriteError
		if errors.As(err, &be) && be.At >= 0 && be.At < len(orig) {
			at, err = orig[be.At], be.Err
		}
		if f.cfg.OnDiskFailure != nil {
			f.cfg.OnDiskFailure(fmt.Sprintf("commitlog write applying raft entry %d", l.Index), err)
		}
		f.log.Error("raft apply failed to write to the store; stopping this replica", "index", l.Index, "term", l.Term, "append", at, "error", err)
		panic(fmt.Sprintf("fsm: raft entry %d (term %d) append %d: store write failed: %v; this replica cannot continue without diverging (free space or fix the disk, then restart it: recovery truncates to the applied marker and Raft replays)", l.Index, l.Term, at, err))
	}
	j := 0
	for i := range outs {
		if outs[i].Err != nil {
			continue
		}
		// o.Err is nil or ErrMessageIllegal, which every replica meets alike.
		outs[i] = AppendOutcome{Results: stored[j].Results, Err: stored[j].Err}
		j++
	}
	return outs
}

// checkStamped refuses an append whose records do not parse or carry no store timestamp: the
// leader stamps every record, or replicas would stamp their own clocks and differ.
func checkStamped(i int, recs [][]byte) error {
	for j, r := range recs {
		v, err := message.ParseView(r)
		if err == nil && v.StoreTimestamp() == 0 {
			err = errors.New("STORETIMESTAMP is 0 (the leader must stamp it, or replicas would differ)")
		}
		if err != nil {
			return fmt.Errorf("fsm: append %d record %d: %w: %w", i, j, storage.ErrMessageIllegal, err)
		}
	}
	return nil
}

// advance records l as applied to the store, in memory; syncLoop makes it durable later.
func (f *FSM) advance(l *raft.Log, meta bool) {
	f.cur.Index, f.cur.Term = l.Index, l.Term
	f.cur.End = f.store.CommitLogMaxOffset()
	f.cur.Digest = f.dig.sum
	if meta {
		f.cur.MetaIndex = l.Index
	}
	f.appliedIdx.Store(l.Index)
}

func (f *FSM) applyMetadata(l *raft.Log) interface{} {
	op, err := DecodeMetadata(l.Data)
	if err != nil {
		panic(fmt.Sprintf("fsm: raft entry %d (term %d): %v; a state machine must not skip an entry", l.Index, l.Term, err))
	}
	storeDone, metaDone := l.Index <= f.cur.Index, l.Index <= f.metaThrough || f.cfg.Meta == nil
	if storeDone && metaDone {
		return nil
	}
	if !storeDone && op.Op == OpDeleteTopic {
		f.deleteTopic(l, op.Name)
	}
	res := &MetaResult{}
	if !metaDone && f.cfg.Meta != nil {
		res.Err = f.cfg.Meta.ApplyMeta(op)
	}
	if !storeDone {
		f.advance(l, true)
		if op.Op == OpDeleteTopic {
			if err := f.mk.writeSync(f.floorHere()); err != nil {
				panic(fmt.Sprintf("fsm: raft entry %d: sync marker after deleting topic %s: %v", l.Index, op.Name, err))
			}
		}
	}
	return res
}

// deleteTopic drops a topic's consume queues. It is the one store change a truncation cannot
// undo, so the marker is made durable (after the commitlog) first: a later truncation never
// goes back before the deletion.
func (f *FSM) deleteTopic(l *raft.Log, topic string) {
	if err := f.store.Flush(); err != nil {
		panic(fmt.Sprintf("fsm: raft entry %d: flush before deleting topic %s: %v", l.Index, topic, err))
	}
	if err := f.mk.writeSync(f.floorHere()); err != nil {
		panic(fmt.Sprintf("fsm: raft entry %d: sync marker before deleting topic %s: %v", l.Index, topic, err))
	}
	if err := f.store.DeleteTopic(topic); err != nil {
		panic(fmt.Sprintf("fsm: raft entry %d: delete topic %s: %v", l.Index, topic, err))
	}
}

// floorHere is the marker state for "the whole store is durable as of f.cur" (a flush just
// covered it). Hold f.mu.
func (f *FSM) floorHere() markerState {
	return markerState{Cur: f.cur, Floor: f.cur, DigestKnown: f.dig.known}
}
