package schedule

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"rocketraft/broker/meta"
	"rocketraft/message"
)

// DeliveryRecord re-encodes a due SCHEDULE_TOPIC_XXXX record for its real topic and queue, as
// RocketMQ's messageTimeup: body, flag, sysFlag, born time and host, reconsume times and
// properties kept except DELAY and the relative timer properties (TIMER_DELIVER_MS, the due
// time, stays), WAIT=false, store time now and storeHost. A timer message not yet due is queued
// again in the level of levels that fits. nil, err: the record is unusable (no REAL_TOPIC, say)
// and must be skipped.
func DeliveryRecord(raw []byte, levels []time.Duration, storeHost netip.AddrPort, now time.Time) ([]byte, error) {
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
	if due, timer, _ := TimerDue(props, now); timer && due.After(now) {
		m.Topic, m.QueueID = meta.ScheduleTopic, int32(PickLevel(levels, due.Sub(now))-1)
	} else {
		// A due timer message keeps TIMER_DELIVER_MS: RocketMQ 5 consumers read it as the
		// message's delivery timestamp (proxy/consume.go). Re-sends ignore a time in the past
		// (broker/schedule.go applyDelay) and broker/sendback.go drops it.
		delete(props, message.PropertyTimerDelaySec)
		delete(props, PropertyTimerDelayMS)
	}
	props[message.PropertyWaitStoreMsgOK] = "false"
	m.Properties = message.FormatProperties(props)
	m.StoreTimestamp, m.StoreHost = now.UnixMilli(), storeHost
	m.QueueOffset, m.PhysicalOffset = 0, 0
	rec, err := message.EncodeRecord(m)
	if err != nil {
		return nil, fmt.Errorf("re-encode: %w", err)
	}
	return rec, nil
}
