package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"rocketraft/config"
	"rocketraft/dledger"
	"rocketraft/fsm"
	"rocketraft/internal/sendtrace"
	"rocketraft/storage"
)

// appendBatcher is the group-commit batcher the broker submits sends through: one item per send
// (a batch send's records stay one item, so they stay contiguous), one result per item.
type appendBatcher = dledger.Batcher[*proposal, []storage.AppendResult]

// appendSlot is that batcher's record of one queued proposal, kept in its appendCall.
type appendSlot = dledger.Slot[*proposal, []storage.AppendResult]

// proposal is one send's records on their way into a Raft entry, with what the send path
// already read of their properties (nil: nothing), which reaches this node's own apply of the
// entry through fsm.LeaderScans and never the entry itself.
type proposal struct {
	records [][]byte
	scans   []storage.Scanned
	// entry is the encoded entry the records went into, set (by the batcher's goroutine, before
	// the entry is proposed) only when scans is: the key under which LeaderScans holds them
	// until the send's outcome Drops it.
	entry []byte
	// trace is the send's trace when sendTraceEnable is set (package sendtrace), else nil.
	trace *sendtrace.Trace
	// call is the appendCall holding this proposal (AppendCall), nil for Append's.
	call *appendCall
}

// raftGroup is DLedger mode's replicated CommitLog: the broker's Raft node, the state machine
// that owns the store, and the batcher in front of Raft. The broker never writes to the store
// itself in this mode (fsm/doc.go); it only reads through acquire.
type raftGroup struct {
	fsm     *fsm.FSM
	node    *dledger.Node
	batcher *appendBatcher
	// scans hands the sends' reads of their properties to this node's apply (fsm.LeaderScans).
	scans *fsm.LeaderScans
	// sends keeps the completed traces of the sends this node led (nil unless sendTraceEnable).
	sends  *sendtrace.Collector
	selfID string
	group  string // dLegerGroup, for messages
	// readCtx bounds readers waiting in acquire for a restore's new store; close cancels it.
	readCtx   context.Context
	stopReads context.CancelFunc
	// index is dLegerSelfId's 0-based position in dLegerPeers: a follower registers as
	// brokerId index+1, so ids are stable and unique per node.
	index int
	// peers is this node's dLegerPeers as configured (a joining node's list includes itself
	// and may be longer than the original members'); preferredLeaderId's position in it is
	// where the leader looks for that node in the route.
	peers []dledger.Peer
	// removed is set while this node has been removed from the group's configuration (see
	// membership.go); it then registers nothing.
	removed atomic.Bool
	// diskFailed: a write to the data directory failed; the node is leaving (diskfail.go).
	diskFailed atomic.Bool
}

var _ CommitLog = (*raftGroup)(nil)

// raftDataDir is where a node keeps its Raft state and its replicated store, under
// storePathRootDir, so one root can never be opened in both modes by mistake.
func raftDataDir(root, selfID string) string {
	return filepath.Join(root, "dledger-"+selfID)
}

// raftLogStore is the Raft log store a node opens, and why: dLegerLogStore when set (dledger
// refuses it if the data directory raftDir holds another store's log), else the store raftDir
// already holds, else the commitlog store, the one measured best (each message written once per
// node, docs/write-path.md). Every node of a group must use the same store (a leader's entries are
// stamped for the commitlog store or not, fsm/sequencer.go), and an empty directory cannot tell
// which store its group uses: a node that replaces a member of a group created on raft-wal must
// say dLegerLogStore=wal, or it refuses that leader's entries and says so (dledger/storeguard.go)
// instead of diverging. A node keeps the store its directory holds if the key is later removed.
func raftLogStore(configured, raftDir string) (store, why string) {
	if configured != "" {
		return configured, "dLegerLogStore"
	}
	if held := dledger.StoreOnDisk(raftDir); held != "" {
		return held, "the data directory holds it"
	}
	return dledger.LogStoreCommitLog, "default"
}

