package broker

import (
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rocketraft/message"
	"rocketraft/metrics"
	"rocketraft/protocol"
	"rocketraft/storage"
	"rocketraft/storage/vfs"
)

// Descriptors of the broker's scrape-time metrics (identity labels are added by the registry).
var (
	descMessagesIn = metrics.Desc(metrics.MessagesInTotal, "Messages stored by producers' sends, by the topic they named.",
		metrics.LabelTopic, metrics.LabelMessageType, metrics.LabelIsSystem)
	descThroughputIn = metrics.Desc(metrics.ThroughputInTotal, "Bytes stored by producers' sends (stored record size).",
		metrics.LabelTopic, metrics.LabelMessageType, metrics.LabelIsSystem)
	descMessageSize = metrics.Desc(metrics.MessageSize, "Size of stored messages in bytes.",
		metrics.LabelTopic, metrics.LabelMessageType, metrics.LabelIsSystem)
	descMessagesOut = metrics.Desc(metrics.MessagesOutTotal, "Messages handed to consumers by pulls (retry and DLQ topics excluded).",
		metrics.LabelTopic, metrics.LabelConsumerGroup, metrics.LabelIsSystem)
	descThroughputOut = metrics.Desc(metrics.ThroughputOutTotal, "Bytes handed to consumers by pulls.",
		metrics.LabelTopic, metrics.LabelConsumerGroup, metrics.LabelIsSystem)
	descDLQ = metrics.Desc(metrics.SendToDLQTotal, "Messages a consumer group gave up on (moved to its DLQ), by their original topic.",
		metrics.LabelTopic, metrics.LabelConsumerGroup, metrics.LabelIsSystem)
	descLagMessages = metrics.Desc(metrics.ConsumerLagMessages, "Messages stored after the group's committed offset, summed over the topic's queues.",
		metrics.LabelTopic, metrics.LabelConsumerGroup, metrics.LabelIsRetry, metrics.LabelIsSystem)
	descLagLatency = metrics.Desc(metrics.ConsumerLagLatency, "Age in ms of the oldest message the group has not committed (0 without lag).",
		metrics.LabelTopic, metrics.LabelConsumerGroup, metrics.LabelIsRetry, metrics.LabelIsSystem)

	descPermission = metrics.Desc(metrics.BrokerPermission, "brokerPermission bits (READ 4 | WRITE 2 | INHERIT 1).")
	descTopics     = metrics.Desc(metrics.TopicNumber, "Topics in the broker's topic table.")
	descGroups     = metrics.Desc(metrics.ConsumerGroupNumber, "Subscription groups in the broker's table.")

	descStorageSize    = metrics.Desc(metrics.StorageSize, "Bytes in use on the file system holding storePathRootDir.", metrics.LabelStorageType, metrics.LabelStorageMedium)
	descFlushBehind    = metrics.Desc(metrics.StorageFlushBehind, "Commitlog bytes written but not yet flushed.", metrics.LabelStorageType, metrics.LabelStorageMedium)
	descDispatchBehind = metrics.Desc(metrics.StorageDispatchBeh, "Commitlog bytes not yet in consume queues (always 0: dispatch is part of the append).", metrics.LabelStorageType, metrics.LabelStorageMedium)
	descReserveTime    = metrics.Desc(metrics.StorageReserveTime, "Age in ms of the oldest message in the commitlog.", metrics.LabelStorageType, metrics.LabelStorageMedium)
	descDiskUsed       = metrics.Desc(metrics.StorageDiskUsedRatio, "Percent of the store's file system in use; sends are refused above rocketmq_storage_disk_max_used_ratio.")
	descDiskMax        = metrics.Desc(metrics.StorageDiskMaxRatio, "diskMaxUsedSpaceRatio, percent.")
	descDiskFull       = metrics.Desc(metrics.StorageDiskFull, "1 while the store refuses appends for disk usage.")

	descRaftTerm       = metrics.Desc(metrics.RaftTerm, "Current Raft term.", metrics.LabelRaftGroup, metrics.LabelRaftPeer)
	descRaftCommit     = metrics.Desc(metrics.RaftCommitIndex, "Raft commit index.", metrics.LabelRaftGroup, metrics.LabelRaftPeer)
	descRaftApplied    = metrics.Desc(metrics.RaftAppliedIndex, "Raft index applied to the store.", metrics.LabelRaftGroup, metrics.LabelRaftPeer)
	descRaftLastLog    = metrics.Desc(metrics.RaftLastLogIndex, "Last index in the Raft log.", metrics.LabelRaftGroup, metrics.LabelRaftPeer)
	descRaftState      = metrics.Desc(metrics.RaftState, "1 for this node's current Raft state.", metrics.LabelRaftGroup, metrics.LabelRaftPeer, metrics.LabelRaftState)
	descRaftChanges    = metrics.Desc(metrics.RaftLeaderChanges, "Leaders this node learned of since it started (the first included).", metrics.LabelRaftGroup, metrics.LabelRaftPeer)
	descRaftFailover   = metrics.Desc(metrics.RaftLastFailover, "How long in ms the group was without a leader the last time it lost one, as this node saw it (0 before any).", metrics.LabelRaftGroup, metrics.LabelRaftPeer)
	descRaftLeaderless = metrics.Desc(metrics.RaftLeaderlessSince, "Unix ms since which this node sees no leader; 0 while one is known.", metrics.LabelRaftGroup, metrics.LabelRaftPeer)
	descRaftDiverged   = metrics.Desc(metrics.RaftDiverged, "1 once a digest check found that this replica applied other entries than its leader: it stopped serving and must be rebuilt from its group.", metrics.LabelRaftGroup, metrics.LabelRaftPeer)
	descRaftChecked    = metrics.Desc(metrics.RaftDigestChecked, "The last Raft index whose digest a check confirmed equal to the leader's on this node.", metrics.LabelRaftGroup, metrics.LabelRaftPeer)
	descRaftApply      = metrics.Desc(metrics.RaftApplyLatency, "Time in ms from proposing a send's records to their being applied on the leader.", metrics.LabelRaftGroup, metrics.LabelRaftPeer)
)

