package dledger

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	walTypes "github.com/hashicorp/raft-wal/types"

	"rocketraft/storage/vfs"
)

// Names inside Config.DataDir.
const (
	stableFile   = "raft-stable.db" // raft-boltdb/v2: current term, vote
	boltLogFile  = "raft-log.db"    // raft-boltdb/v2 log store (LogStore=bolt)
	walDir       = "raft-wal"       // raft-wal segments and meta (LogStore=wal)
	snapshotsDir = "snapshots"      // raft.FileSnapshotStore adds this itself
	// entryLogMark says the Raft log lives in the state machine's commitlog (LogStore=commitlog),
	// which leaves nothing else in this directory to tell it by: an empty file.
	entryLogMark = "raft-log-in-commitlog"
)

// storeFiles is what each log store leaves in Config.DataDir, by which a directory tells the
// store it was created with.
var storeFiles = []struct{ file, store string }{{walDir, LogStoreWAL}, {boltLogFile, LogStoreBolt}, {entryLogMark, LogStoreCommitLog}}

// StoreOnDisk names the Raft log store whose files dir (Config.DataDir) holds: LogStoreWAL,
// LogStoreBolt or LogStoreCommitLog, or "" when it holds none (a node never started, or a
// commitlog-store node from before the mark existed). A broker left to choose keeps a node on
// the store it was created with, since a node reopened on another store would find an empty
// log beside its term and its applied state.
func StoreOnDisk(dir string) string {
	store, _ := heldStore(dir)
	return store
}

// heldStore is StoreOnDisk with the file that tells it.
func heldStore(dir string) (store, file string) {
	for _, k := range storeFiles {
		if _, err := os.Stat(filepath.Join(dir, k.file)); err == nil {
			return k.store, k.file
		}
	}
	return "", ""
}

// refuseOtherStore refuses to open kind in dir when dir holds another store's log.
func refuseOtherStore(dir, kind string) error {
	if held, file := heldStore(dir); held != "" && held != kind {
		return keyErr("dLegerLogStore", "%q but %s already holds %s (the %s store's)", kind, dir, file, held)
	}
	return nil
}

// markEntryLog leaves entryLogMark in dir (synced with its directory), once.
func markEntryLog(dir string) error {
	p := filepath.Join(dir, entryLogMark)
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	if err := (vfs.OS{}).WriteFile(p, nil); err != nil {
		return fmt.Errorf("dledger: mark the raft log as the commitlog's: %w", err)
	}
	return nil
}

// openStable opens the stable store (always bbolt, fsync on).
func openStable(dir string) (*raftboltdb.BoltStore, error) {
	return raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, stableFile)})
}

// openLogStore opens the chosen log store and refuses a DataDir that holds the other kind, which
// would otherwise look like an empty log next to a non-empty stable store. The closer closes the
// underlying store; the raft.LogStore is wrapped in a logCache of cacheSize entries and cacheBytes
// bytes unless cacheSize < 0. With a tracker (raft-wal only) the leader's writes are fsynced in
// the background (leaderwrite.go); the closer then finishes those fsyncs first.
func openLogStore(dir, kind string, cacheSize, cacheBytes, segmentSize int, t *syncTracker, logger hclog.Logger) (raft.LogStore, io.Closer, error) {
	if err := refuseOtherStore(dir, kind); err != nil {
		return nil, nil, err
	}
	var (
		store raft.LogStore
		c     io.Closer
	)
	switch kind {
	case LogStoreWAL:
		p := filepath.Join(dir, walDir)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, nil, err
		}
		// raft-wal (v0.4.0 and v0.4.1)'s Close leaves its meta database open (and flock'ed), so a reopen in
		// the same process would block: we own the meta store and close it ourselves.
		meta := &metadb.BoltMetaDB{}
		var (
			metaStore walTypes.MetaStore = meta
			vfs       walTypes.VFS       = walfs.New()
		)
		if t != nil {
			metaStore, vfs = syncMeta{MetaStore: meta, t: t}, syncVFS{VFS: t.base, t: t}
		}
		w, err := wal.Open(p, wal.WithLogger(logger.Named("wal")), wal.WithMetaStore(metaStore),
			wal.WithSegmentSize(segmentSize),
			wal.WithSegmentFiler(releasingFiler{SegmentFiler: segment.NewFiler(p, vfs), logger: logger.Named("wal")}))
		if err != nil {
			meta.Close()
			return nil, nil, fmt.Errorf("dledger: open raft-wal %s: %w", p, err)
		}
		store, c = w, closers{w, meta}
		if t != nil {
			ll, err := newLeaderLog(w, t)
			if err != nil {
				c.Close()
				return nil, nil, err
			}
			store, c = ll, closers{closerFunc(t.close), w, meta}
		}
	case LogStoreBolt:
		b, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, boltLogFile)})
		if err != nil {
			return nil, nil, fmt.Errorf("dledger: open bolt log: %w", err)
		}
		store, c = b, b
	default:
		return nil, nil, keyErr("dLegerLogStore", "unknown %q", kind)
	}
	return withCache(store, c, cacheSize, cacheBytes)
}

// withCache puts the log cache in front of store (cacheSize < 0: none); on failure it closes c.
func withCache(store raft.LogStore, c io.Closer, cacheSize, cacheBytes int) (raft.LogStore, io.Closer, error) {
	if cacheSize < 0 {
		return store, c, nil
	}
	cached, err := newLogCache(store, cacheSize, cacheBytes)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return cached, c, nil
}

// closerFunc adapts a function to io.Closer.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// closers closes each in order and joins the errors.
type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