// openRaftGroup builds the state machine over a store configured as in classic mode but rooted in
// <storePathRootDir>/dledger-<selfId>/store, driving the metadata tables through tables (which must
// be ready: the state machine resets them at once and Raft's restore and replay, which start
// inside dledger.Open, apply to them), then starts the Raft node on this node's
// dLegerPeers address and the batcher.
//
// onDisk is told of every failed write to the node's data directory (broker/diskfail.go).
func openRaftGroup(cfg *config.Broker, sc storage.Config, tables fsm.MetaApplier, logger hclog.Logger, onDisk func(op string, err error)) (*raftGroup, error) {
	peers, err := dledger.ParsePeers(cfg.DLegerPeers)
	if err != nil {
		return nil, fmt.Errorf("dLegerPeers: %w", err)
	}
	index := -1
	for i, p := range peers {
		if p.ID == cfg.DLegerSelfID {
			index = i
		}
	}
	if index < 0 {
		return nil, fmt.Errorf("dLegerSelfId %q is not in dLegerPeers %q", cfg.DLegerSelfID, cfg.DLegerPeers)
	}
	// The state machine swaps its store root as a whole on a snapshot restore, so a commitlog
	// directory elsewhere (classic mode's storePathCommitLog) cannot be honoured.
	if def := filepath.Join(cfg.StorePathRootDir, "commitlog"); cfg.StorePathCommitLog != "" && filepath.Clean(cfg.StorePathCommitLog) != def {
		return nil, fmt.Errorf("storePathCommitLog %q: not supported with enableDLegerCommitLog=true (the replicated store lives under storePathRootDir)", cfg.StorePathCommitLog)
	}
	if entries, err := os.ReadDir(filepath.Join(cfg.StorePathRootDir, "commitlog")); err == nil && len(entries) > 0 {
		// Switching a classic store to DLedger mode in place is not supported (as in RocketMQ):
		// say so instead of silently serving an empty replicated store.
		logger.Warn("a classic commitlog exists under storePathRootDir; DLedger mode does not read it",
			"classic", filepath.Join(cfg.StorePathRootDir, "commitlog"))
	}
	dir := raftDataDir(cfg.StorePathRootDir, cfg.DLegerSelfID)
	sc.StorePathRootDir = filepath.Join(dir, "store")
	sc.StorePathCommitLog = ""
	scans := fsm.NewLeaderScans()
	logStore, why := raftLogStore(cfg.DLegerLogStore, filepath.Join(dir, "raft"))
	logger.Info("raft log store", "dLegerLogStore", logStore, "why", why)
	entryLog := logStore == dledger.LogStoreCommitLog
	f, err := fsm.New(fsm.Config{Store: sc, DataDir: dir, Logger: logger, Meta: tables, OnDiskFailure: onDisk, Scans: scans, EntryLog: entryLog})
	if err != nil {
		return nil, fmt.Errorf("open state machine in %s: %w", dir, err)
	}
	peerKey, err := cfg.PeerKey()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("peerSecret: %w", err)
	}
	var logs raft.LogStore
	var seq dledger.Sequencer
	if entryLog { // the commitlog is the Raft log; the leader stamps queue offsets (fsm/entryapply.go)
		logs, seq = f.LogStore(), f.Sequencer()
	}
	node, err := dledger.Open(dledger.Config{
		EntryLog:   logs,
		Sequencer:  seq,
		PeerSecret: peerKey, // nil: no peer authentication (broker/peerlinks.go)
		Group:      cfg.DLegerGroup,
		SelfID:     cfg.DLegerSelfID,
		Peers:      peers,
		DataDir:    filepath.Join(dir, "raft"),
		Logger:     logger.Named("raft"),
		// The dLeger*Ms / snapshot / log-store keys; 0 or "" keeps dledger's default (chosen for
		// sub-second failover and a bounded log, see its package doc). Trailing logs: default.
		HeartbeatTimeout:   cfg.DLegerHeartbeatTimeout(),
		ElectionTimeout:    cfg.DLegerElectionTimeout(),
		LeaderLeaseTimeout: cfg.DLegerLeaderLeaseTimeout(),
		CommitTimeout:      cfg.DLegerCommitTimeout(),
		SnapshotInterval:   cfg.DLegerSnapshotInterval(),
		SnapshotThreshold:  uint64(cfg.DLegerSnapshotThreshold),
		LogStore:           logStore,
		NoFastFailover:     !cfg.DLegerFastFailover,
		TrailingLogs:       uint64(cfg.DLegerTrailingLogs),
		WALSegmentSize:     cfg.DLegerWalSegmentSize(),
		LogCacheBytes:      cfg.DLegerLogCacheBytes(),
		SerialLeaderWrite:  cfg.DLegerSerialLeaderWrite,
		Join:               cfg.DLegerJoin,
		OnDiskFailure:      onDisk,
		SendTrace:          cfg.SendTraceEnable,
	}, f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("open raft node %s of group %s: %w", cfg.DLegerSelfID, cfg.DLegerGroup, err)
	}
	rg := &raftGroup{fsm: f, node: node, scans: scans, selfID: cfg.DLegerSelfID, group: cfg.DLegerGroup, index: index, peers: peers}
	if cfg.SendTraceEnable {
		rg.sends = sendtrace.NewCollector(sendtrace.LeaderStages)
	}
	rg.readCtx, rg.stopReads = context.WithCancel(context.Background())
	go rg.proposeDigestChecks(logger)
	maxBytes := int(cfg.DLegerBatchMaxBytes)
	if entryLog {
		// An entry lies whole in one commitlog file (fsm/entrylog.go): batch at most half a file.
		if maxBytes <= 0 {
			maxBytes = dledger.DefaultBatchMaxBytes
		}
		maxBytes = min(maxBytes, int(sc.MappedFileSizeCommitLog/2))
	}
	codec := appendCodec(scans)
	codec.Done = rg.proposalDone
	if cfg.SendTraceEnable {
		codec.Trace = func(p *proposal) *sendtrace.Trace { return p.trace }
	}
	rg.batcher = dledger.NewBatcher(node, codec, dledger.BatchOptions{
		MaxBytes:    maxBytes,
		MaxItems:    int(cfg.DLegerBatchMaxItems),
		MaxInFlight: int(cfg.DLegerBatchMaxInFlight),
		Linger:      cfg.DLegerBatchLinger(),
	})
	logger.Info("raft group member open", "group", cfg.DLegerGroup, "self", cfg.DLegerSelfID,
		"peers", cfg.DLegerPeers, "dir", dir, "appliedIndex", f.AppliedIndex())
	if m := node.Membership(); cfg.DLegerJoin && !m.Configured {
		self := peers[index]
		logger.Info("dLegerJoin: no Raft state yet, not bootstrapping; waiting to be added by the group's leader",
			"self", self.ID, "raftAddr", self.Addr, "brokerIdAsSlave", index+1,
			"add with", fmt.Sprintf("mqadmin addPeer -n <namesrv> -b %s -i %s -a %s", cfg.BrokerName, self.ID, self.Addr))
	}
	return rg, nil
}

