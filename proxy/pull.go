package proxy

import (
	"strconv"
	"time"

	"google.golang.org/grpc"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/proxy/rmqpb"
	"rocketraft/remoting"
)

// PullMessage reads up to batch_size messages of one queue from an offset the client keeps
// (PULL_MESSAGE to the queue's master, long-polled within the call's deadline), and streams the
// status, the messages and the offset to pull from next. Nothing is committed: the client commits
// with UpdateOffset. MESSAGE_NOT_FOUND: nothing new at that offset (next_offset follows);
// ILLEGAL_OFFSET: the offset is outside the queue (next_offset is where to start instead).
func (m *messaging) PullMessage(req *rmqpb.PullMessageRequest, stream grpc.ServerStreamingServer[rmqpb.PullMessageResponse]) error {
	ctx := stream.Context()
	status := func(st *rmqpb.Status) error {
		return stream.Send(&rmqpb.PullMessageResponse{Content: &rmqpb.PullMessageResponse_Status{Status: st}})
	}
	next := func(off int64) error {
		return stream.Send(&rmqpb.PullMessageResponse{Content: &rmqpb.PullMessageResponse_NextOffset{NextOffset: off}})
	}
	group, mq := req.GetGroup().GetName(), req.GetMessageQueue()
	if st := checkQueue(group, mq, true); st != nil {
		return status(st)
	}
	if req.GetOffset() < 0 {
		return status(fail(rmqpb.Code_ILLEGAL_OFFSET, "offset %d is negative", req.GetOffset()))
	}
	exprType := protocol.ExpressionTag
	switch ft := req.GetFilterExpression().GetType(); ft {
	case rmqpb.FilterType_TAG, rmqpb.FilterType_FILTER_TYPE_UNSPECIFIED:
	case rmqpb.FilterType_SQL:
		exprType = protocol.ExpressionSQL92
	default:
		return status(fail(rmqpb.Code_ILLEGAL_FILTER_EXPRESSION, "filter type %s", ft))
	}
	exp := req.GetFilterExpression().GetExpression()
	if exp == "" {
		exp = "*"
	}
	poll := min(req.GetLongPollingTimeout().AsDuration(), maxPollWindow)
	if dl, ok := ctx.Deadline(); ok {
		poll = min(poll, time.Until(dl)-2*time.Second)
	}
	poll = max(poll, 0)
	h := protocol.PullMessageRequestHeader{
		ConsumerGroup: group, Topic: mq.GetTopic().GetName(), QueueID: mq.GetId(), QueueOffset: req.GetOffset(),
		MaxMsgNums: min(max(req.GetBatchSize(), 1), 32), SysFlag: protocol.PullSubscription,
		SuspendTimeoutMillis: poll.Milliseconds(), Subscription: exp, ExpressionType: exprType, BrokerName: mq.GetBroker().GetName(),
	}
	if poll > 0 {
		h.SysFlag |= protocol.PullSuspend
	}
	r, st := m.queueCall(ctx, mq, remoting.PullMessage, h.ToExt(), poll+m.cfg.SendTimeout)
	if st.Code != rmqpb.Code_OK {
		return status(st)
	}
	nextOff, _ := strconv.ParseInt(r.Ext("nextBeginOffset"), 10, 64)
	switch r.Code {
	case remoting.PullNotFound, remoting.PullRetryImmediately:
		if err := status(fail(rmqpb.Code_MESSAGE_NOT_FOUND, "no new message")); err != nil {
			return err
		}
		return next(nextOff)
	case remoting.PullOffsetMoved:
		if err := status(fail(rmqpb.Code_ILLEGAL_OFFSET, "offset %d is outside the queue (%s .. %s)", req.GetOffset(), r.Ext("minOffset"), r.Ext("maxOffset"))); err != nil {
			return err
		}
		return next(nextOff)
	}
	msgs, err := message.DecodeRecords(r.Body)
	if err != nil {
		return status(fail(rmqpb.Code_INTERNAL_SERVER_ERROR, "pull from %s: %v", mq.GetBroker().GetName(), err))
	}
	if err := status(ok()); err != nil {
		return err
	}
	for _, msg := range msgs {
		out := toGRPC(msg, 0)
		out.SystemProperties.InvisibleDuration = nil // not popped: no invisibility
		if err := stream.Send(&rmqpb.PullMessageResponse{Content: &rmqpb.PullMessageResponse_Message{Message: out}}); err != nil {
			return err
		}
	}
	return next(nextOff)
}
