package broker

// Delay levels and timer messages.
//
// A send whose DELAY property names a level > 0 is stored in SCHEDULE_TOPIC_XXXX, queue level-1,
// with its real topic and queue in REAL_TOPIC / REAL_QID (applyDelay, called by handleSend). A
// scheduler per broker walks each level's queue in order: a message is due at its store time
// plus the level's delay (messageDelayLevel), and since every message of a level has the same
// delay, the queue is in due order and the walk stops at the first message not yet due. Due
// messages are re-encoded for their real topic (deliveryRecord: DELAY removed, UNIQ_KEY, keys
// and tags kept, new store time) and appended together with the level's new progress:
//
//   - classic mode: appended to the local store, then the progress table (delayOffset.json) is
//     set and saved. A crash between the two delivers the step again after the restart (at
//     least once, as RocketMQ).
//   - DLedger mode: one fsm.KindScheduleDeliver entry carries the records and the progress
//     range [from, to); every replica applies both in one step, as a compare-and-set on the
//     level's progress (fsm/schedule.go), so a step is applied once whatever happens to its
//     proposer. Only the ready leader runs the scheduler (after its Barrier, so it reads the
//     progress every earlier leader committed); it stops proposing the moment it loses the
//     role. The progress table is a metadata table: part of every snapshot.
//
// Timer messages (5.x TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS) reuse the levels: the
// due time is kept in TIMER_DELIVER_MS and the message waits in the level with the longest delay
// not beyond the remaining time (the shortest level if none); when that level hands it out
// before its due time it is queued again the same way, so it is never delivered early and at
// most one shortest-level delay (1 s by default) late. A DELAY level takes precedence.

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"rocketraft/broker/meta"
	"rocketraft/fsm"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

const (
	// schedulePollInterval is how often the scheduler looks for due messages (RocketMQ: 100 ms).
	schedulePollInterval = 100 * time.Millisecond
	// scheduleErrorBackoff is how long a level waits after a failed delivery step.
	scheduleErrorBackoff = time.Second
	// scheduleStepRecords and scheduleStepBytes bound one delivery step (one append, one Raft
	// entry); the bytes are further bounded by a quarter of a commitlog file, since a step's
	// records are appended contiguously into one file.
	scheduleStepRecords = 32
	scheduleStepBytes   = 256 << 10
	// scheduleStepsPerPoll bounds the steps one level takes per poll, so a backlog in one level
	// does not starve the others.
	scheduleStepsPerPoll = 16
	// timerMaxDelay is how far ahead a timer message may be due (RocketMQ's timerMaxDelaySec
	// default, 3 days); further is MESSAGE_ILLEGAL.
	timerMaxDelay = 3 * 24 * time.Hour
	// propertyTimerDelayMS is the 5.x relative timer in milliseconds (message has no constant for it).
	propertyTimerDelayMS = "TIMER_DELAY_MS"
	// delayOffsetFile is the progress table's file, in the store's config/ directory (classic
	// mode) or in snapshots (DLedger mode).
	delayOffsetFile = "delayOffset.json"
)

// openSchedule parses messageDelayLevel and opens the progress table in configDir.
func (b *Broker) openSchedule(configDir string) error {
	levels, err := b.cfg.DelayLevels()
	if err != nil {
		return fmt.Errorf("messageDelayLevel: %w", err)
	}
	b.delayLevels = levels
	if b.delayOffsets, err = meta.OpenDelayOffsets(filepath.Join(configDir, delayOffsetFile), b.logger.Named("delay-offsets")); err != nil {
		return fmt.Errorf("open delay offsets: %w", err)
	}
	return nil
}

// startScheduler starts the delivery loop (it idles unless this node may deliver).
func (b *Broker) startScheduler() {
	b.wg.Add(1)
	go b.scheduleLoop()
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
		level, hasLevel = min(n, len(b.delayLevels)), n > 0
	}
	if hasLevel {
		delete(props, message.PropertyTimerDeliverMS)
		delete(props, message.PropertyTimerDelaySec)
		delete(props, propertyTimerDelayMS)
	} else {
		due, timer, err := timerDue(props, now)
		if err != nil {
			return remoting.MessageIllegal, err.Error()
		}
		if !timer || !due.After(now) {
			return remoting.Success, ""
		}
		if due.Sub(now) > timerMaxDelay {
			return remoting.MessageIllegal, fmt.Sprintf("timer message due at %s is more than %s ahead", due.UTC().Format(time.RFC3339), timerMaxDelay)
		}
		delete(props, message.PropertyTimerDelaySec)
		delete(props, propertyTimerDelayMS)
		props[message.PropertyTimerDeliverMS] = strconv.FormatInt(due.UnixMilli(), 10)
		level = b.timerLevel(due.Sub(now))
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
		message.PropertyTimerDelaySec, propertyTimerDelayMS} {
		if _, ok := message.PropertyString(props, k); ok {
			return true
		}
	}
	return false
}

