package broker

// Subscription-group administration and consumption progress: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
// DELETE_SUBSCRIPTIONGROUP, GET_ALL_SUBSCRIPTIONGROUP_CONFIG, GET_ALL_CONSUMER_OFFSET,
// GET_CONSUME_STATS, QUERY_TOPIC_CONSUME_BY_WHO.

import (
	"sort"

	"rocketraft/fsm"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// handleUpdateGroup serves UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (DLedger: forwarded by a follower,
// proposed through Raft by the leader).
func (b *Broker) handleUpdateGroup(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if fwd := b.forwardOrRefuse(conn, req); fwd != nil {
		return fwd
	}
	var gc protocol.SubscriptionGroupConfig
	if err := protocol.Decode(req.Body, &gc); err != nil {
		return req.NewResponse(remoting.SystemError, "bad subscription group body: "+err.Error())
	}
	if err := message.ValidateGroup(gc.GroupName); err != nil {
		return req.NewResponse(remoting.InvalidParameter, err.Error())
	}
	return b.tables.answerChange(req, "store subscription group", "group", gc.GroupName, &fsm.MetaOp{Op: fsm.OpPutGroup, Group: &gc})
}

// handleDeleteGroup serves DELETE_SUBSCRIPTIONGROUP. DLedger mode: forwarded by a follower; the
// leader proposes fsm's deleteGroup, which also deletes the group's consumer offsets on every
// node whatever cleanOffset says (the replicated op has no such flag); a classic broker deletes
// them only when cleanOffset is set, as RocketMQ's (fsm.MetaOp.KeepOffsets).
func (b *Broker) handleDeleteGroup(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if fwd := b.forwardOrRefuse(conn, req); fwd != nil {
		return fwd
	}
	group := req.Ext("groupName")
	if group == "" {
		return req.NewResponse(remoting.SystemError, "the custom field <groupName> is null")
	}
	op := &fsm.MetaOp{Op: fsm.OpDeleteGroup, Name: group, KeepOffsets: !req.ExtBool("cleanOffset")}
	return b.tables.answerChange(req, "delete subscription group", "group", group, op)
}

// handleGetAllGroupConfig serves GET_ALL_SUBSCRIPTIONGROUP_CONFIG: the whole group table.
func (b *Broker) handleGetAllGroupConfig(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return b.jsonResponse(req, b.groups.Wrapper())
}

// handleGetAllConsumerOffset serves GET_ALL_CONSUMER_OFFSET: the whole offset table.
func (b *Broker) handleGetAllConsumerOffset(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return b.jsonResponse(req, b.offsets.Wrapper())
}

// handleConsumeStats reports, per queue of the group's topics, how far the
// broker is ahead of the group (GET_CONSUME_STATS, used by consumerProgress).
func (b *Broker) handleConsumeStats(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group := req.Ext("consumerGroup")
	if group == "" {
		return req.NewResponse(remoting.SystemError, "the custom field <consumerGroup> is null")
	}
	topics := map[string]bool{}
	if t := req.Ext("topic"); t != "" {
		topics[t] = true
	} else {
		for _, t := range b.offsets.TopicsOfGroup(group) {
			topics[t] = true
		}
		for _, t := range b.clients.TopicsConsumedBy(group) {
			topics[t] = true
		}
	}
	stats := &protocol.ConsumeStats{OffsetTable: map[protocol.MessageQueue]protocol.OffsetWrapper{}}
	st, release, err := b.acquireStore()
	if err != nil {
		return storeUnavailable(req, err)
	}
	defer release() // the offset tables below are in-memory reads: nothing here waits
	for t := range topics {
		tc := b.topics.Get(t)
		if tc == nil {
			continue
		}
		for q := int32(0); q < tc.ReadQueueNums; q++ {
			consumer, ok := b.tables.committedOffset(group, t, q)
			if !ok {
				consumer = -1
			}
			pull, _ := b.offsets.PullOffset(group, t, q)
			stats.OffsetTable[protocol.MessageQueue{Topic: t, BrokerName: b.cfg.BrokerName, QueueID: q}] = protocol.OffsetWrapper{
				BrokerOffset: st.MaxOffset(t, q), ConsumerOffset: consumer, PullOffset: pull,
				LastTimestamp: lastStoreTime(st, t, q, consumer),
			}
		}
	}
	return b.fastjsonResponse(req, stats)
}

// handleConsumedByWho serves QUERY_TOPIC_CONSUME_BY_WHO: the groups with offsets on the topic or
// online consumers subscribed to it.
func (b *Broker) handleConsumedByWho(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic := req.Ext("topic")
	set := map[string]bool{}
	for _, g := range b.offsets.GroupsOfTopic(topic) {
		set[g] = true
	}
	for _, g := range b.clients.ConsumerGroups() {
		for _, t := range b.clients.TopicsConsumedBy(g) {
			if t == topic {
				set[g] = true
			}
		}
	}
	groups := make([]string, 0, len(set))
	for g := range set {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	return b.jsonResponse(req, struct {
		GroupList []string `json:"groupList"`
	}{groups})
}