var raftStates = [...]string{"Follower", "Candidate", "Leader", "Shutdown"}

// brokerCollector turns the broker's counters and state into metrics at scrape time; apply is
// the Raft append latency histogram (nil in classic mode).
type brokerCollector struct {
	src   metricsSources
	apply *metrics.Histogram
}

// Describe implements prometheus.Collector.
func (c *brokerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMessagesIn, descThroughputIn, descMessageSize, descMessagesOut,
		descThroughputOut, descDLQ, descLagMessages, descLagLatency, descPermission, descTopics, descGroups,
		descStorageSize, descFlushBehind, descDispatchBehind, descReserveTime, descDiskUsed, descDiskMax, descDiskFull,
		descRaftTerm, descRaftCommit, descRaftApplied, descRaftLastLog, descRaftState, descRaftChanges,
		descRaftFailover, descRaftLeaderless, descRaftApply, descRaftDiverged, descRaftChecked} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *brokerCollector) Collect(ch chan<- prometheus.Metric) {
	e := metrics.Emitter{Ch: ch}
	c.collectTraffic(e)
	e.Gauge(descPermission, float64(c.src.cfg.BrokerPermission))
	e.Gauge(descTopics, float64(len(c.src.topics.Names())))
	e.Gauge(descGroups, float64(len(c.src.groups.Names())))
	c.collectStore(e)
	c.collectLag(e, time.Now())
	c.collectRaft(e)
}

// collectTraffic reports the send, pull and DLQ counters.
func (c *brokerCollector) collectTraffic(e metrics.Emitter) {
	c.src.stats.topics.Range(func(k, v any) bool {
		topic, tm := k.(string), v.(*topicMetrics)
		sys := isSystem(topic, "")
		for i := range tm.in {
			in := &tm.in[i]
			n := in.msgs.Load()
			if n == 0 {
				continue
			}
			e.Counter(descMessagesIn, float64(n), topic, messageTypeNames[i], sys)
			e.Counter(descThroughputIn, float64(in.bytes.Load()), topic, messageTypeNames[i], sys)
			e.Histogram(descMessageSize, in.size, topic, messageTypeNames[i], sys)
		}
		tm.out.Range(func(g, v any) bool {
			group, out := g.(string), v.(*outCounters)
			e.Counter(descMessagesOut, float64(out.msgs.Load()), topic, group, isSystem(topic, group))
			e.Counter(descThroughputOut, float64(out.bytes.Load()), topic, group, isSystem(topic, group))
			return true
		})
		tm.dlq.Range(func(g, v any) bool {
			group := g.(string)
			e.Counter(descDLQ, float64(v.(*atomic.Int64).Load()), topic, group, isSystem(topic, group))
			return true
		})
		return true
	})
}

// collectStore reports the storage figures and disk usage against diskMaxUsedSpaceRatio.
func (c *brokerCollector) collectStore(e metrics.Emitter) {
	e.Gauge(descDiskMax, float64(c.src.cfg.DiskMaxUsedSpaceRatio))
	if u, err := (vfs.OS{}).DiskUsage(c.src.cfg.StorePathRootDir); err == nil {
		e.Gauge(descStorageSize, float64(u.Used), metrics.StorageTypeLocal, metrics.StorageMediumDisk)
		e.Gauge(descDiskUsed, u.Ratio())
	}
	st, release, err := c.src.place.acquire()
	if err != nil {
		return
	}
	stats := st.Stats()
	oldest := int64(0)
	if stats.CommitLogMaxOffset > stats.CommitLogMinOffset {
		oldest = recordStoreTime(st, stats.CommitLogMinOffset)
	}
	release()
	e.Gauge(descFlushBehind, float64(max(stats.CommitLogMaxOffset-stats.CommitLogFlushed, 0)), metrics.StorageTypeLocal, metrics.StorageMediumDisk)
	e.Gauge(descDispatchBehind, 0, metrics.StorageTypeLocal, metrics.StorageMediumDisk)
	if oldest > 0 {
		e.Gauge(descReserveTime, float64(max(time.Now().UnixMilli()-oldest, 0)), metrics.StorageTypeLocal, metrics.StorageMediumDisk)
	}
	e.Gauge(descDiskFull, metrics.BoolValue(stats.DiskFull))
}

