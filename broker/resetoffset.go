package broker

// INVOKE_BROKER_TO_RESET_OFFSET (222), sent by mqadmin resetOffsetByTime to every master of the
// topic. Header (ResetOffsetRequestHeader): topic, group, timestamp (ms; -1 = the queues' max
// offsets), isForce; [5.x] queueId, offset are not supported (answered as an error when set).
//
// For each write queue of the topic the offset is the first message stored at or after the
// timestamp (SEARCH_OFFSET_BY_TIMESTAMP's lower bound). Without isForce a queue whose committed
// offset is already at or before that offset keeps it (only rewinds), as Java's
// Broker2Client.resetOffset does. Unlike a 4.x broker (which only tells the clients) the offsets
// are also committed here, through the same path as UPDATE_CONSUMER_OFFSET (DLedger mode: the
// leader's offset batcher, so they are Raft entries ordered after every commit acknowledged
// before), so a group with no consumer online starts from them too. Then every live member of
// the group gets RESET_CONSUMER_CLIENT_OFFSET (220, oneway, as Java sends it) with the table in
// fastjson's MessageQueue-keyed form, which the Go and Java clients parse; the Go client applies
// it after pausing the group for 10 s. The answer is the table (SUCCESS); a follower forwards the
// request to the leader.

import (
	"strconv"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// handleResetOffset serves INVOKE_BROKER_TO_RESET_OFFSET (see the file comment).
func (o *offsetHandlers) handleResetOffset(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic, group := req.Ext("topic"), req.Ext("group")
	ts, err := req.ExtInt64("timestamp")
	if topic == "" || group == "" || err != nil {
		return req.NewResponse(remoting.SystemError, "bad reset offset header: topic, group and timestamp are required")
	}
	if bad := o.refuseBadNames(req, groupName("group", group), topicName("topic", topic)); bad != nil {
		return bad
	}
	if q := req.Ext("queueId"); q != "" && q != "-1" {
		return req.NewResponse(remoting.SystemError, "resetting a single queue (queueId) is not supported; reset every queue of the topic by timestamp")
	}
	if fwd := o.forwardOrRefuse(conn, req); fwd != nil {
		return fwd
	}
	force := req.Ext("isForce") == "" || req.ExtBool("isForce")
	tc := o.topics.Get(topic)
	if tc == nil {
		return req.NewResponse(remoting.TopicNotExist, "topic["+topic+"] not exist")
	}
	members := o.clients.ConsumerMembers(group)
	st, release, err := o.place.acquire()
	if err != nil {
		return storeUnavailable(req, err)
	}
	table := make(map[protocol.MessageQueue]int64, tc.WriteQueueNums)
	known := len(members) > 0 || o.groups.Get(group) != nil
	for q := int32(0); q < tc.WriteQueueNums; q++ {
		target := st.MaxOffset(topic, q)
		if ts != -1 {
			target = st.SearchOffsetByTimestamp(topic, q, ts, false)
		}
		target = max(target, 0)
		cur, ok := o.tables.committedOffset(group, topic, q)
		known = known || ok
		if ok && cur >= 0 && !force && cur <= target {
			target = cur
		}
		table[protocol.MessageQueue{Topic: topic, BrokerName: o.cfg.BrokerName, QueueID: q}] = target
	}
	release()
	if !known {
		return req.NewResponse(remoting.SystemError, "THe consumer group <"+group+"> not exist: it is not configured, has no offsets of topic "+topic+" and no consumer online")
	}
	for mq, off := range table {
		o.tables.commitOffset(group, topic, mq.QueueID, off)
	}
	body, err := protocol.ResetOffsetBody{OffsetTable: table}.EncodeFastjson()
	if err != nil {
		return req.NewResponse(remoting.SystemError, "encode reset offset body: "+err.Error())
	}
	ext := map[string]string{"topic": topic, "group": group, "timestamp": strconv.FormatInt(ts, 10), "isForce": strconv.FormatBool(force)}
	for _, m := range members {
		if err := m.Conn.InvokeOneway(remoting.NewRequest(remoting.ResetConsumerClientOffset, ext, body)); err != nil {
			o.logger.Warn("cannot send RESET_CONSUMER_CLIENT_OFFSET", "group", group, "client", m.ClientID, "error", err)
		}
	}
	o.logger.Info("consumer offsets reset by timestamp", "group", group, "topic", topic, "timestamp", ts, "force", force, "consumers", len(members))
	resp := req.NewResponse(remoting.Success, "")
	if len(members) == 0 {
		resp.Remark = "no consumer of group " + group + " is online; the offsets are committed and apply when it starts"
	}
	resp.Body = body
	return resp
}
