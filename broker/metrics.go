package broker

// Prometheus metrics (package metrics has the names and the registry). The send and pull paths
// add to per-topic atomics here (recordIn, recordOut, recordDLQ): one sync.Map lookup per
// request, no lock, no allocation once a topic (and group) has been seen. brokerCollector
// reads them, the store, the offset table and Raft when Prometheus scrapes /metrics.

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rocketraft/broker/meta"
	"rocketraft/message"
	"rocketraft/metrics"
	"rocketraft/storage"
)

// Message types by index, in the order of messageTypeNames.
const (
	msgNormal = iota
	msgFIFO
	msgDelay
	msgTransaction
	numMessageTypes
)

var messageTypeNames = [numMessageTypes]string{metrics.MessageTypeNormal, metrics.MessageTypeFIFO,
	metrics.MessageTypeDelay, metrics.MessageTypeTransaction}

// Bounds of the consumer-lag scan per scrape, so that a broker with a huge offset table is not
// slowed down by being watched: (topic, group) pairs reported, queues looked at, and messages
// read for their store time (lag latency).
const (
	lagMaxPairs  = 2000
	lagMaxQueues = 20000
	lagMaxReads  = 2000
)

// brokerMetrics is the broker's metrics state.
type brokerMetrics struct {
	registry *metrics.Registry
	rpc      *metrics.RPC
	apply    *metrics.Histogram // DLedger mode: Raft append latency on the leader
	topics   sync.Map           // topic → *topicMetrics
}

// topicMetrics are one topic's counters. in is indexed by message type; out and dlq by
// consumer group.
type topicMetrics struct {
	in  [numMessageTypes]inCounters
	out sync.Map // group → *outCounters
	dlq sync.Map // group → *atomic.Int64: messages of this topic the group sent to its DLQ
}

type inCounters struct {
	msgs, bytes atomic.Int64
	size        *metrics.Histogram
}

type outCounters struct{ msgs, bytes atomic.Int64 }

// newBrokerMetrics builds the registry and, in DLedger mode, wraps b.commitLog to time appends. New
// calls it once the commitlog is open.
func newBrokerMetrics(b *Broker) *brokerMetrics {
	m := &brokerMetrics{
		registry: metrics.NewRegistry(metrics.Identity{Cluster: b.cfg.BrokerClusterName, NodeType: metrics.NodeTypeBroker, NodeID: b.cfg.BrokerName}),
		rpc:      metrics.NewRPC(),
	}
	if m.apply = b.place.newApplyHistogram(); m.apply != nil { // DLedger mode
		b.commitLog = timedCommitLog{b.commitLog, m.apply}
	}
	if err := m.registry.Register(m.rpc, &brokerCollector{b: b, m: m}); err != nil {
		panic("broker metrics: " + err.Error()) // duplicate descriptors: a programming error
	}
	return m
}

// timedCommitLog observes how long each successful append took (DLedger: proposal until
// applied on this node, batching included) in a histogram.
type timedCommitLog struct {
	CommitLog
	h *metrics.Histogram
}

func (t timedCommitLog) Append(ctx context.Context, records [][]byte) ([]storage.AppendResult, error) {
	start := time.Now()
	res, err := t.CommitLog.Append(ctx, records)
	if err == nil {
		t.h.ObserveDuration(time.Since(start))
	}
	return res, err
}

// AppendFunc times the asynchronous append as Append times the synchronous one.
func (t timedCommitLog) AppendFunc(deadline time.Time, records [][]byte, then func([]storage.AppendResult, error)) {
	a, ok := t.CommitLog.(asyncCommitLog)
	if !ok {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		then(t.Append(ctx, records))
		return
	}
	start := time.Now()
	a.AppendFunc(deadline, records, func(res []storage.AppendResult, err error) {
		if err == nil {
			t.h.ObserveDuration(time.Since(start))
		}
		then(res, err)
	})
}

