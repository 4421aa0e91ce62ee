package meta

import (
	"strings"

	"rocketraft/message"
	"rocketraft/protocol"
)

// System topic names (Java TopicValidator and MixAll); protocol only defines TBW102.
const (
	// SelfTestTopic is RMQ_SYS_SELF_TEST_TOPIC.
	SelfTestTopic = "SELF_TEST_TOPIC"
	// BenchmarkTopic is the topic Java's benchmark tools use.
	BenchmarkTopic = "BenchmarkTest"
	// OffsetMovedEventTopic receives events when a consumer's offset was corrected.
	OffsetMovedEventTopic = "OFFSET_MOVED_EVENT"
	// ScheduleTopic holds delayed messages, one queue per delay level.
	ScheduleTopic = "SCHEDULE_TOPIC_XXXX"
	// TransHalfTopic holds prepared (half) transactional messages.
	TransHalfTopic = "RMQ_SYS_TRANS_HALF_TOPIC"
	// TransOpHalfTopic records commit/rollback operations on half messages.
	TransOpHalfTopic = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
	// TransCheckMaxTimeTopic receives half messages whose check count ran out.
	TransCheckMaxTimeTopic = "TRANS_CHECK_MAX_TIME_TOPIC"
	// TraceTopic is the default message-trace topic.
	TraceTopic = "RMQ_SYS_TRACE_TOPIC"
	// ReplyTopicSuffix follows the cluster name in the request/reply topic.
	ReplyTopicSuffix = "_REPLY_TOPIC"
	// SystemTopicPrefix starts every 5.x system topic name.
	SystemTopicPrefix = "rmq_sys_"
)

// Queue counts of system topics.
const (
	// ScheduleTopicQueueNums is one queue per default delay level.
	ScheduleTopicQueueNums = 18
	// BenchmarkTopicQueueNums is Java's BenchmarkTest queue count.
	BenchmarkTopicQueueNums = 1024
	// clusterTopicQueueNums is TopicConfig's default, which the cluster-name topic keeps.
	clusterTopicQueueNums = 16
)

// SystemTopics returns the topics a Java broker creates at start (§10.5), in Java's order:
// SELF_TEST_TOPIC 1/1, TBW102 (defaultTopicQueueNums queues, perm 7) when auto-creation is
// enabled, BenchmarkTest 1024/1024, the cluster-name topic (16/16) and the broker-name topic
// (1/1), both perm INHERIT|READ|WRITE (clusterTopicEnable and brokerTopicEnable default true),
// OFFSET_MOVED_EVENT 1/1, SCHEDULE_TOPIC_XXXX 18/18, <cluster>_REPLY_TOPIC 1/1,
// RMQ_SYS_TRANS_HALF_TOPIC 1/1 and RMQ_SYS_TRANS_OP_HALF_TOPIC 1/1. Unless stated, perm is 6.
func SystemTopics(clusterName, brokerName string, autoCreateTopicEnable bool, defaultTopicQueueNums int32) []*protocol.TopicConfig {
	mk := func(name string, queues, perm int32) *protocol.TopicConfig {
		tc := protocol.NewTopicConfig(name)
		tc.ReadQueueNums, tc.WriteQueueNums, tc.Perm = queues, queues, perm
		return tc
	}
	rw, inheritRW := protocol.PermReadWrite, protocol.PermInherit|protocol.PermReadWrite
	out := []*protocol.TopicConfig{mk(SelfTestTopic, 1, rw)}
	if autoCreateTopicEnable {
		out = append(out, mk(protocol.AutoCreateTopicKey, defaultTopicQueueNums, inheritRW))
	}
	out = append(out, mk(BenchmarkTopic, BenchmarkTopicQueueNums, rw))
	if clusterName != "" {
		out = append(out, mk(clusterName, clusterTopicQueueNums, inheritRW))
	}
	if brokerName != "" && brokerName != clusterName {
		out = append(out, mk(brokerName, 1, inheritRW))
	}
	out = append(out,
		mk(OffsetMovedEventTopic, 1, rw),
		mk(ScheduleTopic, ScheduleTopicQueueNums, rw),
	)
	if clusterName != "" {
		out = append(out, mk(clusterName+ReplyTopicSuffix, 1, rw))
	}
	return append(out, mk(TransHalfTopic, 1, rw), mk(TransOpHalfTopic, 1, rw))
}

var systemTopics = map[string]bool{
	protocol.AutoCreateTopicKey: true,
	SelfTestTopic:               true,
	BenchmarkTopic:              true,
	OffsetMovedEventTopic:       true,
	ScheduleTopic:               true,
	TransHalfTopic:              true,
	TransOpHalfTopic:            true,
	TransCheckMaxTimeTopic:      true,
	TraceTopic:                  true,
}

// IsSystemTopic reports whether name is one of Java's fixed system topics or starts with
// "rmq_sys_" (TopicValidator.isSystemTopic). Java also registers the cluster-name and
// broker-name topics as system topics at start; this function has no broker context, so callers
// must compare those names themselves.
func IsSystemTopic(name string) bool {
	return systemTopics[name] || strings.HasPrefix(name, SystemTopicPrefix)
}

var notAllowedToSend = map[string]bool{
	ScheduleTopic:          true,
	TransHalfTopic:         true,
	TransOpHalfTopic:       true,
	TransCheckMaxTimeTopic: true,
	SelfTestTopic:          true,
	OffsetMovedEventTopic:  true,
	message.RaftEntryTopic: true,
}

// IsNotAllowedToSend reports whether producers are refused (NO_PERMISSION) when sending to name
// (§2.4 step 4).
func IsNotAllowedToSend(name string) bool { return notAllowedToSend[name] }