// timerDue reads the 5.x timer properties: TIMER_DELIVER_MS (absolute epoch ms) or
// TIMER_DELAY_SEC / TIMER_DELAY_MS (relative to now).
func timerDue(props map[string]string, now time.Time) (time.Time, bool, error) {
	for _, k := range []string{message.PropertyTimerDeliverMS, message.PropertyTimerDelaySec, propertyTimerDelayMS} {
		s, ok := props[k]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return time.Time{}, false, fmt.Errorf("bad timer property %s=%q: want a non-negative integer", k, s)
		}
		switch k {
		case message.PropertyTimerDeliverMS:
			return time.UnixMilli(n), true, nil
		case message.PropertyTimerDelaySec:
			if n > int64(timerMaxDelay/time.Second)+1 {
				return time.Time{}, false, fmt.Errorf("timer property %s=%d is more than %s", k, n, timerMaxDelay)
			}
			return now.Add(time.Duration(n) * time.Second), true, nil
		default:
			if n > int64(timerMaxDelay/time.Millisecond)+1 {
				return time.Time{}, false, fmt.Errorf("timer property %s=%d is more than %s", k, n, timerMaxDelay)
			}
			return now.Add(time.Duration(n) * time.Millisecond), true, nil
		}
	}
	return time.Time{}, false, nil
}

// timerLevel is the level a timer message with remaining time left waits in: the longest delay
// not beyond it, else the shortest.
func (b *Broker) timerLevel(left time.Duration) int {
	return pickLevel(b.delayLevels, left)
}

func pickLevel(levels []time.Duration, left time.Duration) int {
	best, shortest := 0, 0
	for i, d := range levels {
		if d <= left && (best == 0 || d > levels[best-1]) {
			best = i + 1
		}
		if shortest == 0 || d < levels[shortest-1] {
			shortest = i + 1
		}
	}
	if best == 0 {
		return shortest
	}
	return best
}

// mayDeliver: only a master delivers (the ready leader in DLedger mode, never a classic slave).
func (b *Broker) mayDeliver() bool { return b.place.master() }

// scheduleLoop polls every level while this node may deliver.
func (b *Broker) scheduleLoop() {
	defer b.wg.Done()
	tick := time.NewTicker(schedulePollInterval)
	defer tick.Stop()
	backoff := make([]time.Time, len(b.delayLevels)+1)
	running := false
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
		}
		if ok := b.mayDeliver(); ok != running {
			running = ok
			b.logger.Info("delay scheduler "+map[bool]string{true: "started", false: "stopped"}[ok], "levels", len(b.delayLevels))
		}
		if !running {
			continue
		}
		now := time.Now()
		for level := 1; level <= len(b.delayLevels); level++ {
			if now.Before(backoff[level]) {
				continue
			}
			if err := b.deliverLevel(int32(level)); err != nil {
				b.logger.Warn("delay delivery step failed; retrying", "level", level, "in", scheduleErrorBackoff, "error", err)
				backoff[level] = time.Now().Add(scheduleErrorBackoff)
			}
		}
		if b.place.haPart() == haMaster { // a classic master's own table (DLedger: Raft's)
			_ = b.delayOffsets.Persist() // logged by the table
		}
	}
}

// deliverLevel takes up to scheduleStepsPerPoll delivery steps of one level.
func (b *Broker) deliverLevel(level int32) error {
	for range scheduleStepsPerPoll {
		select {
		case <-b.stop:
			return nil
		default:
		}
		if !b.mayDeliver() {
			return nil
		}
		step, err := b.nextStep(level, time.Now())
		if err != nil || step == nil {
			return err
		}
		if err := b.deliverStep(step); err != nil {
			return err
		}
	}
	return nil
}

// stepBytes bounds a step's records: well under one commitlog file.
func (b *Broker) stepBytes() int {
	return int(min(int64(scheduleStepBytes), b.cfg.MappedFileSizeCommitLog/4))
}

