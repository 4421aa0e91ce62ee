package dledger

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"rocketraft/internal/uring"
)

// Node is one member of a Raft group: hashicorp/raft with a TCP transport, a bbolt stable store, the
// configured log store behind a cache of its newest entries, and file snapshots.
type Node struct {
	cfg     Config
	peerLog *peerLog // raft's logger; closed at shutdown
	raft    *raft.Raft
	trans   *netTransport
	logs    io.Closer
	cache   *logCache // nil when disabled (LogCacheSize < 0)
	stab    *raftboltdb.BoltStore
	// fsmApplied is the state machine's own applied index when it keeps one across restarts
	// (status.go reports it: Raft's own indexes start at the last snapshot after a restart).
	fsmApplied appliedIndexer
	// guard refuses entries from a leader on the other kind of log store (Status reports it).
	guard storeGuard

	notify      chan bool     // raft.Config.NotifyCh
	changes     chan bool     // LeaderChanges, latest value wins
	leaderReady atomic.Bool   // leader and Barrier done
	stop        chan struct{} // closed by Shutdown
	observerWG  sync.WaitGroup
	lstats      leaderStats    // leaderstats.go
	followers   followerLog    // followers.go: what each follower last reported
	leaderObs   *raft.Observer // feeds watchLeaderChanges
	voteObs     *raft.Observer // noteVoteRequest (fast failover)
	logStore    raft.LogStore  // what Raft reads and writes
	// behindCandidateTerm is the highest term in which a candidate asked for this node's vote
	// with a log behind this node's (liveness.go).
	behindCandidateTerm atomic.Uint64
	// trace is nil unless Config.SendTrace (sendtrace.go).
	trace *nodeTrace
	// proposeMu orders Config.Sequencer's stamps with Raft's hand-offs (propose.go).
	proposeMu sync.Mutex

	shutdownOnce sync.Once
	shutdownErr  error
}

