package broker

// Topic administration: UPDATE_AND_CREATE_TOPIC, DELETE_TOPIC_IN_BROKER, GET_ALL_TOPIC_CONFIG,
// GET_TOPIC_STATS_INFO (the single topic's config and attributes: topicattr.go).

import (
	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/meta"
	"rocketraft/config"
	"rocketraft/fsm"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// topicHandlers answers the topic administration codes. It owns no state: it reads the topic
// table and the store, and changes topics only through changeMeta/answerChange, so the classic
// and Raft paths (place.go) stay the metadata change path's business (metachange.go).
type topicHandlers struct {
	cfg    *config.Broker
	topics *meta.Topics
	// metaMu serialises one topic's check and change with the other writers of that name.
	metaMu *nameLocks
	logger hclog.Logger
	// acquire is the store reads go to (Broker.acquireStore's rules).
	acquire func() (*storage.Store, func(), error)
	// forward relays a write a DLedger follower received to the leader (nil: serve it here).
	forward func(conn *remoting.Conn, req *remoting.Command) *remoting.Command
	// changeMeta makes one metadata change happen; answerChange does so under a name's lock and
	// answers the request.
	changeMeta   func(op *fsm.MetaOp) error
	answerChange func(req *remoting.Command, what, kind, name string, op *fsm.MetaOp) *remoting.Command
	// triggerRegister tells the name servers about the changed topic table.
	triggerRegister func()
}

// handleUpdateTopic serves UPDATE_AND_CREATE_TOPIC. DLedger mode: a follower forwards it to the
// leader, which answers once the config is committed through Raft and applied on the leader.
func (h *topicHandlers) handleUpdateTopic(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if fwd := h.forward(conn, req); fwd != nil {
		return fwd
	}
	topic := req.Ext("topic")
	if err := message.ValidateTopic(topic); err != nil {
		return req.NewResponse(remoting.InvalidParameter, "invalid topic: "+err.Error())
	}
	if meta.IsSystemTopic(topic) && h.topics.Get(topic) == nil {
		return req.NewResponse(remoting.InvalidParameter, "The topic["+topic+"] is conflict with system topic.")
	}
	tc := protocol.NewTopicConfig(topic)
	var err error
	if tc.ReadQueueNums, err = req.ExtInt32("readQueueNums"); err != nil {
		return req.NewResponse(remoting.SystemError, err.Error())
	}
	if tc.WriteQueueNums, err = req.ExtInt32("writeQueueNums"); err != nil {
		return req.NewResponse(remoting.SystemError, err.Error())
	}
	if tc.Perm, err = req.ExtInt32("perm"); err != nil {
		return req.NewResponse(remoting.SystemError, err.Error())
	}
	if tc.ReadQueueNums <= 0 || tc.WriteQueueNums <= 0 || tc.ReadQueueNums > 1024 || tc.WriteQueueNums > 1024 {
		return req.NewResponse(remoting.InvalidParameter, "queue numbers must be between 1 and 1024")
	}
	if f := req.Ext("topicFilterType"); f != "" {
		if f != protocol.FilterSingleTag && f != protocol.FilterMultiTag {
			return req.NewResponse(remoting.InvalidParameter, "unknown topicFilterType "+f)
		}
		tc.TopicFilterType = f
	}
	tc.TopicSysFlag = int32(req.ExtInt64Or("topicSysFlag", 0))
	tc.Order = req.ExtBool("order")
	unlock := h.metaMu.lock("topic", topic)
	if resp := h.topicAttributes(req, tc); resp != nil {
		unlock()
		return resp
	}
	err = h.changeMeta(&fsm.MetaOp{Op: fsm.OpPutTopic, Topic: tc})
	unlock()
	if err != nil {
		return metaErrorResponse(req, "store topic config", err)
	}
	h.logger.Info("topic created or updated", "topic", topic, "read", tc.ReadQueueNums, "write", tc.WriteQueueNums, "perm", tc.Perm, "attributes", tc.Attributes)
	h.triggerRegister()
	return req.NewResponse(remoting.Success, "")
}

// handleDeleteTopic serves DELETE_TOPIC_IN_BROKER. DLedger mode: a follower forwards it; the
// leader proposes fsm's deleteTopic, which every node applies to its config, its consumer offsets
// of the topic and its consume queues (the state machine deletes those deterministically).
func (h *topicHandlers) handleDeleteTopic(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if fwd := h.forward(conn, req); fwd != nil {
		return fwd
	}
	topic := req.Ext("topic")
	if topic == "" {
		return req.NewResponse(remoting.SystemError, "the custom field <topic> is null")
	}
	if meta.IsSystemTopic(topic) {
		return req.NewResponse(remoting.InvalidParameter, "system topic "+topic+" cannot be deleted")
	}
	resp := h.answerChange(req, "delete topic", "topic", topic, &fsm.MetaOp{Op: fsm.OpDeleteTopic, Name: topic})
	if resp.Code == remoting.Success {
		h.logger.Info("topic deleted", "topic", topic)
		h.triggerRegister()
	}
	return resp
}

// handleGetAllTopicConfig serves GET_ALL_TOPIC_CONFIG: the whole topic table.
func (h *topicHandlers) handleGetAllTopicConfig(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return jsonResponse(req, h.topics.Wrapper())
}

// handleTopicStats serves GET_TOPIC_STATS_INFO: each write queue's offsets and last store time.
func (h *topicHandlers) handleTopicStats(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic := req.Ext("topic")
	tc := h.topics.Get(topic)
	if tc == nil {
		return req.NewResponse(remoting.TopicNotExist, "topic["+topic+"] not exist")
	}
	table := &protocol.TopicStatsTable{OffsetTable: map[protocol.MessageQueue]protocol.TopicOffset{}}
	st, release, err := h.acquire()
	if err != nil {
		return storeUnavailable(req, err)
	}
	for q := int32(0); q < tc.WriteQueueNums; q++ {
		maxOff := st.MaxOffset(topic, q)
		table.OffsetTable[protocol.MessageQueue{Topic: topic, BrokerName: h.cfg.BrokerName, QueueID: q}] = protocol.TopicOffset{
			MinOffset: st.MinOffset(topic, q), MaxOffset: maxOff, LastUpdateTimestamp: lastStoreTime(st, topic, q, maxOff),
		}
	}
	release()
	return fastjsonResponse(req, table)
}

// lastStoreTime is the store time of the message just before offset in a
// queue, or 0 when there is none.
func lastStoreTime(st *storage.Store, topic string, qid int32, offset int64) int64 {
	if offset <= 0 {
		return 0
	}
	return queueStoreTime(st, topic, qid, offset-1) // metrics_collect.go
}
