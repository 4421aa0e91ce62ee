package proxy

import (
	"context"
	"strconv"
	"time"

	"rocketraft/proxy/rmqpb"
	"rocketraft/remoting"
)

// Offsets of one queue, for clients that track their own position (pull consumers): a group's
// committed offset (UpdateOffset, GetOffset: UPDATE_CONSUMER_OFFSET, QUERY_CONSUMER_OFFSET) and
// the queue's bounds or the offset of a time (QueryOffset: GET_MIN_OFFSET, GET_MAX_OFFSET,
// SEARCH_OFFSET_BY_TIMESTAMP), each asked of the master of the queue's broker group.

// UpdateOffset commits the group's offset of one queue.
func (m *messaging) UpdateOffset(ctx context.Context, req *rmqpb.UpdateOffsetRequest) (*rmqpb.UpdateOffsetResponse, error) {
	group, mq := req.GetGroup().GetName(), req.GetMessageQueue()
	if st := checkQueue(group, mq, true); st != nil {
		return &rmqpb.UpdateOffsetResponse{Status: st}, nil
	}
	if req.GetOffset() < 0 {
		return &rmqpb.UpdateOffsetResponse{Status: fail(rmqpb.Code_ILLEGAL_OFFSET, "offset %d is negative", req.GetOffset())}, nil
	}
	ext := map[string]string{"consumerGroup": group, "topic": mq.GetTopic().GetName(), "queueId": strconv.Itoa(int(mq.GetId())),
		"commitOffset": strconv.FormatInt(req.GetOffset(), 10)}
	_, st := m.queueCall(ctx, mq, remoting.UpdateConsumerOffset, ext, m.cfg.SendTimeout)
	return &rmqpb.UpdateOffsetResponse{Status: st}, nil
}

// GetOffset is the group's committed offset of one queue (OFFSET_NOT_FOUND: none yet).
func (m *messaging) GetOffset(ctx context.Context, req *rmqpb.GetOffsetRequest) (*rmqpb.GetOffsetResponse, error) {
	group, mq := req.GetGroup().GetName(), req.GetMessageQueue()
	if st := checkQueue(group, mq, true); st != nil {
		return &rmqpb.GetOffsetResponse{Status: st}, nil
	}
	ext := map[string]string{"consumerGroup": group, "topic": mq.GetTopic().GetName(), "queueId": strconv.Itoa(int(mq.GetId()))}
	r, st := m.queueCall(ctx, mq, remoting.QueryConsumerOffset, ext, m.cfg.SendTimeout)
	if st.Code != rmqpb.Code_OK {
		return &rmqpb.GetOffsetResponse{Status: st}, nil
	}
	off, err := strconv.ParseInt(r.Ext("offset"), 10, 64)
	if err != nil {
		return &rmqpb.GetOffsetResponse{Status: fail(rmqpb.Code_INTERNAL_SERVER_ERROR, "broker answered offset %q", r.Ext("offset"))}, nil
	}
	return &rmqpb.GetOffsetResponse{Status: ok(), Offset: off}, nil
}

