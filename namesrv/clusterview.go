package namesrv

// The cluster view of the status page (statuspage.go): the route table's clusters, groups and
// topics, joined with what the brokers answered (their Raft status, their consumer groups'
// lag). Assembly is pure, so it is unit-tested without brokers.

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"

	"rocketraft/protocol"
)

// ClusterView is the JSON of GET /cluster on the name server's httpPort.
type ClusterView struct {
	// GeneratedAt is when the view was assembled, ms since the epoch.
	GeneratedAt    int64          `json:"generatedAt"`
	NameServer     string         `json:"nameServer"`
	Clusters       []ClusterEntry `json:"clusters"`
	Topics         []TopicView    `json:"topics"`
	ConsumerGroups []GroupLag     `json:"consumerGroups"`
	// Rates is the cluster-wide history of messages in and out per second over the masters,
	// one point per view (noderuntime.go).
	Rates []ClusterRate `json:"rates"`
	// Truncated says a list was cut at its bound (see statuspage.go).
	Truncated bool `json:"truncated,omitempty"`
}

// ClusterEntry is one cluster and its broker groups.
type ClusterEntry struct {
	Name   string      `json:"name"`
	Groups []GroupView `json:"groups"`
}

// GroupView is one broker name: a master/slave set, or a DLedger group when any member answered
// with a Raft status.
type GroupView struct {
	BrokerName string `json:"brokerName"`
	Raft       bool   `json:"raft"`
	// LeaderID and Term are the Raft leader's (the node reporting role leader with the highest
	// term); "" and 0 when no node leads.
	LeaderID string     `json:"leaderId"`
	Term     uint64     `json:"term"`
	Nodes    []NodeView `json:"nodes"`
}

// NodeView is one registered broker process.
type NodeView struct {
	Addr     string `json:"addr"`
	BrokerID int64  `json:"brokerId"`
	// Role is the registration's: MASTER for brokerId 0, else SLAVE.
	Role string `json:"role"`
	// Raft is the node's own GET_RAFT_STATUS answer (nil for classic brokers and failures).
	Raft *protocol.RaftStatus `json:"raft,omitempty"`
	// Leader: this node is its group's Raft leader.
	Leader bool `json:"leader"`
	// Lag is the leader's commit index minus this node's applied index; CommitLogLag the
	// leader's commitlog max offset minus this node's. -1 when unknown.
	Lag          int64  `json:"lag"`
	CommitLogLag int64  `json:"commitLogLag"`
	Error        string `json:"error,omitempty"`
	// Runtime is the node's runtime info (nil when it did not answer).
	Runtime *NodeRuntime `json:"runtime,omitempty"`
}

// TopicView is one routed topic; Brokers lists each group's queue counts as name:read/write.
type TopicView struct {
	Topic       string   `json:"topic"`
	System      bool     `json:"system"`
	ReadQueues  int32    `json:"readQueues"`
	WriteQueues int32    `json:"writeQueues"`
	Brokers     []string `json:"brokers"`
}

// GroupLag is one consumer group's lag on one topic of one broker group, as that group's
// master reports it (GET_CONSUME_STATS).
type GroupLag struct {
	Group      string `json:"group"`
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	Lag        int64  `json:"lag"`
}

// raftAnswer is one broker's reply to GET_RAFT_STATUS: a status, or why there is none.
type raftAnswer struct {
	status *protocol.RaftStatus
	err    error
}

