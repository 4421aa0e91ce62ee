package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/meta"
	"rocketraft/config"
	"rocketraft/fsm"
	"rocketraft/metrics"
	"rocketraft/storage"
)

// classicPlace is a classic broker's place: its own store, the role brokerRole configures, and
// metadata changed in its own tables at once, with their persistence errors reported to the
// client (the tables are this node's only copy).
type classicPlace struct {
	cfg   *config.Broker
	store *storage.Store
	// apply changes the tables (tables.applyChange); offsets and delays are the tables
	// commitOffset and deliver change directly.
	apply   func(op *fsm.MetaOp) (saveErr, err error)
	offsets *meta.Offsets
	delays  *meta.DelayOffsets
	logger  hclog.Logger
}

var _ place = (*classicPlace)(nil)

// classicConfigDir is where a classic broker keeps its metadata tables.
func classicConfigDir(cfg *config.Broker) string {
	return filepath.Join(cfg.StorePathRootDir, "config")
}

// openClassicPlace opens the local store and adds the system topics the tables lack (a Raft
// member gets them from its snapshot, tables.RestoreMeta).
func openClassicPlace(b *Broker) (place, error) {
	if _, err := b.topics.EnsureTopics(b.tables.systemTopics(), time.Now()); err != nil {
		return nil, fmt.Errorf("create system topics: %w", err)
	}
	store, err := storage.Open(b.storeConfig())
	if err != nil {
		return nil, fmt.Errorf("open store at %s: %w", b.cfg.StorePathRootDir, err)
	}
	return &classicPlace{cfg: b.cfg, store: store, apply: b.tables.applyChange, offsets: b.offsets,
		delays: b.delayOffsets, logger: b.logger}, nil
}

func (p *classicPlace) Append(ctx context.Context, records [][]byte) ([]storage.AppendResult, error) {
	return p.store.Append(ctx, records)
}

// AppendScanned is Append with the send plan's read of the records' properties (scannedCommitLog).
func (p *classicPlace) AppendScanned(ctx context.Context, records [][]byte, scans []storage.Scanned) ([]storage.AppendResult, error) {
	return p.store.AppendScanned(ctx, records, scans)
}

func (p *classicPlace) acquire() (*storage.Store, func(), error) { return p.store, noRelease, nil }

// change applies op to the tables; deleting a topic also deletes its consume queues (in a Raft
// group the state machine does that when it applies the entry).
func (p *classicPlace) change(_ context.Context, op *fsm.MetaOp) error {
	if op.Now == 0 {
		op.Now = time.Now().UnixMilli()
	}
	saveErr, err := p.apply(op)
	if err != nil {
		return err
	}
	if op.Op == fsm.OpDeleteTopic {
		if err := p.store.DeleteTopic(op.Name); err != nil {
			return errors.Join(saveErr, fmt.Errorf("delete consume queues: %w", err))
		}
	}
	return saveErr
}

// deliver appends the step's records to the local store, then moves and saves the level's
// progress (classicDeliver).
func (p *classicPlace) deliver(ctx context.Context, s *fsm.ScheduleDeliver) error {
	return classicDeliver(p.store, p.delays, p.logger)(ctx, s)
}

// classicDeliver is classic mode's delivery commit: the records go to store, then the level's
// progress is set and saved (a crash between the two delivers the step again). A record the
// store refuses as illegal is skipped (logged), so one bad message does not stop its level; a
// flush timeout counts as stored.
func classicDeliver(store CommitLog, offsets *meta.DelayOffsets, logger hclog.Logger) func(context.Context, *fsm.ScheduleDeliver) error {
	return func(ctx context.Context, s *fsm.ScheduleDeliver) error {
		if len(s.Records) > 0 {
			_, err := store.Append(ctx, s.Records)
			switch {
			case errors.Is(err, storage.ErrMessageIllegal):
				logger.Error("the store refused delayed messages; skipped", "level", s.Level, "from", s.From, "to", s.To, "error", err)
			case err != nil && !errors.Is(err, storage.ErrFlushDiskTimeout):
				return fmt.Errorf("append %d delayed messages of level %d: %w", len(s.Records), s.Level, err)
			}
		}
		offsets.Set(s.Level, s.To)
		return offsets.Persist()
	}
}

func (p *classicPlace) decides() bool              { return true }
func (p *classicPlace) master() bool               { return p.cfg.IsMaster() }
func (p *classicPlace) forwardsWrites() bool       { return false }
func (p *classicPlace) leaderID() (string, string) { return "", "" }
func (p *classicPlace) registers() bool            { return true }
func (p *classicPlace) leaderSince() time.Time     { return time.Time{} }

func (p *classicPlace) haPart() haPart { return classicHAPart(p.cfg) }

// classicHAPart is a classic broker's part in HA replication, from its brokerRole.
func classicHAPart(cfg *config.Broker) haPart {
	if cfg.BrokerRole == config.RoleSlave {
		return haSlave
	}
	return haMaster
}

// commitOffset records the offset in memory (saved periodically, housekeeping in broker.go).
func (p *classicPlace) commitOffset(o fsm.OffsetCommit, ahead bool) func(context.Context) error {
	if ahead {
		p.offsets.CommitAhead(o.Group, o.Topic, o.QueueID, o.Offset)
	} else {
		p.offsets.Commit(o.Group, o.Topic, o.QueueID, o.Offset)
	}
	return noWait
}

func (p *classicPlace) queryOffset(group, topic string, qid int32) (int64, bool) {
	return p.offsets.Query(group, topic, qid)
}

func (p *classicPlace) latestOffset(group, topic string, qid int32) (int64, bool) {
	return p.offsets.Query(group, topic, qid)
}

func (p *classicPlace) roleName() string { return p.cfg.BrokerRole }
func (p *classicPlace) brokerID() int64  { return p.cfg.BrokerID }

// writable: a classic SLAVE never takes a write (its commitlog is the master's copy):
// SERVICE_NOT_AVAILABLE, as a 4.x slave.
func (p *classicPlace) writable() (bool, string) {
	if p.cfg.BrokerRole == config.RoleSlave {
		return false, fmt.Sprintf("service not available now: broker %s brokerId %d is a SLAVE; send to its master", p.cfg.BrokerName, p.cfg.BrokerID)
	}
	return true, ""
}

func (p *classicPlace) onRoleChange(func(int32))              {}
func (p *classicPlace) leave()                                {}
func (p *classicPlace) raft() (*raftPlace, error)             { return nil, errNotRaft }
func (p *classicPlace) newApplyHistogram() *metrics.Histogram { return nil }
func (p *classicPlace) start(*Broker)                         {}
func (p *classicPlace) handOff()                              {}

// close writes the tables' pending changes, then closes the store (and with it the lock on its
// directory).
func (p *classicPlace) close(flushTables func()) error {
	flushTables()
	return p.store.Close()
}