// appendCodec plugs the fsm's message-entry format into the batcher; the reads of the
// proposals' properties go into scans under the encoded entry (encodeProposals).
func appendCodec(scans *fsm.LeaderScans) dledger.BatchCodec[*proposal, []storage.AppendResult] {
	return dledger.BatchCodec[*proposal, []storage.AppendResult]{
		Encode: func(items []*proposal) []byte { return encodeProposals(items, scans) },
		Size: func(p *proposal) int {
			n := 4
			for _, r := range p.records {
				n += 4 + len(r)
			}
			return n
		},
		Split: splitApplyResult,
	}
}

// encodeProposals encodes items as one messages entry (fsm.EncodeMessages) and, when some item
// carries reads of its properties, Puts them in scans under that entry and marks those items
// with it, so each Drops it once answered (raftGroup.proposalDone). The entry's bytes are not
// changed by this: only this node's apply of this very entry can find them.
func encodeProposals(items []*proposal, scans *fsm.LeaderScans) []byte {
	appends := make([][][]byte, len(items))
	var read [][]storage.Scanned
	for i, p := range items {
		appends[i] = p.records
		if p.scans != nil {
			if read == nil {
				read = make([][]storage.Scanned, len(items))
			}
			read[i] = p.scans
		}
	}
	data := fsm.EncodeMessages(appends)
	if read != nil {
		scans.Put(data, read)
		for _, p := range items {
			if p.scans != nil {
				p.entry = data
			}
		}
	}
	return data
}

// splitApplyResult hands each send its own append outcome from the entry's *fsm.ApplyResult.
func splitApplyResult(resp any, n int) ([]dledger.Result[[]storage.AppendResult], error) {
	r, ok := resp.(*fsm.ApplyResult)
	if !ok || r == nil || len(r.Appends) != n {
		return nil, fmt.Errorf("unexpected apply result %T for %d appends", resp, n)
	}
	out := make([]dledger.Result[[]storage.AppendResult], n)
	for i, a := range r.Appends {
		out[i] = dledger.Result[[]storage.AppendResult]{Value: a.Results, Err: a.Err}
	}
	return out, nil
}

// Append submits one send's records as one batcher item and returns their results once the
// entry is committed and applied on this node.
func (rg *raftGroup) Append(ctx context.Context, records [][]byte) ([]storage.AppendResult, error) {
	if err := rg.checkSpace(records); err != nil {
		return nil, err
	}
	res, err := rg.batcher.Submit(ctx, &proposal{records: records})
	return checkAppend(records, res, err)
}