// nextStep reads level's queue from its progress and returns the next delivery step, or nil
// when nothing is due. Units the store no longer has (retention) are stepped over.
func (b *Broker) nextStep(level int32, now time.Time) (*fsm.ScheduleDeliver, error) {
	from := b.delayOffsets.Get(level)
	st, release, err := b.acquireStore()
	if err != nil {
		return nil, err
	}
	r := st.GetMessages(meta.ScheduleTopic, level-1, from, scheduleStepRecords, b.stepBytes(), nil)
	release()
	step := &fsm.ScheduleDeliver{Level: level, From: from, To: from}
	switch r.Status {
	case storage.Found:
	case storage.OffsetTooSmall, storage.OffsetFoundNull, storage.MessageWasRemoving, storage.NoMatchedMessage:
		if r.NextBeginOffset > from {
			b.logger.Warn("delay queue units no longer in the store; skipped", "level", level, "from", from, "to", r.NextBeginOffset, "status", r.Status)
			step.To = r.NextBeginOffset
			return step, nil
		}
		return nil, nil
	default: // nothing stored yet, or nothing new
		return nil, nil
	}
	delay := b.delayLevels[level-1]
	size := 0
	for _, raw := range r.Records {
		v, err := message.ParseView(raw)
		if err != nil {
			return nil, fmt.Errorf("level %d offset %d: %w", level, step.To, err)
		}
		if time.UnixMilli(v.StoreTimestamp()).Add(delay).After(now) && !timerDueBy(v, now) {
			return nonEmpty(step), nil
		}
		rec, err := b.deliveryRecord(raw, now)
		if err != nil {
			b.logger.Error("delayed message cannot be delivered; dropped", "level", level, "queueOffset", v.QueueOffset(), "error", err)
		}
		if rec != nil && len(step.Records) > 0 && size+len(rec) > b.stepBytes() {
			return nonEmpty(step), nil
		}
		if rec != nil {
			step.Records = append(step.Records, rec)
			size += len(rec)
		}
		step.To = v.QueueOffset() + 1
	}
	step.To = max(step.To, r.NextBeginOffset)
	return nonEmpty(step), nil
}

// timerDueBy reports whether v is a timer message due by now. A timer message with less time
// left than its level's delay (the shortest level when under it) is delivered at its own due
// time rather than the level's, so it is not up to a whole level late. The records behind it
// in the queue wait no longer than they would have by their level's time alone.
func timerDueBy(v message.View, now time.Time) bool {
	s, ok := v.Property(message.PropertyTimerDeliverMS)
	if !ok {
		return false
	}
	ms, err := strconv.ParseInt(string(s), 10, 64)
	return err == nil && !time.UnixMilli(ms).After(now)
}

func nonEmpty(s *fsm.ScheduleDeliver) *fsm.ScheduleDeliver {
	if s.To <= s.From {
		return nil
	}
	return s
}

// deliveryRecord re-encodes a due SCHEDULE_TOPIC_XXXX record for its real topic and queue, as
// RocketMQ's messageTimeup: body, flag, sysFlag, born time and host, reconsume times and
// properties kept except DELAY and the relative timer properties (TIMER_DELIVER_MS, the due
// time, stays), WAIT=false, new store time and host. A
// timer message not yet due is queued again in the level that fits. nil, err: the record is
// unusable (no REAL_TOPIC, say) and must be skipped.
func (b *Broker) deliveryRecord(raw []byte, now time.Time) ([]byte, error) {
	m, _, err := message.DecodeRecord(raw)
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	props := message.ParseProperties(m.Properties)
	topic := props[message.PropertyRealTopic]
	qid, err := strconv.Atoi(props[message.PropertyRealQueueID])
	if topic == "" || err != nil || qid < 0 {
		return nil, fmt.Errorf("%s=%q %s=%q: no real topic and queue", message.PropertyRealTopic, topic, message.PropertyRealQueueID, props[message.PropertyRealQueueID])
	}
	m.Topic, m.QueueID = topic, int32(qid)
	delete(props, message.PropertyDelayTimeLevel)
	if due, timer, _ := timerDue(props, now); timer && due.After(now) {
		m.Topic, m.QueueID = meta.ScheduleTopic, int32(b.timerLevel(due.Sub(now))-1)
	} else {
		// A due timer message keeps TIMER_DELIVER_MS: RocketMQ 5 consumers read it as the
		// message's delivery timestamp (proxy/consume.go). Re-sends ignore a time in the past
		// (applyDelay) and sendback.go drops it.
		delete(props, message.PropertyTimerDelaySec)
		delete(props, propertyTimerDelayMS)
	}
	props[message.PropertyWaitStoreMsgOK] = "false"
	m.Properties = message.FormatProperties(props)
	m.StoreTimestamp, m.StoreHost = now.UnixMilli(), b.storeHost
	m.QueueOffset, m.PhysicalOffset = 0, 0
	rec, err := message.EncodeRecord(m)
	if err != nil {
		return nil, fmt.Errorf("re-encode: %w", err)
	}
	return rec, nil
}

// deliverStep appends a step's records and moves the level's progress: locally in classic
// mode, as one replicated entry in DLedger mode.
func (b *Broker) deliverStep(s *fsm.ScheduleDeliver) error {
	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	go func() { // a shutdown does not wait for a step that cannot commit (no quorum)
		select {
		case <-b.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return b.place.deliver(ctx, s)
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
