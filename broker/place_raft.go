package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/meta"
	"rocketraft/config"
	"rocketraft/fsm"
	"rocketraft/metrics"
)

// raftPlace is a Raft group member's place: the replicated store (raftGroup), the role Raft
// decides (role.go watches it), and metadata changed through the log: the ready leader proposes
// every change and answers once it is applied on the leader; consumer offsets are batched into
// few entries (offsetbatch.go). A follower changes nothing itself (metachange.go says what it does
// instead).
type raftPlace struct {
	*raftGroup
	cfg    *config.Broker
	logger hclog.Logger
	// offsets is the replicated offset table; offsetBatch queues the leader's commits for it.
	offsets     *meta.Offsets
	offsetBatch *offsetBatcher
	role        roleState
	// leaderAt (unix ns) is when this node last became the ready leader (locks.go).
	leaderAt atomic.Int64
	subsMu   sync.Mutex
	subs     []func(role int32)
}

var _ place = (*raftPlace)(nil)

// raftConfigDir is where a Raft member keeps its copy of the metadata tables: under its Raft
// directory, so a classic config/ under the same root is never overwritten.
func raftConfigDir(cfg *config.Broker) string {
	return filepath.Join(raftDataDir(cfg.StorePathRootDir, cfg.DLegerSelfID), "config")
}

// openRaftPlace opens the Raft group (the state machine drives the tables through tables)
// and the leader's offset batcher.
func openRaftPlace(b *Broker) (place, error) {
	rg, err := openRaftGroup(b.cfg, b.storeConfig(), b.tables, b.logger, b.disk.Report)
	if err != nil {
		return nil, err
	}
	return newRaftPlace(rg, b.cfg, b.offsets, b.logger), nil
}

// newRaftPlace wraps an open group (tests pass one without a Raft node, see place_test.go).
func newRaftPlace(rg *raftGroup, cfg *config.Broker, offsets *meta.Offsets, logger hclog.Logger) *raftPlace {
	p := &raftPlace{raftGroup: rg, cfg: cfg, logger: logger, offsets: offsets}
	p.offsetBatch = newOffsetBatcher(func(ctx context.Context, offs []fsm.OffsetCommit) error {
		return p.change(ctx, &fsm.MetaOp{Op: fsm.OpCommitOffsets, Offsets: offs})
	}, offsetBatchInterval, offsetBatchMaxEntries, logger.Named("offset-batcher"))
	return p
}

// change proposes op through Raft and returns the applier's outcome once it is committed and
// applied on this node (the leader).
func (p *raftPlace) change(ctx context.Context, op *fsm.MetaOp) error {
	if op.Now == 0 {
		op.Now = time.Now().UnixMilli()
	}
	data, err := fsm.EncodeMetadata(op)
	if err != nil {
		return err
	}
	resp, err := p.node.Apply(ctx, data)
	if err != nil {
		return fmt.Errorf("replicate %s: %w", op.Op, err)
	}
	if r, ok := resp.(*fsm.MetaResult); ok && r != nil && r.Err != nil {
		return r.Err
	}
	return nil
}

// deliver proposes the step as one entry: its records and the level's progress commit together,
// and the entry's compare-and-set keeps a late commit from delivering twice.
func (p *raftPlace) deliver(ctx context.Context, s *fsm.ScheduleDeliver) error {
	if len(s.Records) > 0 {
		if err := p.checkSpace(s.Records); err != nil { // proposed directly, not through Append
			return err
		}
	}
	data, err := fsm.EncodeScheduleDeliver(s)
	if err != nil {
		return err
	}
	resp, err := p.node.Apply(ctx, data)
	if err != nil {
		// Not proposed, or outcome unknown: either way the next step reads the progress again
		// and the compare-and-set in the entry keeps a late commit from delivering twice.
		return fmt.Errorf("replicate delivery of level %d [%d, %d): %w", s.Level, s.From, s.To, err)
	}
	if r, ok := resp.(*fsm.ScheduleResult); ok && r != nil && errors.Is(r.Err, fsm.ErrScheduleStale) {
		p.logger.Info("delay delivery step was stale; re-reading the progress", "level", s.Level, "from", s.From)
	}
	return nil
}

func (p *raftPlace) leading() bool        { return p.role.get() == roleLeader }
func (p *raftPlace) decides() bool        { return p.leading() }
func (p *raftPlace) master() bool         { return p.leading() }
func (p *raftPlace) forwardsWrites() bool { return true }
func (p *raftPlace) registers() bool      { return p.role.get() != roleUnknown }
func (p *raftPlace) haPart() haPart       { return haWhileLeader }

func (p *raftPlace) leaderID() (string, string) {
	id, _ := p.node.Leader()
	return id, p.selfID
}

