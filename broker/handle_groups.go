package broker

// Subscription-group administration and consumption progress: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
// DELETE_SUBSCRIPTIONGROUP, GET_ALL_SUBSCRIPTIONGROUP_CONFIG, GET_ALL_CONSUMER_OFFSET,
// GET_CONSUME_STATS, QUERY_TOPIC_CONSUME_BY_WHO.

import (
	"sort"

	"rocketraft/broker/clients"
	"rocketraft/broker/meta"
	"rocketraft/config"
	"rocketraft/fsm"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// groupHandlers answers the subscription-group administration and consumption-progress codes
// (and GET_SUBSCRIPTIONGROUP_CONFIG, topicattr.go). It reads the tables, the online clients and
// the store; group changes go through answerChange (metachange.go), so it never decides the
// mode itself.
type groupHandlers struct {
	cfg     *config.Broker
	topics  *meta.Topics
	groups  *meta.Groups
	offsets *meta.Offsets
	clients *clients.Manager
	// acquire is the store reads go to (Broker.acquireStore's rules).
	acquire func() (*storage.Store, func(), error)
	// committedOffset is this node's latest view of a group's offset (a Raft leader's queued
	// commits win over the table).
	committedOffset func(group, topic string, qid int32) (int64, bool)
	// forward relays a write a DLedger follower received to the leader (nil: serve it here).
	forward func(conn *remoting.Conn, req *remoting.Command) *remoting.Command
	// answerChange makes a metadata change under the group's lock and answers the request.
	answerChange func(req *remoting.Command, what, kind, name string, op *fsm.MetaOp) *remoting.Command
}

// handleUpdateGroup serves UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (DLedger: forwarded by a follower,
// proposed through Raft by the leader).
func (h *groupHandlers) handleUpdateGroup(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if fwd := h.forward(conn, req); fwd != nil {
		return fwd
	}
	var gc protocol.SubscriptionGroupConfig
	if err := protocol.Decode(req.Body, &gc); err != nil {
		return req.NewResponse(remoting.SystemError, "bad subscription group body: "+err.Error())
	}
	if err := message.ValidateGroup(gc.GroupName); err != nil {
		return req.NewResponse(remoting.InvalidParameter, err.Error())
	}
	return h.answerChange(req, "store subscription group", "group", gc.GroupName, &fsm.MetaOp{Op: fsm.OpPutGroup, Group: &gc})
}

// handleDeleteGroup serves DELETE_SUBSCRIPTIONGROUP. DLedger mode: forwarded by a follower; the
// leader proposes fsm's deleteGroup, which also deletes the group's consumer offsets on every
// node whatever cleanOffset says (the replicated op has no such flag); a classic broker deletes
// them only when cleanOffset is set, as RocketMQ's (fsm.MetaOp.KeepOffsets).
func (h *groupHandlers) handleDeleteGroup(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if fwd := h.forward(conn, req); fwd != nil {
		return fwd
	}
	group := req.Ext("groupName")
	if group == "" {
		return req.NewResponse(remoting.SystemError, "the custom field <groupName> is null")
	}
	op := &fsm.MetaOp{Op: fsm.OpDeleteGroup, Name: group, KeepOffsets: !req.ExtBool("cleanOffset")}
	return h.answerChange(req, "delete subscription group", "group", group, op)
}

// handleGetAllGroupConfig serves GET_ALL_SUBSCRIPTIONGROUP_CONFIG: the whole group table.
func (h *groupHandlers) handleGetAllGroupConfig(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return jsonResponse(req, h.groups.Wrapper())
}

// handleGetAllConsumerOffset serves GET_ALL_CONSUMER_OFFSET: the whole offset table.
func (h *groupHandlers) handleGetAllConsumerOffset(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return jsonResponse(req, h.offsets.Wrapper())
}

// handleConsumeStats reports, per queue of the group's topics, how far the
// broker is ahead of the group (GET_CONSUME_STATS, used by consumerProgress).
func (h *groupHandlers) handleConsumeStats(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group := req.Ext("consumerGroup")
	if group == "" {
		return req.NewResponse(remoting.SystemError, "the custom field <consumerGroup> is null")
	}
	topics := map[string]bool{}
	if t := req.Ext("topic"); t != "" {
		topics[t] = true
	} else {
		for _, t := range h.offsets.TopicsOfGroup(group) {
			topics[t] = true
		}
		for _, t := range h.clients.TopicsConsumedBy(group) {
			topics[t] = true
		}
	}
	stats := &protocol.ConsumeStats{OffsetTable: map[protocol.MessageQueue]protocol.OffsetWrapper{}}
	st, release, err := h.acquire()
	if err != nil {
		return storeUnavailable(req, err)
	}
	defer release() // the offset tables below are in-memory reads: nothing here waits
	for t := range topics {
		tc := h.topics.Get(t)
		if tc == nil {
			continue
		}
		for q := int32(0); q < tc.ReadQueueNums; q++ {
			consumer, ok := h.committedOffset(group, t, q)
			if !ok {
				consumer = -1
			}
			pull, _ := h.offsets.PullOffset(group, t, q)
			stats.OffsetTable[protocol.MessageQueue{Topic: t, BrokerName: h.cfg.BrokerName, QueueID: q}] = protocol.OffsetWrapper{
				BrokerOffset: st.MaxOffset(t, q), ConsumerOffset: consumer, PullOffset: pull,
				LastTimestamp: lastStoreTime(st, t, q, consumer),
			}
		}
	}
	return fastjsonResponse(req, stats)
}

// handleConsumedByWho serves QUERY_TOPIC_CONSUME_BY_WHO: the groups with offsets on the topic or
// online consumers subscribed to it.
func (h *groupHandlers) handleConsumedByWho(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic := req.Ext("topic")
	set := map[string]bool{}
	for _, g := range h.offsets.GroupsOfTopic(topic) {
		set[g] = true
	}
	for _, g := range h.clients.ConsumerGroups() {
		for _, t := range h.clients.TopicsConsumedBy(g) {
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
	return jsonResponse(req, struct {
		GroupList []string `json:"groupList"`
	}{groups})
}