// buildClusterView joins the route table's cluster info and topics with the brokers' answers
// (raft by broker address, lags by broker name). Everything is sorted; topics are cut at
// maxTopics.
func buildClusterView(ci *protocol.ClusterInfo, topics map[string]map[string]protocol.QueueData, raft map[string]raftAnswer,
	lags map[string][]GroupLag, maxTopics int) *ClusterView {
	v := &ClusterView{Clusters: []ClusterEntry{}, Topics: []TopicView{}, ConsumerGroups: []GroupLag{}}
	groupNames := map[string]bool{}
	for _, cname := range slices.Sorted(maps.Keys(ci.ClusterAddrTable)) {
		groupNames[cname] = true
		c := ClusterEntry{Name: cname, Groups: []GroupView{}}
		names := slices.Clone(ci.ClusterAddrTable[cname])
		slices.Sort(names)
		for _, name := range names {
			if bd := ci.BrokerAddrTable[name]; bd != nil {
				groupNames[name] = true
				c.Groups = append(c.Groups, groupView(bd, raft))
			}
		}
		v.Clusters = append(v.Clusters, c)
	}
	for _, topic := range slices.Sorted(maps.Keys(topics)) {
		if len(v.Topics) == maxTopics {
			v.Truncated = true
			break
		}
		tv := TopicView{Topic: topic, System: isSystemTopic(topic) || groupNames[topic], Brokers: []string{}}
		qds := topics[topic]
		for _, name := range slices.Sorted(maps.Keys(qds)) {
			qd := qds[name]
			tv.ReadQueues += qd.ReadQueueNums
			tv.WriteQueues += qd.WriteQueueNums
			tv.Brokers = append(tv.Brokers, name+":"+strconv.Itoa(int(qd.ReadQueueNums))+"/"+strconv.Itoa(int(qd.WriteQueueNums)))
		}
		v.Topics = append(v.Topics, tv)
	}
	for _, name := range slices.Sorted(maps.Keys(lags)) {
		v.ConsumerGroups = append(v.ConsumerGroups, lags[name]...)
	}
	slices.SortStableFunc(v.ConsumerGroups, func(a, b GroupLag) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Topic, b.Topic), strings.Compare(a.BrokerName, b.BrokerName))
	})
	return v
}

// groupView lists a group's registered members with their Raft answers, finds the leader and
// computes each node's lag behind it (as mqadmin raftStatus does).
func groupView(bd *protocol.BrokerData, raft map[string]raftAnswer) GroupView {
	g := GroupView{BrokerName: bd.BrokerName, Nodes: []NodeView{}}
	var leader *protocol.RaftStatus
	for _, id := range slices.Sorted(maps.Keys(bd.BrokerAddrs)) {
		n := NodeView{Addr: bd.BrokerAddrs[id], BrokerID: id, Role: "SLAVE", Lag: -1, CommitLogLag: -1}
		if id == protocol.MasterID {
			n.Role = "MASTER"
		}
		if a, ok := raft[n.Addr]; ok {
			n.Raft = a.status
			if a.err != nil {
				n.Error = a.err.Error()
			}
		}
		if s := n.Raft; s != nil {
			g.Raft = true
			if s.Role == protocol.RaftLeader && (leader == nil || s.Term > leader.Term) {
				leader = s
			}
		}
		g.Nodes = append(g.Nodes, n)
	}
	if leader == nil {
		return g
	}
	g.LeaderID, g.Term = leader.NodeID, leader.Term
	for i := range g.Nodes {
		if s := g.Nodes[i].Raft; s != nil {
			g.Nodes[i].Leader = s == leader
			g.Nodes[i].Lag = max(0, int64(leader.CommitIndex)-int64(s.AppliedIndex))
			g.Nodes[i].CommitLogLag = max(0, leader.CommitLogMaxOffset-s.CommitLogMaxOffset)
		}
	}
	return g
}

// consumeLags sums a group's GET_CONSUME_STATS by topic: per queue the broker's max offset
// minus the committed one (a queue without a committed offset counts from 0), never negative.
func consumeLags(group, brokerName string, cs *protocol.ConsumeStats) []GroupLag {
	byTopic := map[string]int64{}
	for mq, o := range cs.OffsetTable {
		byTopic[mq.Topic] += max(0, o.BrokerOffset-max(0, o.ConsumerOffset))
	}
	out := make([]GroupLag, 0, len(byTopic))
	for _, t := range slices.Sorted(maps.Keys(byTopic)) {
		out = append(out, GroupLag{Group: group, Topic: t, BrokerName: brokerName, Lag: byTopic[t]})
	}
	return out
}

// isSystemTopic recognises RocketMQ's internal topics (the page hides them by default).
func isSystemTopic(t string) bool {
	switch t {
	case "TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC":
		return true
	}
	if strings.HasSuffix(t, "_REPLY_TOPIC") {
		return true
	}
	for _, p := range []string{"RMQ_SYS_", "rmq_sys_", "%RETRY%", "%DLQ%"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}
