package broker

// Prometheus metrics (package metrics has the names and the registry). The traffic counters are
// the broker's stats (stats.go), shared with GET_BROKER_RUNTIME_INFO; brokerCollector reads
// them, the store, the offset table and Raft when Prometheus scrapes /metrics.

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rocketraft/broker/meta"
	"rocketraft/config"
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

// brokerMetrics is the broker's metrics state: the registry and what only Prometheus reports.
// The traffic counters are the broker's stats (stats.go), which the collector reads.
type brokerMetrics struct {
	registry *metrics.Registry
	rpc      *metrics.RPC
	apply    *metrics.Histogram // DLedger mode: Raft append latency on the leader
}

// metricsSources is what a scrape reads: the configuration (permission, disk limit, store
// path), the traffic counters, the metadata tables and the node's place (its store and Raft).
type metricsSources struct {
	cfg     *config.Broker
	stats   *stats
	topics  *meta.Topics
	groups  *meta.Groups
	offsets *meta.Offsets
	place   place
}

// newBrokerMetrics builds the registry with the collector reading src. New calls it once the
// commitlog is open (the place decides whether appends are timed) and wraps the commitlog with
// timed.
func newBrokerMetrics(src metricsSources) *brokerMetrics {
	m := &brokerMetrics{
		registry: metrics.NewRegistry(metrics.Identity{Cluster: src.cfg.BrokerClusterName, NodeType: metrics.NodeTypeBroker, NodeID: src.cfg.BrokerName}),
		rpc:      metrics.NewRPC(),
		apply:    src.place.newApplyHistogram(), // DLedger mode; nil in classic mode
	}
	if err := m.registry.Register(m.rpc, &brokerCollector{src: src, apply: m.apply}); err != nil {
		panic("broker metrics: " + err.Error()) // duplicate descriptors: a programming error
	}
	return m
}

// timed is cl with its appends timed into the apply histogram when appends are replicated
// (DLedger mode), cl itself otherwise.
func (m *brokerMetrics) timed(cl CommitLog) CommitLog {
	if m.apply == nil {
		return cl
	}
	return timedCommitLog{cl, m.apply}
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

// AppendCall times the asynchronous append as Append times the synchronous one; over a commit
// log that only appends synchronously it appends and answers before returning.
func (t timedCommitLog) AppendCall(c *appendCall) {
	a, ok := t.CommitLog.(asyncCommitLog)
	if !ok {
		ctx, cancel := context.WithDeadline(context.Background(), c.deadline)
		defer cancel()
		c.done.appended(t.Append(ctx, c.records))
		return
	}
	c.timer, c.start = t.h, monoNow()
	a.AppendCall(c)
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
