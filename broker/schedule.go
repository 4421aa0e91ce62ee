package broker

// Delay levels and timer messages: the send side (applyDelay moves a delayed or timer send into
// SCHEDULE_TOPIC_XXXX) and the wiring of the scheduler (package broker/schedule, which delivers
// them back; its package comment describes both modes).

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"

	"rocketraft/broker/meta"
	"rocketraft/broker/schedule"
	"rocketraft/message"
	"rocketraft/remoting"
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
	// Only a master delivers (the ready leader in DLedger mode, never a classic slave); a step
	// commits through the place (an append then the saved progress, or one Raft entry).
	cfg.MayDeliver = b.place.master
	cfg.Commit = b.place.deliver
	if b.place.haPart() == haMaster { // a classic master's own table (DLedger: Raft's)
		offsets := b.delayOffsets
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

// handleGetAllDelayOffset serves GET_ALL_DELAY_OFFSET (45): delayOffset.json's content.
func (b *Broker) handleGetAllDelayOffset(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return jsonResponse(req, b.delayOffsets.Wrapper())
}
