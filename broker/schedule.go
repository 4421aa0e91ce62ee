package broker

// Delay levels and timer messages: the send side (applyDelay moves a delayed or timer send into
// SCHEDULE_TOPIC_XXXX) and the wiring of the scheduler (package broker/schedule, which delivers
// them back; its package comment describes both modes).

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/meta"
	"rocketraft/broker/schedule"
	"rocketraft/config"
	"rocketraft/fsm"
	"rocketraft/message"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// delayOffsetFile is the progress table's file, in the store's config/ directory (classic mode)
// or in snapshots (DLedger mode).
const delayOffsetFile = "delayOffset.json"

// openSchedule parses messageDelayLevel and opens the progress table in configDir (before the
// commitlog: in DLedger mode Raft's replay sets it); wireScheduler builds the scheduler later.
func (b *Broker) openSchedule(configDir string) error {
	levels, err := b.cfg.DelayLevels()
	if err != nil {
		return fmt.Errorf("messageDelayLevel: %w", err)
	}
	if b.delayOffsets, err = meta.OpenDelayOffsets(filepath.Join(configDir, delayOffsetFile), b.logger.Named("delay-offsets")); err != nil {
		return fmt.Errorf("open delay offsets: %w", err)
	}
	b.delayLevels = levels
	return nil
}

// wireScheduler builds the scheduler over the mode's store and append path (New calls it after
// openCommitLog).
func (b *Broker) wireScheduler() {
	cfg := schedule.Config{
		Levels:       b.delayLevels,
		Offsets:      b.delayOffsets,
		Acquire:      b.acquireStore,
		StoreHost:    func() netip.AddrPort { return b.storeHost },
		MaxStepBytes: int(b.cfg.MappedFileSizeCommitLog / 4),
		Logger:       b.logger.Named("schedule"),
	}
	if b.raft != nil {
		rg := b.raft
		cfg.MayDeliver = b.isLeader
		cfg.Commit = func(ctx context.Context, s *fsm.ScheduleDeliver) error { return raftDeliver(ctx, rg, s, cfg.Logger) }
	} else {
		offsets := b.delayOffsets
		cfg.MayDeliver = func() bool { return b.cfg.BrokerRole != config.RoleSlave }
		cfg.Commit = classicDeliver(b.local, offsets, cfg.Logger)
		cfg.AfterPoll = func() { _ = offsets.Persist() } // logged by the table
	}
	b.sched = schedule.New(cfg)
}

// applyDelay stores a delay or timer send (p.kind, decided by sendPlan.classify in sendplan.go) in
// SCHEDULE_TOPIC_XXXX, queue level-1: the real topic and queue go into REAL_TOPIC / REAL_QID,
// a delay level drops every timer property, a timer keeps its due time as TIMER_DELIVER_MS
// and drops the relative ones. props is the send's properties as a map when the caller has
// one (send-back), else nil.
func (b *Broker) applyDelay(p *sendPlan, props map[string]string) {
	if props == nil {
		props = message.ParseProperties(p.props)
	}
	delete(props, message.PropertyTimerDelaySec)
	delete(props, schedule.PropertyTimerDelayMS)
	if p.kind == kindTimer {
		props[message.PropertyTimerDeliverMS] = strconv.FormatInt(p.due.UnixMilli(), 10)
	} else {
		delete(props, message.PropertyTimerDeliverMS)
	}
	props[message.PropertyRealTopic] = p.topic
	props[message.PropertyRealQueueID] = strconv.Itoa(int(p.queueID))
	p.props = message.FormatProperties(props)
	p.topic = meta.ScheduleTopic
	p.queueID = int32(p.level - 1)
}

// classicDeliver is classic mode's delivery commit: the records go to the local store, then the
// level's progress is set and saved (a crash between the two delivers the step again).
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

// raftDeliver is DLedger mode's delivery commit: one replicated entry carrying the records and
// the progress range, applied by every replica as a compare-and-set (fsm/schedule.go).
func raftDeliver(ctx context.Context, rg *raftGroup, s *fsm.ScheduleDeliver, logger hclog.Logger) error {
	if len(s.Records) > 0 {
		if err := rg.checkSpace(s.Records); err != nil { // proposed directly, not through Append
			return err
		}
	}
	data, err := fsm.EncodeScheduleDeliver(s)
	if err != nil {
		return err
	}
	resp, err := rg.node.Apply(ctx, data)
	if err != nil {
		// Not proposed, or outcome unknown: either way the next step reads the progress again
		// and the compare-and-set in the entry keeps a late commit from delivering twice.
		return fmt.Errorf("replicate delivery of level %d [%d, %d): %w", s.Level, s.From, s.To, err)
	}
	if r, ok := resp.(*fsm.ScheduleResult); ok && r != nil && errors.Is(r.Err, fsm.ErrScheduleStale) {
		logger.Info("delay delivery step was stale; re-reading the progress", "level", s.Level, "from", s.From)
	}
	return nil
}

// DelayOffset implements fsm.ScheduleApplier: the replicated progress table.
func (a metaApplier) DelayOffset(level int32) int64 { return a.b.delayOffsets.Get(level) }

// ApplyDelayOffset implements fsm.ScheduleApplier.
func (a metaApplier) ApplyDelayOffset(level int32, offset int64) { a.b.delayOffsets.Set(level, offset) }

var _ fsm.ScheduleApplier = metaApplier{}

// handleGetAllDelayOffset serves GET_ALL_DELAY_OFFSET (45): delayOffset.json's content.
func (b *Broker) handleGetAllDelayOffset(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return b.jsonResponse(req, b.delayOffsets.Wrapper())
}
