package broker

// A send is read once: sendPlan.read scans the request's properties one time (message.ReadKnown)
// and sendPlan.classify decides from that what the message becomes. Everything after (the retry
// policy, the half-message and delay rewrites, the cluster property, the replication wait, the
// metrics) reads the plan instead of the properties string, and the request header stays as
// the client sent it: the plan carries the target (topic, queue, sysFlag, properties) the
// records are encoded with. The store takes the same read with a plain send's records
// (sendPlan.scans), so on the node that takes the send its properties are read once in all.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"rocketraft/broker/schedule"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// sendKind is where and how a send is stored.
type sendKind uint8

const (
	// kindNormal: stored in its topic (or its DLQ) as sent.
	kindNormal sendKind = iota
	// kindHalf: a transactional message, stored as a half message until END_TRANSACTION
	// (transaction.go).
	kindHalf
	// kindPrepared and kindRollback: the client set a PREPARED or ROLLBACK transaction type
	// without TRAN_MSG; stored as sent, never delayed, not dispatched by the store.
	kindPrepared
	kindRollback
	// kindDelay: a delay level above 0, stored in SCHEDULE_TOPIC_XXXX (schedule.go).
	kindDelay
	// kindTimer: a timer property due in the future, stored in SCHEDULE_TOPIC_XXXX.
	kindTimer
)

var sendKindNames = [...]string{"normal", "half", "prepared", "rollback", "delay", "timer"}

func (k sendKind) String() string { return sendKindNames[k] }

// sendPlan is one send as the broker reads it: what the client sent (known, the header's
// fields) and where its records go.
type sendPlan struct {
	// known is the one scan of the properties (as sent; after a move to the DLQ without DELAY).
	known message.Known[string]
	kind  sendKind
	// metricType is the send's message type for the metrics, from the properties as sent.
	metricType int
	// retry: the send names %RETRY%<group>; toDLQ: the retry policy moved it to %DLQ%<group>.
	retry, toDLQ bool
	// level is the SCHEDULE_TOPIC_XXXX level of a delay or timer send (1-based); due is a timer
	// send's due time.
	level int
	due   time.Time
	// reconsumeTimes is the header's, for the classification.
	reconsumeTimes int32
	// The target the records are encoded with.
	topic   string
	queueID int32
	sysFlag int32
	props   string
	// scanned backs scans' answer (no allocation per send).
	scanned [1]storage.Scanned
}

// read sets p from a send header: the one scan of its properties. The send path keeps its plan
// inside the send's in-flight state.
func (p *sendPlan) read(h *protocol.SendMessageRequestHeader) {
	*p = sendPlan{
		known:          message.ReadKnown(h.Properties),
		reconsumeTimes: h.ReconsumeTimes,
		topic:          h.Topic,
		queueID:        h.QueueID,
		sysFlag:        h.SysFlag,
		props:          h.Properties,
	}
	p.retry = strings.HasPrefix(h.Topic, message.RetryTopicPrefix)
	p.metricType = metricTypeOf(&p.known)
}

// waitStore is the send's WAIT rule (message.Known.WaitStore).
func (p *sendPlan) waitStore() bool { return p.known.WaitStore() }

// classify decides what a send becomes, as RocketMQ's broker does. It is the one
// classifier: the send path, send-back and the scheduler act on its answer, and metricTypeOf
// reads the same scan. The rules, edge cases included:
//   - Half message: TRAN_MSG reads as true by Java's Boolean.parseBoolean ("true", any letter
//     case), unless the send is a retry (reconsumeTimes > 0) whose DELAY parses to a level
//     above 0; such a retry of a committed transactional message (clients before 4.6.1 kept
//     TRAN_MSG on it) is stored as an ordinary delayed message (SendMessageProcessor). DELAY=0
//     on a retry does not make that exception, and a DELAY that is not an integer is only
//     looked at when reconsumeTimes > 0 (there it is MESSAGE_ILLEGAL).
//   - A PREPARED or ROLLBACK transaction type in sysFlag without TRAN_MSG: stored as sent, not
//     delayed. Only NOT_TYPE and COMMIT_TYPE messages are delayed (HookUtils).
//   - Delay: DELAY parses to a level above 0 (capped at the highest configured level); it wins
//     over any timer property, which is dropped. DELAY that is not an integer is
//     MESSAGE_ILLEGAL; DELAY <= 0 is no delay.
//   - Timer: without a delay level, TIMER_DELAY_SEC, else TIMER_DELAY_MS, else
//     TIMER_DELIVER_MS (that precedence, as RocketMQ 5) gives the due time; due in the future
//     (at most schedule.TimerMaxDelay ahead) is a timer send, due now or before is stored as normal,
//     keeping the property. A value that is not a non-negative integer is MESSAGE_ILLEGAL.
//   - __STARTDELIVERTIME (a commercial-edition property) delays nothing; only the metrics
//     type counts it as Delay, as RocketMQ's do.
//   - Batches are never delayed nor transactional here: the send path refuses a
//     transactional batch and a batch entry with DELAY.
//
// levels are the configured delay levels; the answer is a response code and remark.
func (p *sendPlan) classify(batch bool, levels []time.Duration, now time.Time) (int32, string) {
	k := &p.known
	hasLevel, level := false, 0
	if k.Has&message.KnownDelay != 0 && (!k.TransactionFlag() || p.reconsumeTimes > 0) {
		n, err := strconv.Atoi(k.Delay)
		if err != nil {
			return remoting.MessageIllegal, fmt.Sprintf("bad %s property %q: not an integer", message.PropertyDelayTimeLevel, k.Delay)
		}
		hasLevel, level = n > 0, min(n, len(levels))
	}
	p.kind = kindNormal
	switch {
	case batch:
		return remoting.Success, ""
	case k.TransactionFlag() && !(p.reconsumeTimes > 0 && hasLevel):
		p.kind = kindHalf
		return remoting.Success, ""
	}
	switch message.TransactionType(p.sysFlag) {
	case message.TransactionPreparedType:
		p.kind = kindPrepared
		return remoting.Success, ""
	case message.TransactionRollbackType:
		p.kind = kindRollback
		return remoting.Success, ""
	}
	if hasLevel {
		p.kind, p.level = kindDelay, level
		return remoting.Success, ""
	}
	if k.Has&message.KnownTimerMask == 0 {
		return remoting.Success, ""
	}
	due, timer, err := schedule.TimerDue(timerProps(k), now)
	if err != nil {
		return remoting.MessageIllegal, err.Error()
	}
	if !timer || !due.After(now) {
		return remoting.Success, ""
	}
	if due.Sub(now) > schedule.TimerMaxDelay {
		return remoting.MessageIllegal, fmt.Sprintf("timer message due at %s is more than %s ahead", due.UTC().Format(time.RFC3339), schedule.TimerMaxDelay)
	}
	p.kind, p.due, p.level = kindTimer, due, schedule.PickLevel(levels, due.Sub(now))
	return remoting.Success, ""
}