// AppendCall is Append with the outcome handed to c.done (see asyncCommitLog). c.scans, when not
// nil, is the send path's read of the records' properties (one per record): this node's apply
// of the entry uses it (fsm.LeaderScans) and it is forgotten once the send has its outcome.
// c.received is when the send request was decoded (a sendtrace stamp): with sendTraceEnable the
// send's trace starts there and ends once c.done has answered it.
func (rg *raftGroup) AppendCall(c *appendCall) {
	if err := rg.checkSpace(c.records); err != nil {
		c.finish(nil, err)
		return
	}
	c.call = c
	if rg.sends != nil && c.received != 0 {
		c.trace = &sendtrace.Trace{}
		c.trace.At[sendtrace.Received] = c.received
	}
	rg.batcher.SubmitSlot(c.deadline, &c.proposal, &c.slot)
}

// proposalDone answers an AppendCall's proposal (the batcher's codec Done). The batcher answers
// an item once: after its entry's outcome (applied here, which took the reads, or failed), or
// without having put it in an entry (p.entry nil). Should a failed entry still be applied here
// later, that apply reads the records itself.
func (rg *raftGroup) proposalDone(p *proposal, res []storage.AppendResult, err error) {
	rg.scans.Drop(p.entry)
	p.call.finish(checkAppend(p.records, res, err))
	if err == nil && p.trace != nil {
		p.trace.Mark(sendtrace.Responded)
		rg.sends.Add(p.trace)
	}
}

// checkAppend wraps a batcher outcome's error and checks it has a result per record.
func checkAppend(records [][]byte, res []storage.AppendResult, err error) ([]storage.AppendResult, error) {
	if err != nil {
		return nil, fmt.Errorf("replicated append: %w", err)
	}
	if len(res) != len(records) {
		return nil, fmt.Errorf("replicated append: %d results for %d records", len(res), len(records))
	}
	return res, nil
}

// checkSpace is DLedger mode's "disk full" refusal, taken on the leader before records are
// proposed: storage.Store.CheckDiskSpace on the leader's store (usage over
// diskMaxUsedSpaceRatio, as classic mode's Append refuses), so Append refuses in both modes alike.
// Once proposed, an entry is applied by every replica whatever its own usage (fsm applies with
// AppendReplicated): a refusal there would leave a replica stuck or diverged. The error wraps
// storage.ErrDiskFull (errorCode: SERVICE_NOT_AVAILABLE, which producers retry elsewhere).
func (rg *raftGroup) checkSpace(records [][]byte) error {
	st, release, err := rg.acquire()
	if err != nil {
		return err
	}
	defer release()
	n := 0
	for _, r := range records {
		n += len(r)
	}
	if err := st.CheckDiskSpace(n); err != nil {
		return fmt.Errorf("leader %s of group %s: %w", rg.selfID, rg.group, err)
	}
	return nil
}

// acquire returns the state machine's current store for reading and the function that gives
// it back (fsm.FSM.Acquire: a snapshot restore waits for holders before closing the store, and
// readers arriving during the swap wait for the new one). It fails once the group is closing,
// or if a restore could not reopen the store.
func (rg *raftGroup) acquire() (*storage.Store, func(), error) {
	st, release, err := rg.fsm.Acquire(rg.readCtx)
	if err != nil {
		return nil, nil, fmt.Errorf("replicated store: %w", err)
	}
	return st, release, nil
}

// handOffTimeout bounds the leadership transfer of a clean shutdown.
const handOffTimeout = 3 * time.Second

// handOff hands leadership to the most up-to-date follower before a clean shutdown, so the group
// has a new master in milliseconds instead of after an election timeout. Failure (no other
// voter, no quorum) only costs that timeout, so it is logged, not returned.
func (rg *raftGroup) handOff(logger hclog.Logger) {
	if !rg.node.IsLeader() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), handOffTimeout)
	defer cancel()
	start := time.Now()
	if err := rg.node.TransferLeadership(ctx, ""); err != nil {
		logger.Warn("leadership hand-off at shutdown failed", "error", err)
		return
	}
	logger.Info("leadership handed off for shutdown", "took", time.Since(start).Round(time.Millisecond))
}

// close stops the batcher (failing queued sends), then Raft, then the state machine, which
// flushes the store and releases its lock: in that order nothing applies to a closed store.
// Each step is bounded (dledger/shutdown.go): when Raft does not stop in time (a peer that
// never answers, a hung disk) the store is closed anyway, cleanly, and the state machine
// refuses whatever Raft still hands it (the next start replays it); that is logged, not
// returned, since the store is left as clean as after a full stop and Raft's own files are
// crash-safe.
func (rg *raftGroup) close(logger hclog.Logger) error {
	rg.stopReads()
	rg.batcher.Close()
	nodeErr := rg.node.Shutdown()
	if errors.Is(nodeErr, dledger.ErrShutdownIncomplete) {
		logger.Warn("raft stopped incompletely; closing the store anyway", "error", nodeErr)
		nodeErr = nil
	}
	return errors.Join(nodeErr, rg.fsm.Close())
}
