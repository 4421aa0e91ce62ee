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
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/meta"
	"rocketraft/broker/schedule"
	"rocketraft/config"
	"rocketraft/fsm"
	"rocketraft/message"
	"rocketraft/protocol"
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

// applyDelay moves a delayed or timer message to SCHEDULE_TOPIC_XXXX, as the
// send path asks: with DELAY > 0 (capped at the highest level) into queue level-1, with a
// timer property due in the future into the level that fits. Transactional half messages are
// left alone (they are delayed, if at all, when committed). The answer is a response code and
// remark; only a bad timer value is refused (MESSAGE_ILLEGAL).
func (b *Broker) applyDelay(h *protocol.SendMessageRequestHeader, now time.Time) (int32, string) {
	if t := h.SysFlag & message.TransactionTypeMask; t != message.TransactionNotType && t != message.TransactionCommitType {
		return remoting.Success, ""
	}
	if !hasDelayProperty(h.Properties) {
		return remoting.Success, "" // most sends: no need to parse the properties into a map
	}
	props := message.ParseProperties(h.Properties)
	level, hasLevel := 0, false
	if s, ok := props[message.PropertyDelayTimeLevel]; ok {
		n, err := strconv.Atoi(s)
		if err != nil {
			return remoting.MessageIllegal, fmt.Sprintf("bad %s property %q: not an integer", message.PropertyDelayTimeLevel, s)
		}
		level, hasLevel = min(n, b.sched.Levels()), n > 0
	}
	if hasLevel {
		delete(props, message.PropertyTimerDeliverMS)
		delete(props, message.PropertyTimerDelaySec)
		delete(props, schedule.PropertyTimerDelayMS)
	} else {
		due, timer, err := schedule.TimerDue(props, now)
		if err != nil {
			return remoting.MessageIllegal, err.Error()
		}
		if !timer || !due.After(now) {
			return remoting.Success, ""
		}
		if due.Sub(now) > schedule.TimerMaxDelay {
			return remoting.MessageIllegal, fmt.Sprintf("timer message due at %s is more than %s ahead", due.UTC().Format(time.RFC3339), schedule.TimerMaxDelay)
		}
		delete(props, message.PropertyTimerDelaySec)
		delete(props, schedule.PropertyTimerDelayMS)
		props[message.PropertyTimerDeliverMS] = strconv.FormatInt(due.UnixMilli(), 10)
		level = b.sched.TimerLevel(due.Sub(now))
	}
	props[message.PropertyRealTopic] = h.Topic
	props[message.PropertyRealQueueID] = strconv.Itoa(int(h.QueueID))
	h.Properties = message.FormatProperties(props)
	h.Topic = meta.ScheduleTopic
	h.QueueID = int32(level - 1)
	return remoting.Success, ""
}

// hasDelayProperty reports whether encoded properties name a delay level or a timer.
func hasDelayProperty(props string) bool {
	for _, k := range [...]string{message.PropertyDelayTimeLevel, message.PropertyTimerDeliverMS,
		message.PropertyTimerDelaySec, schedule.PropertyTimerDelayMS} {
		if _, ok := message.PropertyString(props, k); ok {
			return true
		}
	}
	return false
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