// QueryOffset is one queue's first offset (BEGINNING), the offset after its last message (END),
// or the offset of the first message stored at or after a time (TIMESTAMP).
func (m *messaging) QueryOffset(ctx context.Context, req *rmqpb.QueryOffsetRequest) (*rmqpb.QueryOffsetResponse, error) {
	mq := req.GetMessageQueue()
	if st := checkQueue("", mq, false); st != nil {
		return &rmqpb.QueryOffsetResponse{Status: st}, nil
	}
	ext := map[string]string{"topic": mq.GetTopic().GetName(), "queueId": strconv.Itoa(int(mq.GetId()))}
	var code int32
	switch p := req.GetQueryOffsetPolicy(); p {
	case rmqpb.QueryOffsetPolicy_BEGINNING:
		code = remoting.GetMinOffset
	case rmqpb.QueryOffsetPolicy_END:
		code = remoting.GetMaxOffset
	case rmqpb.QueryOffsetPolicy_TIMESTAMP:
		if req.Timestamp == nil {
			return &rmqpb.QueryOffsetResponse{Status: fail(rmqpb.Code_BAD_REQUEST, "policy TIMESTAMP needs a timestamp")}, nil
		}
		code = remoting.SearchOffsetByTimestamp
		ext["timestamp"] = strconv.FormatInt(req.GetTimestamp().AsTime().UnixMilli(), 10)
	default:
		return &rmqpb.QueryOffsetResponse{Status: fail(rmqpb.Code_BAD_REQUEST, "unknown query offset policy %d", p)}, nil
	}
	r, st := m.queueCall(ctx, mq, code, ext, m.cfg.SendTimeout)
	if st.Code != rmqpb.Code_OK {
		return &rmqpb.QueryOffsetResponse{Status: st}, nil
	}
	off, err := strconv.ParseInt(r.Ext("offset"), 10, 64)
	if err != nil {
		return &rmqpb.QueryOffsetResponse{Status: fail(rmqpb.Code_INTERNAL_SERVER_ERROR, "broker answered offset %q", r.Ext("offset"))}, nil
	}
	return &rmqpb.QueryOffsetResponse{Status: ok(), Offset: off}, nil
}

// checkQueue checks a request's message queue (and group, if needGroup): a named topic and a
// real queue id.
func checkQueue(group string, mq *rmqpb.MessageQueue, needGroup bool) *rmqpb.Status {
	switch {
	case mq.GetTopic().GetName() == "":
		return fail(rmqpb.Code_ILLEGAL_TOPIC, "message_queue.topic is empty")
	case needGroup && group == "":
		return fail(rmqpb.Code_ILLEGAL_CONSUMER_GROUP, "group is empty")
	case mq.GetId() < 0:
		return fail(rmqpb.Code_BAD_REQUEST, "message_queue.id %d: want one queue", mq.GetId())
	}
	return nil
}

// queueCall sends one idempotent request about mq to the master of mq's broker group, trying
// once more after a fresh route if it failed in transit or reached a node that is not the master.
// The answer is returned with OK, or a status saying why there is none.
func (m *messaging) queueCall(ctx context.Context, mq *rmqpb.MessageQueue, code int32, ext map[string]string, timeout time.Duration) (*remoting.Command, *rmqpb.Status) {
	topic, brokerName := mq.GetTopic().GetName(), mq.GetBroker().GetName()
	var last string
	// The requests are idempotent: one whose outcome is unknown is asked again, once.
	for attempt := 0; attempt < 2; attempt++ {
		res := m.callMaster(ctx, topic, brokerName, timeout, func() *remoting.Command { return remoting.NewRequest(code, ext, nil) })
		if res.err != nil {
			last = res.err.Error()
			if res.unknown {
				continue
			}
			break
		}
		r, addr := res.resp, res.addr
		if r.Code == remoting.ServiceNotAvailable {
			last = r.Remark
			continue
		}
		switch r.Code {
		case remoting.Success, remoting.PullNotFound, remoting.PullRetryImmediately, remoting.PullOffsetMoved:
			return r, ok() // the pull answers: PullMessage reads the code
		case remoting.QueryNotFound:
			return nil, fail(rmqpb.Code_OFFSET_NOT_FOUND, "%s", r.Remark)
		case remoting.TopicNotExist:
			return nil, fail(rmqpb.Code_TOPIC_NOT_FOUND, "%s", r.Remark)
		case remoting.SubscriptionGroupNotExist:
			return nil, fail(rmqpb.Code_CONSUMER_GROUP_NOT_FOUND, "%s", r.Remark)
		case remoting.NoPermission:
			return nil, fail(rmqpb.Code_FORBIDDEN, "%s", r.Remark)
		}
		return nil, fail(rmqpb.Code_INTERNAL_SERVER_ERROR, "%s (%s): code %d %s", brokerName, addr, r.Code, r.Remark)
	}
	return nil, fail(rmqpb.Code_HA_NOT_AVAILABLE, "no master of %s %q answered: %s", topic, brokerName, last)
}
