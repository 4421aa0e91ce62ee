// Package metrics exposes the broker's and the name server's figures to Prometheus, under the
// metric names and labels RocketMQ 5 uses (BrokerMetricsConstant, RemotingMetricsConstant,
// DefaultStoreMetricsConstant), so that dashboards and alerts written for RocketMQ work
// unchanged, plus the Raft figures RocketMQ does not have.
//
// Each process builds one Registry (never Prometheus's global default, so two servers in one
// test process do not collide) whose registerer adds the identity labels cluster, node_type
// and node_id to every metric. The hot paths (send, pull, request dispatch) only add to
// atomics: collectors read those counters when Prometheus scrapes and turn them into constant
// metrics, so a scrape costs work and a send does not.
//
// Units follow RocketMQ, not Prometheus's base-unit convention: latencies are milliseconds,
// sizes bytes, and names carry no unit suffix (rocketmq_rpc_latency, not ..._seconds).
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Label names (RocketMQ 5's).
const (
	LabelCluster       = "cluster"
	LabelNodeType      = "node_type"
	LabelNodeID        = "node_id"
	LabelTopic         = "topic"
	LabelConsumerGroup = "consumer_group"
	LabelMessageType   = "message_type"
	LabelIsSystem      = "is_system"
	LabelIsRetry       = "is_retry"
	LabelProtocolType  = "protocol_type"
	LabelRequestCode   = "request_code"
	LabelResponseCode  = "response_code"
	LabelStorageType   = "storage_type"
	LabelStorageMedium = "storage_medium"
	// LabelRaftGroup and LabelRaftPeer (ours) name the Raft group (dLegerGroup) and this
	// node's id in it (dLegerSelfId): node_id is the broker name, shared by a group's replicas.
	LabelRaftGroup = "raft_group"
	LabelRaftPeer  = "raft_peer"
	LabelRaftState = "state"
)

// node_type values and fixed label values.
const (
	NodeTypeBroker       = "broker"
	NodeTypeNameserver   = "nameserver"
	ProtocolTypeRemoting = "remoting"
	StorageTypeLocal     = "local"
	StorageMediumDisk    = "disk"
)

// message_type values (RocketMQ's TopicMessageType as its metrics print it).
const (
	MessageTypeNormal      = "Normal"
	MessageTypeFIFO        = "FIFO"
	MessageTypeDelay       = "Delay"
	MessageTypeTransaction = "Transaction"
)

// Metric names. The rocketmq_* ones without a comment are RocketMQ 5's.
const (
	MessagesInTotal      = "rocketmq_messages_in_total"
	MessagesOutTotal     = "rocketmq_messages_out_total"
	ThroughputInTotal    = "rocketmq_throughput_in_total"
	ThroughputOutTotal   = "rocketmq_throughput_out_total"
	MessageSize          = "rocketmq_message_size"
	ConsumerLagMessages  = "rocketmq_consumer_lag_messages"
	ConsumerLagLatency   = "rocketmq_consumer_lag_latency"
	SendToDLQTotal       = "rocketmq_send_to_dlq_messages_total"
	RPCLatency           = "rocketmq_rpc_latency"
	BrokerPermission     = "rocketmq_broker_permission"
	TopicNumber          = "rocketmq_topic_number"
	ConsumerGroupNumber  = "rocketmq_consumer_group_number"
	StorageSize          = "rocketmq_storage_size"
	StorageFlushBehind   = "rocketmq_storage_flush_behind_bytes"
	StorageDispatchBeh   = "rocketmq_storage_dispatch_behind_bytes"
	StorageReserveTime   = "rocketmq_storage_message_reserve_time"
	StorageDiskUsedRatio = "rocketmq_storage_disk_used_ratio"     // ours: percent of the store's file system in use
	StorageDiskMaxRatio  = "rocketmq_storage_disk_max_used_ratio" // ours: diskMaxUsedSpaceRatio, percent
	StorageDiskFull      = "rocketmq_storage_disk_full"           // ours: 1 while sends are refused for disk usage

	RaftTerm            = "rocketmq_raft_term"                    // ours
	RaftCommitIndex     = "rocketmq_raft_commit_index"            // ours
	RaftAppliedIndex    = "rocketmq_raft_applied_index"           // ours
	RaftLastLogIndex    = "rocketmq_raft_last_log_index"          // ours
	RaftState           = "rocketmq_raft_state"                   // ours: 1 for the current state
	RaftLeaderChanges   = "rocketmq_raft_leader_changes_total"    // ours
	RaftApplyLatency    = "rocketmq_raft_apply_latency"           // ours: ms, proposal to applied on the leader
	RaftLastFailover    = "rocketmq_raft_last_failover_duration"  // ours: ms
	RaftLeaderlessSince = "rocketmq_raft_leaderless_since_unixms" // ours: 0 while a leader is known
	RaftDiverged        = "rocketmq_raft_replica_diverged"        // ours: 1 once a digest check failed on this node
	RaftDigestChecked   = "rocketmq_raft_digest_checked_index"    // ours: the last index a digest check confirmed

	NamesrvClusters     = "rocketmq_namesrv_clusters"      // ours
	NamesrvBrokerGroups = "rocketmq_namesrv_broker_groups" // ours: broker names
	NamesrvBrokers      = "rocketmq_namesrv_brokers"       // ours: live broker processes
	NamesrvTopics       = "rocketmq_namesrv_topics"        // ours
)

// Bucket bounds: RocketMQ's views for message size (bytes) and rpc latency (ms); ours for the
// Raft apply latency (ms).
var (
	MessageSizeBuckets  = []float64{1 << 10, 4 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20}
	RPCLatencyBuckets   = []float64{1, 3, 5, 7, 10, 100, 1000, 2000, 3000}
	ApplyLatencyBuckets = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000}
)

// Identity is what every metric of a process is labelled with: cluster (brokerClusterName;
// empty for a name server, which belongs to none), node_type and node_id (the broker name, as
// RocketMQ labels it; a name server's listen address).
type Identity struct {
	Cluster  string
	NodeType string
	NodeID   string
}

// Registry is one process's metrics: a dedicated prometheus.Registry (Go runtime and process
// collectors included) and a registerer that labels everything registered through it with the
// Identity.
type Registry struct {
	reg     *prometheus.Registry
	labeled prometheus.Registerer
}

// NewRegistry returns an empty registry for id, holding only the Go and process collectors.
func NewRegistry(id Identity) *Registry {
	reg := prometheus.NewRegistry()
	// The scheduler's metrics too: go_sched_latencies_seconds (how long runnable goroutines wait
	// for a processor) is what says a broker is short of CPUs (maxProcs, docs/operations.md).
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.MetricsScheduler)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	labels := prometheus.Labels{LabelNodeType: id.NodeType, LabelNodeID: id.NodeID}
	if id.Cluster != "" {
		labels[LabelCluster] = id.Cluster
	}
	return &Registry{reg: reg, labeled: prometheus.WrapRegistererWith(labels, reg)}
}

// Register adds collectors; their metrics get the identity labels.
func (r *Registry) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := r.labeled.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Gatherer is the registry for tests and other exporters.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Handler serves the registry in Prometheus's text (or negotiated) format, for /metrics.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// BoolValue is 1 for true, 0 for false: how booleans are exported as gauges.
func BoolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