// Open starts a node. With no existing state in cfg.DataDir it bootstraps the configuration from
// cfg.Peers (all voters; unless cfg.Join); with existing state it restarts from it and cfg.Peers
// is ignored (membership lives in the log).
func Open(cfg Config, fsm raft.FSM) (n *Node, err error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, err
	}
	self, _ := cfg.self()
	n = &Node{
		cfg:     cfg,
		notify:  make(chan bool, 8),
		changes: make(chan bool, 1),
		stop:    make(chan struct{}),
	}
	var closers []io.Closer
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i].Close()
			}
			if cfg.Listener != nil && n.trans == nil {
				cfg.Listener.Close()
			}
		}
	}()
	if err = os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	if n.stab, err = openStable(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("dledger: open stable store: %w", err)
	}
	closers = append(closers, n.stab)
	var (
		logs    raft.LogStore
		tracker *syncTracker // raft-wal: writes deferred once it follows Raft (leaderwrite.go)
	)
	if cfg.SendTrace {
		n.trace = newNodeTrace()
	}
	if cfg.LogStore == LogStoreWAL || cfg.LogStore == LogStoreCommitLog {
		tracker = newSyncTracker(cfg.walVFS)
		tracker.trace = n.trace
		if _, err := uring.Shared(); err != nil {
			cfg.Logger.Info("raft log fsyncs run directly, holding a Go processor while they wait", "reason", err)
		}
	}
	if cfg.LogStore == LogStoreCommitLog {
		logs, n.logs, err = openEntryLog(cfg.DataDir, cfg.EntryLog, cfg.LogCacheSize, cfg.LogCacheBytes, tracker)
	} else {
		logs, n.logs, err = openLogStore(cfg.DataDir, cfg.LogStore, cfg.LogCacheSize, cfg.LogCacheBytes, cfg.WALSegmentSize, tracker, cfg.Logger)
	}
	if err != nil {
		if tracker != nil {
			tracker.close()
		}
		return nil, err
	}
	closers = append(closers, n.logs)
	n.cache, _ = logs.(*logCache)
	n.fsmApplied, _ = fsm.(appliedIndexer)
	var stable raft.StableStore = n.stab
	if cfg.OnDiskFailure != nil {
		logs = reportingLogStore{LogStore: logs, report: cfg.OnDiskFailure}
		stable = reportingStable{StableStore: n.stab, report: cfg.OnDiskFailure}
	}
	n.guard = newStoreGuard(logs, cfg.LogStore == LogStoreCommitLog, cfg.Logger)
	logs = n.guard
	files, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, DefaultSnapshotRetain, cfg.Logger.Named("snapshot"))
	if err != nil {
		return nil, fmt.Errorf("dledger: snapshot store: %w", err)
	}
	var snaps raft.SnapshotStore = files
	if e, ok := fsm.(SnapshotExpander); ok {
		snaps = expandingSnapshots{SnapshotStore: files, fsm: e}
	}
	if n.trans, err = newTransport(self.Addr, cfg.Listener, cfg.Logger, cfg.SelfID, cfg.PeerSecret); err != nil {
		return nil, fmt.Errorf("dledger: listen on %s: %w", self.Addr, err)
	}
	closers = append(closers, n.trans)
	n.trans.in.trace.Store(n.trace)

	rc := n.raftConfig()
	if err = raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("dledger: %w", err)
	}
	existing, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return nil, fmt.Errorf("dledger: inspect state: %w", err)
	}
	if !existing && !cfg.Join {
		if err = raft.BootstrapCluster(rc, logs, stable, snaps, n.trans, bootstrapConfiguration(cfg.Peers)); err != nil {
			return nil, fmt.Errorf("dledger: bootstrap: %w", err)
		}
	}
	trans := raftTransport{netTransport: n.trans, fastPath: cfg.heartbeatFastPath, onHeartbeat: cfg.onHeartbeat, log: cfg.Logger.Named("transport"),
		followers: &n.followers, trace: n.trace.leaderEntries(), stop: n.stop, lastIndex: logs.LastIndex, batch: uint64(rc.MaxAppendEntries)}
	parallel := tracker != nil && !cfg.SerialLeaderWrite
	if parallel {
		fsm, trans.t = durableFSM{FSM: fsm, t: tracker, report: cfg.OnDiskFailure, trace: n.trace.leaderEntries()}, tracker
	}
	// NewRaft's scan for configuration entries reads the commitlog store's entries from their
	// headers (startupscan.go).
	var headers headerLogReader
	if cfg.LogStore == LogStoreCommitLog {
		headers, _ = cfg.EntryLog.(headerLogReader)
	}
	var newestSnap uint64
	if metas, err := snaps.List(); err == nil && len(metas) > 0 {
		newestSnap = metas[0].Index // newest first
	}
	startLogs, err := newStartupLogs(n.guard, headers, newestSnap)
	if err != nil {
		return nil, fmt.Errorf("dledger: open the raft log: %w", err)
	}
	n.raft, err = raft.NewRaft(rc, fsm, startLogs, stable, snaps, trans)
	startLogs.stop()
	if err != nil {
		return nil, fmt.Errorf("dledger: start raft: %w", err)
	}
	n.trans.in.gate.attach(n.raft)
	if parallel {
		tracker.follow(n.raft)
	}
	if existing {
		n.warnStoredPeers()
	}
	n.observerWG.Add(1)
	go n.observe()
	obsCh := make(chan raft.Observation, 16)
	n.leaderObs = raft.NewObserver(obsCh, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(n.leaderObs)
	n.observerWG.Add(1)
	go n.watchLeaderChanges(obsCh)
	if !cfg.NoFastFailover {
		n.logStore = logs
		n.voteObs = raft.NewObserver(make(chan raft.Observation, 1), false, n.noteVoteRequest)
		n.raft.RegisterObserver(n.voteObs)
		n.observerWG.Add(1)
		go n.watchLeader()
	}
	return n, nil
}