// timerProps is the timer properties of a send as schedule.TimerDue reads them.
func timerProps(k *message.Known[string]) map[string]string {
	m := make(map[string]string, 1)
	if k.Has&message.KnownTimerDelaySec != 0 {
		m[message.PropertyTimerDelaySec] = k.TimerDelaySec
	}
	if k.Has&message.KnownTimerDelayMS != 0 {
		m[message.PropertyTimerDelayMS] = k.TimerDelayMS
	}
	if k.Has&message.KnownTimerDeliverMS != 0 {
		m[message.PropertyTimerDeliverMS] = k.TimerDeliverMS
	}
	return m
}

// metricTypeOf classifies a send as RocketMQ 5's metrics do (BrokerMetricsManager), from the
// properties as sent: transactional (TRAN_MSG true, any case, even on a retry the broker stores
// as delayed), else FIFO (a sharding key), else Delay (DELAY, a timer property or
// __STARTDELIVERTIME present, whatever its value), else normal.
func metricTypeOf(k *message.Known[string]) int {
	switch {
	case k.TransactionFlag():
		return msgTransaction
	case k.Has&message.KnownShardingKey != 0:
		return msgFIFO
	case k.Has&(message.KnownDelay|message.KnownTimerMask|message.KnownStartDeliverTime) != 0:
		return msgDelay
	}
	return msgNormal
}

// scans is the plan's read of the properties as the store takes it with the send's records
// (storage.Scanned), so that the store does not read them again: on the leader a plain send's
// properties are then read once in all, in classic mode (AppendScanned) and in DLedger mode
// (through the leader's own apply, fsm.LeaderScans). It is nil where the read does not describe
// the records' properties: a batch (each entry has its own), a half, delay or timer send and a
// move to the DLQ (their properties were rewritten after the read). The store checks that a
// read describes the record it comes with, so the answer is only ever a shortcut.
func (p *sendPlan) scans(batch bool) []storage.Scanned {
	if batch || p.toDLQ {
		return nil
	}
	switch p.kind {
	case kindNormal, kindPrepared, kindRollback: // stored with the properties as sent
	default:
		return nil
	}
	p.scanned[0] = storage.Scanned{Props: p.props, Known: &p.known}
	return p.scanned[:]
}

// scannedCommitLog is a CommitLog that takes the send plan's read of the records' properties
// with them: classic mode's store (storage.Store.AppendScanned).
type scannedCommitLog interface {
	AppendScanned(ctx context.Context, records [][]byte, scans []storage.Scanned) ([]storage.AppendResult, error)
}

// appendScanned appends records through cl, with scans when cl takes them.
func appendScanned(ctx context.Context, cl CommitLog, records [][]byte, scans []storage.Scanned) ([]storage.AppendResult, error) {
	if sc, ok := cl.(scannedCommitLog); ok && scans != nil {
		return sc.AppendScanned(ctx, records, scans)
	}
	return cl.Append(ctx, records)
}

// toDLQTarget moves a retry send past its limit to dlq queue 0 without its DELAY (the one
// rewrite of the properties on that path).
func (p *sendPlan) toDLQTarget(dlq string) {
	props := message.ParseProperties(p.props)
	delete(props, message.PropertyDelayTimeLevel)
	p.props = message.FormatProperties(props)
	p.known.Has &^= message.KnownDelay
	p.known.Delay = ""
	p.topic, p.queueID, p.toDLQ = dlq, 0, true
}

// encodeWithCluster encodes m's record with CLUSTER=<brokerClusterName> added to its properties
// unless has (the scan found one), as withCluster adds it to a properties string: the send path
// has the record encoder add it, copying the properties once.
func (s *sender) encodeWithCluster(m *message.Message, has bool) ([]byte, error) {
	if has {
		return message.EncodeRecord(m)
	}
	return message.EncodeRecordAdding(m, message.PropertyCluster, s.cfg.BrokerClusterName)
}

// withCluster adds CLUSTER=<brokerClusterName> to props unless has (the plan's scan found one),
// as RocketMQ brokers do; an existing CLUSTER is kept.
func (s *sender) withCluster(props string, has bool) string {
	if has {
		return props
	}
	key := message.PropertyCluster + string(message.NameValueSeparator)
	if props != "" && !strings.HasSuffix(props, string(message.PropertySeparator)) {
		props += string(message.PropertySeparator)
	}
	return props + key + s.cfg.BrokerClusterName + string(message.PropertySeparator)
}