// recordStoreTime is the store time of the commitlog record at phys, or 0.
func recordStoreTime(st *storage.Store, phys int64) int64 {
	raw, err := st.ReadRecord(phys)
	if err != nil {
		return 0
	}
	v, err := message.ParseView(raw)
	if err != nil {
		return 0
	}
	return v.StoreTimestamp()
}

// collectLag reports each (topic, group) with committed offsets: how many messages follow the
// committed offsets, and how old the oldest of them is. The work is bounded by lagMaxPairs,
// lagMaxQueues and lagMaxReads; pairs beyond them are left out of this scrape.
func (c *brokerCollector) collectLag(e metrics.Emitter, now time.Time) {
	table := c.src.offsets.Wrapper().OffsetTable
	keys := make([]string, 0, len(table))
	for k := range table {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) > lagMaxPairs {
		keys = keys[:lagMaxPairs]
	}
	st, release, err := c.src.place.acquire()
	if err != nil {
		return
	}
	defer release()
	queues, reads := 0, 0
	for _, k := range keys {
		topic, group, ok := protocol.SplitOffsetKey(k)
		if !ok {
			continue
		}
		qs := table[k]
		if queues+len(qs) > lagMaxQueues {
			break
		}
		queues += len(qs)
		var lag, oldest int64
		for qid, committed := range qs {
			if committed < 0 {
				continue
			}
			from := max(committed, st.MinOffset(topic, qid))
			maxOff := st.MaxOffset(topic, qid)
			if maxOff <= from {
				continue
			}
			lag += maxOff - from
			if reads < lagMaxReads {
				reads++
				if ts := queueStoreTime(st, topic, qid, from); ts > 0 && (oldest == 0 || ts < oldest) {
					oldest = ts
				}
			}
		}
		latency := int64(0)
		if oldest > 0 {
			latency = max(now.UnixMilli()-oldest, 0)
		}
		retry := boolLabel(strings.HasPrefix(topic, message.RetryTopicPrefix))
		sys := isSystem(topic, group)
		e.Gauge(descLagMessages, float64(lag), topic, group, retry, sys)
		e.Gauge(descLagLatency, float64(latency), topic, group, retry, sys)
	}
}

// queueStoreTime is the store time of the message at a queue offset, or 0.
func queueStoreTime(st *storage.Store, topic string, qid int32, offset int64) int64 {
	res := st.GetMessages(topic, qid, offset, 1, maxPullBytes, nil)
	if len(res.Records) == 0 {
		return 0
	}
	v, err := message.ParseView(res.Records[0])
	if err != nil {
		return 0
	}
	return v.StoreTimestamp()
}

// collectRaft reports the node's Raft state (DLedger mode only).
func (c *brokerCollector) collectRaft(e metrics.Emitter) {
	rp, err := c.src.place.raft()
	if err != nil {
		return
	}
	node := rp.node
	s := node.Status()
	g, p := s.Group, s.ID
	e.Gauge(descRaftTerm, float64(s.Term), g, p)
	e.Gauge(descRaftCommit, float64(s.CommitIndex), g, p)
	e.Gauge(descRaftApplied, float64(s.AppliedIndex), g, p)
	e.Gauge(descRaftLastLog, float64(s.LastLogIndex), g, p)
	for _, state := range raftStates {
		e.Gauge(descRaftState, metrics.BoolValue(s.State == state), g, p, state)
	}
	ls := node.LeaderStats()
	e.Counter(descRaftChanges, float64(ls.Changes), g, p)
	e.Gauge(descRaftFailover, float64(ls.LastFailover)/float64(time.Millisecond), g, p)
	since := int64(0)
	if !ls.LeaderlessSince.IsZero() {
		since = ls.LeaderlessSince.UnixMilli()
	}
	e.Gauge(descRaftLeaderless, float64(since), g, p)
	diverged := 0.0
	if rp.fsm.Diverged() != nil {
		diverged = 1
	}
	e.Gauge(descRaftDiverged, diverged, g, p)
	e.Gauge(descRaftChecked, float64(rp.fsm.CheckedIndex()), g, p)
	if c.apply != nil {
		e.Histogram(descRaftApply, c.apply, g, p)
	}
}