func (m *brokerMetrics) topic(t string) *topicMetrics {
	if v, ok := m.topics.Load(t); ok {
		return v.(*topicMetrics)
	}
	tm := &topicMetrics{}
	for i := range tm.in {
		tm.in[i].size = metrics.NewHistogram(metrics.MessageSizeBuckets)
	}
	v, _ := m.topics.LoadOrStore(t, tm)
	return v.(*topicMetrics)
}

// recordIn counts a successful send of records to topic (the topic the producer named) of
// message type mt. storedTopic is where the records went: a send to %RETRY%<group> past its
// retry limit lands in %DLQ%<group> and is also counted as sent to the DLQ.
func (m *brokerMetrics) recordIn(topic string, mt int, storedTopic, props string, records [][]byte) {
	if m == nil {
		return // a Broker built by hand in a test
	}
	c := &m.topic(topic).in[mt]
	var n int64
	for _, r := range records {
		n += int64(len(r))
		c.size.Observe(float64(len(r)))
	}
	c.msgs.Add(int64(len(records)))
	c.bytes.Add(n)
	if storedTopic != topic && strings.HasPrefix(storedTopic, message.DLQTopicPrefix) && strings.HasPrefix(topic, message.RetryTopicPrefix) {
		orig, ok := message.PropertyString(props, message.PropertyRetryTopic)
		if !ok {
			orig = topic
		}
		m.recordDLQ(orig, strings.TrimPrefix(topic, message.RetryTopicPrefix), len(records))
	}
}

// recordOut counts n messages (bytes long) pulled by group from topic. Retry and DLQ topics
// are left out, as RocketMQ's pull processor does: they are the same messages again.
func (m *brokerMetrics) recordOut(topic, group string, n, bytes int) {
	if m == nil || strings.HasPrefix(topic, message.RetryTopicPrefix) || strings.HasPrefix(topic, message.DLQTopicPrefix) {
		return
	}
	tm := m.topic(topic)
	v, ok := tm.out.Load(group)
	if !ok {
		v, _ = tm.out.LoadOrStore(group, &outCounters{})
	}
	c := v.(*outCounters)
	c.msgs.Add(int64(n))
	c.bytes.Add(int64(bytes))
}

// recordDLQ counts n messages of topic that group gave up on (moved to %DLQ%<group>).
func (m *brokerMetrics) recordDLQ(topic, group string, n int) {
	if m == nil {
		return
	}
	tm := m.topic(topic)
	v, ok := tm.dlq.Load(group)
	if !ok {
		v, _ = tm.dlq.LoadOrStore(group, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(int64(n))
}

// messageTypeOf classifies a send as RocketMQ 5's metrics do: transactional (TRAN_MSG=true),
// else FIFO (a sharding key), else delayed (a delay level or a timer property), else normal.
func messageTypeOf(props string) int {
	if v, ok := message.PropertyString(props, message.PropertyTransactionPrepared); ok && v == "true" {
		return msgTransaction
	}
	if _, ok := message.PropertyString(props, message.PropertyShardingKey); ok {
		return msgFIFO
	}
	if hasDelayProperty(props) {
		return msgDelay
	}
	if _, ok := message.PropertyString(props, "__STARTDELIVERTIME"); ok {
		return msgDelay
	}
	return msgNormal
}

// isSystem is RocketMQ's is_system label: a system topic or a system consumer group.
func isSystem(topic, group string) string {
	return boolLabel(meta.IsSystemTopic(topic) || strings.HasPrefix(strings.ToUpper(group), "CID_RMQ_SYS_"))
}

func boolLabel(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

var _ prometheus.Collector = (*brokerCollector)(nil)

// originalTopic is the topic a handed-back message was first sent to: its RETRY_TOPIC when it
// has been retried already, else its own topic.
func originalTopic(m *message.Message) string {
	if t, ok := message.PropertyString(m.Properties, message.PropertyRetryTopic); ok && t != "" {
		return t
	}
	return m.Topic
}