// leaderSince is when this node last became the ready leader (zero time if never).
func (p *raftPlace) leaderSince() time.Time {
	ns := p.leaderAt.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// commitOffset queues the commit for the next commitOffsets entry on the leader; a follower
// drops it (the caller forwards UPDATE_CONSUMER_OFFSET instead; a pull's commit bit is ignored
// on followers, as on a Java slave).
func (p *raftPlace) commitOffset(o fsm.OffsetCommit, ahead bool) func(context.Context) error {
	if !p.leading() {
		return noWait
	}
	var seq uint64
	if ahead {
		var queued bool
		seq, queued = p.offsetBatch.commitAheadSeq(o.Group, o.Topic, o.QueueID, o.Offset, func() (int64, bool) {
			return p.offsets.Query(o.Group, o.Topic, o.QueueID)
		})
		if !queued {
			return noWait
		}
	} else {
		seq = p.offsetBatch.commit(o.Group, o.Topic, o.QueueID, o.Offset)
	}
	return func(ctx context.Context) error { return p.offsetBatch.waitCommitted(ctx, seq) }
}

// replicatedOffsetWait bounds how long a query waits for the commits queued before it.
const replicatedOffsetWait = 3 * time.Second

// queryOffset answers from the replicated table, on the leader after every commit queued before
// the query has settled (see offsetBatcher), so what a client reads is in Raft's log and
// survives any failover.
func (p *raftPlace) queryOffset(group, topic string, qid int32) (int64, bool) {
	if p.leading() {
		ctx, cancel := context.WithTimeout(context.Background(), replicatedOffsetWait)
		if !p.offsetBatch.waitSettled(ctx) {
			p.logger.Warn("consumer offset query answered before the commits queued ahead of it were replicated", "group", group, "topic", topic, "queue", qid, "waited", replicatedOffsetWait)
		}
		cancel()
	}
	return p.offsets.Query(group, topic, qid)
}

// latestOffset: the leader's own commits still queued or in flight win over the table.
func (p *raftPlace) latestOffset(group, topic string, qid int32) (int64, bool) {
	if off, ok := p.offsetBatch.query(group, topic, qid); ok {
		return off, true
	}
	return p.offsets.Query(group, topic, qid)
}

// brokerID is 0 for the leader and peer index + 1 otherwise, so ids are stable per node.
func (p *raftPlace) brokerID() int64 {
	if p.leading() {
		return 0
	}
	return int64(p.index) + 1
}

// roleName is what Raft says this node is, in RocketMQ's terms.
func (p *raftPlace) roleName() string {
	if p.leading() {
		return config.RoleSyncMaster
	}
	return config.RoleSlave
}

// writable: only the ready leader may take a write; otherwise the answer is
// SERVICE_NOT_AVAILABLE (14), which every client retries on another broker, with a remark naming
// the leader when one is known.
func (p *raftPlace) writable() (bool, string) {
	if p.leading() {
		return true, ""
	}
	name := p.cfg.BrokerName
	if p.diskFailed.Load() {
		return false, "service not available now: node " + p.selfID + " of broker " + name + " had a DISK FAILURE and is stopping; send to the group's new leader"
	}
	if p.excluded() {
		return false, "service not available now: node " + p.selfID + " of broker " + name + " was removed from the Raft group"
	}
	id, addr := p.node.Leader()
	if id == "" || id == p.selfID {
		return false, "service not available now: broker " + name + " node " + p.selfID + " is not the Raft leader and no leader is ready (election in progress)"
	}
	return false, "service not available now: broker " + name + " node " + p.selfID + " is a follower; the leader is " + id + " (raft " + addr + ")"
}

func (p *raftPlace) onRoleChange(fn func(int32)) {
	p.subsMu.Lock()
	p.subs = append(p.subs, fn)
	p.subsMu.Unlock()
}

// setRole records the node's role; on a change away from leading it drops the offsets a lost
// leadership can no longer propose. It reports whether the role changed; the role watch
// (role.go) then tells the subscribers (notify).
func (p *raftPlace) setRole(next int32) bool {
	if next == roleLeader && p.role.get() != roleLeader {
		// Before the role: a lock decision that sees the role sees this leadership's start.
		p.leaderAt.Store(time.Now().UnixNano())
	}
	if !p.role.set(next) {
		return false
	}
	if next != roleLeader {
		p.offsetBatch.drop()
	}
	return true
}

// notify tells the subscribers of a role change.
func (p *raftPlace) notify(role int32) {
	p.subsMu.Lock()
	subs := p.subs
	p.subsMu.Unlock()
	for _, fn := range subs {
		fn(role)
	}
}

// leave: role unknown (no writes, no registration), as a removed node, and writable says why.
func (p *raftPlace) leave() {
	p.setRole(roleUnknown)
	p.diskFailed.Store(true)
}

func (p *raftPlace) raft() (*raftPlace, error) { return p, nil }

func (p *raftPlace) newApplyHistogram() *metrics.Histogram {
	return metrics.NewHistogram(metrics.ApplyLatencyBuckets)
}

// start watches Raft leadership and this node's membership (role.go).
func (p *raftPlace) start(b *Broker) {
	b.wg.Add(1)
	go b.watchRole(p)
}

// handOff proposes the offsets still queued while this node may still lead, then hands
// leadership to the most up-to-date follower.
func (p *raftPlace) handOff() {
	p.offsetBatch.close()
	p.raftGroup.handOff(p.logger)
}

// close stops the group, then writes the tables' pending changes: once nothing applies to them
// any more.
func (p *raftPlace) close(flushTables func()) error {
	err := p.raftGroup.close(p.logger)
	flushTables()
	return err
}
