package proxy

import (
	"context"
	"strconv"
	"strings"

	"rocketraft/broker/pop"
	"rocketraft/message"
	"rocketraft/proxy/rmqpb"
	"rocketraft/remoting"
)

// Dead letters. A message goes to its group's dead letter queue %DLQ%<group> when a consumer
// gives up on it (ForwardMessageToDeadLetterQueue: a FIFO consumer out of local attempts) or when
// ReceiveMessage pops it once more after the group's max attempts (retryMaxTimes + 1). Either way
// the proxy does what a 4.x consumer does: CONSUMER_SEND_MSG_BACK with delay level -1, which makes
// the broker copy the stored message (found by its commitlog offset) to the DLQ undelayed
// (broker/sendback.go), then acks the POP checkpoint so the message is not delivered again.
//
// The commitlog offset comes from the receipt handle: the proxy hands out the broker's POP
// checkpoint text with the message's commitlog offset as a ninth field (as Apache's proxy does);
// the brokers read the first eight and ignore the rest.

// receiptHandle is the handle of a popped message: its checkpoint text and commitlog offset.
func receiptHandle(ck string, commitLogOffset int64) string {
	return ck + " " + strconv.FormatInt(commitLogOffset, 10)
}

// handleCommitLogOffset is the commitlog offset a receipt handle carries, if any.
func handleCommitLogOffset(handle string) (int64, bool) {
	f := strings.Fields(handle)
	if len(f) < 9 {
		return 0, false
	}
	off, err := strconv.ParseInt(f[8], 10, 64)
	return off, err == nil && off >= 0
}

// withSameCommitLogOffset gives a new checkpoint text the commitlog offset old carries.
func withSameCommitLogOffset(ck, old string) string {
	if off, ok := handleCommitLogOffset(old); ok {
		return receiptHandle(ck, off)
	}
	return ck
}

// ForwardMessageToDeadLetterQueue sends the message the receipt handle names to the group's DLQ
// and acks it.
func (m *messaging) ForwardMessageToDeadLetterQueue(ctx context.Context, req *rmqpb.ForwardMessageToDeadLetterQueueRequest) (*rmqpb.ForwardMessageToDeadLetterQueueResponse, error) {
	group, topic := req.GetGroup().GetName(), req.GetTopic().GetName()
	if group == "" || topic == "" {
		return &rmqpb.ForwardMessageToDeadLetterQueueResponse{Status: fail(rmqpb.Code_BAD_REQUEST, "group and topic are required")}, nil
	}
	return &rmqpb.ForwardMessageToDeadLetterQueueResponse{Status: m.deadLetter(ctx, group, topic, req.GetReceiptHandle(), req.GetMessageId())}, nil
}

// deadLetter moves the message handle names to group's DLQ, then acks it. A failed ack is only
// logged: the message is in the DLQ, and at worst delivered once more.
func (m *messaging) deadLetter(ctx context.Context, group, topic, handle, msgID string) *rmqpb.Status {
	ei, err := pop.ParseExtraInfo(handle)
	if err != nil {
		return fail(rmqpb.Code_INVALID_RECEIPT_HANDLE, "receipt handle: %v", err)
	}
	off, has := handleCommitLogOffset(handle)
	if !has {
		return fail(rmqpb.Code_INVALID_RECEIPT_HANDLE, "receipt handle %q carries no commitlog offset", handle)
	}
	if st := m.sendBackToDLQ(ctx, group, topic, ei.BrokerName, off, msgID); st.Code != rmqpb.Code_OK {
		return st
	}
	if st := m.checkpointOp(ctx, remoting.AckMessage, group, topic, handle, nil); st.Code != rmqpb.Code_OK {
		m.log.Warn("message sent to the DLQ but not acked: it may be delivered again", "group", group, "topic", topic, "msgId", msgID, "status", st.Message)
	}
	return ok()
}

// sendBackToDLQ is CONSUMER_SEND_MSG_BACK of the message at commitLogOffset in brokerName's
// store, straight to group's DLQ. A request that never reached a master is tried once more after
// a fresh route.
func (m *messaging) sendBackToDLQ(ctx context.Context, group, topic, brokerName string, commitLogOffset int64, msgID string) *rmqpb.Status {
	ext := map[string]string{
		"offset": strconv.FormatInt(commitLogOffset, 10), "group": group, "delayLevel": "-1",
		"originMsgId": msgID, "originTopic": topic, "maxReconsumeTimes": "0", "bname": brokerName,
	}
	res := m.callMaster(ctx, topic, brokerName, m.cfg.SendTimeout, func() *remoting.Command {
		return remoting.NewRequest(remoting.ConsumerSendMsgBack, ext, nil)
	})
	switch {
	case res.err != nil && res.unknown:
		return fail(rmqpb.Code_PROXY_TIMEOUT, "send %s to %s%s: outcome unknown: %v", msgID, message.DLQTopicPrefix, group, res.err)
	case res.err != nil:
		return fail(rmqpb.Code_HA_NOT_AVAILABLE, "send %s to %s%s: %v", msgID, message.DLQTopicPrefix, group, res.err)
	case res.resp.Code != remoting.Success:
		return fail(rmqpb.Code_INTERNAL_SERVER_ERROR, "send %s to %s%s on %s: code %d %s", msgID, message.DLQTopicPrefix, group, brokerName, res.resp.Code, res.resp.Remark)
	}
	return ok()
}

// overAttempts sends the popped messages the group has had delivered max attempts times already
// to its DLQ and returns the others, to be delivered.
func (m *messaging) overAttempts(ctx context.Context, group, topic string, msgs []*message.Message) []*message.Message {
	gc, _ := m.groupConfig(ctx, group, topic) // unknown: the brokers' defaults
	limit := maxAttempts(gc)
	keep := msgs[:0]
	for _, msg := range msgs {
		if msg.ReconsumeTimes < limit {
			keep = append(keep, msg)
			continue
		}
		props := message.ParseProperties(msg.Properties)
		ck, ok := props[popPropertyCK]
		if !ok {
			keep = append(keep, msg) // not a popped message: nothing to settle it with
			continue
		}
		if st := m.deadLetter(ctx, group, topic, receiptHandle(ck, msg.PhysicalOffset), messageID(msg, props)); st.Code != rmqpb.Code_OK {
			// Not delivered either: it comes back when its invisible time is over, and is tried again.
			m.log.Warn("message over its max attempts not sent to the DLQ", "group", group, "topic", topic, "status", st.Message)
		}
	}
	return keep
}

// messageID is the message's client id (UNIQ_KEY), or its stored id for a message sent without
// one.
func messageID(msg *message.Message, props map[string]string) string {
	if id := props[message.PropertyUniqClientMessageID]; id != "" {
		return id
	}
	return message.OffsetMsgID(msg.StoreHost, msg.PhysicalOffset)
}