// openEntryLog puts the state machine's entry log (LogStoreCommitLog) behind the log cache like
// openLogStore's stores, refusing a DataDir that holds another log store's files. The entry log
// is the state machine's to close: the closer returned only stops t. With t, the leader writes its
// copy unsynced and t syncs it in the background (leaderwrite.go), as with raft-wal.
func openEntryLog(dir string, entries raft.LogStore, cacheSize, cacheBytes int, t *syncTracker) (raft.LogStore, io.Closer, error) {
	if err := refuseOtherStore(dir, LogStoreCommitLog); err != nil {
		return nil, nil, err
	}
	if err := markEntryLog(dir); err != nil {
		return nil, nil, err
	}
	store := entries
	var c io.Closer = closerFunc(func() error { return nil })
	if t != nil {
		ll, err := newLeaderLog(entries, t)
		if err != nil {
			return nil, nil, err
		}
		store, c = ll, closerFunc(t.close)
	}
	return withCache(store, c, cacheSize, cacheBytes)
}

func (n *Node) raftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(n.cfg.SelfID)
	c.HeartbeatTimeout = n.cfg.HeartbeatTimeout
	c.ElectionTimeout = n.cfg.ElectionTimeout
	c.LeaderLeaseTimeout = n.cfg.LeaderLeaseTimeout
	c.CommitTimeout = n.cfg.CommitTimeout
	c.SnapshotInterval = n.cfg.SnapshotInterval
	c.SnapshotThreshold = n.cfg.SnapshotThreshold
	c.TrailingLogs = n.cfg.TrailingLogs
	c.BatchApplyCh = true // entries in flight together share one log write and fsync
	c.NotifyCh = n.notify
	// Raft's repeated per-peer failure lines are collapsed (peerlog.go).
	n.peerLog = newPeerLog(n.cfg.Logger.Named("raft"))
	c.Logger = n.peerLog
	c.NoLegacyTelemetry = true
	// A leader removed from the configuration steps down and stays up as a non-member (as a
	// removed follower does) instead of shutting Raft down under the broker: the broker sees
	// Membership report it removed and stops registering (see broker/membership.go).
	c.ShutdownOnRemove = false
	return c
}

func bootstrapConfiguration(peers []Peer) raft.Configuration {
	var c raft.Configuration
	for _, p := range peers {
		c.Servers = append(c.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
	}
	return c
}

// Apply appends data as one Raft entry and returns the FSM's response once the entry is committed
// and applied on this node. If the FSM's response is an error, Apply returns it as the error. Not
// leader: a *NotLeaderError (errors.Is ErrNotLeader). If ctx ends first Apply returns ctx.Err(),
// but the entry may still commit. With Config.Sequencer, data is stamped in place first
// (propose.go).
func (n *Node) Apply(ctx context.Context, data []byte) (any, error) {
	f := n.propose(data, enqueueTimeout(ctx))
	if err := wait(ctx, f); err != nil {
		return nil, n.translate(err)
	}
	resp := f.Response()
	if err, ok := resp.(error); ok {
		return nil, err
	}
	return resp, nil
}

// enqueueTimeout bounds raft.Apply's hand-off to the Raft goroutine by ctx's deadline.
func enqueueTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		if t := time.Until(d); t > 0 {
			return t
		}
		return time.Nanosecond
	}
	return 0
}

// IsLeader reports whether Raft is in the leader state now. The broker should switch roles on
// LeaderChanges instead, which also waits until everything committed is applied.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the current leader's id and address, empty when none is known.
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// Raft is an escape hatch for tests and status pages.
func (n *Node) Raft() *raft.Raft { return n.raft }

// ID returns this node's id (dLegerSelfId).
func (n *Node) ID() string { return n.cfg.SelfID }

// Addr returns this node's Raft transport address as configured in dLegerPeers.
func (n *Node) Addr() string { return string(n.trans.LocalAddr()) }
