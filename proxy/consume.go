package proxy

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"maps"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"rocketraft/broker/pop"
	"rocketraft/message"
	"rocketraft/proxy/rmqpb"
	"rocketraft/remoting"
)

// Consumption is POP on the brokers: ReceiveMessage pops every queue of one group (the request's
// message_queue names the group by broker name, as Apache's proxy reads it), AckMessage and
// ChangeInvisibleDuration act on the checkpoint the receipt handle names. The receipt handle is
// the broker's POP checkpoint text (broker/pop.ExtraInfo), which carries the group's broker name,
// queue and offset, so any proxy can route it back.

const (
	popPropertyCK        = "POP_CK"
	maxPollWindow        = 20 * time.Second
	minInvisibleDuration = 10 * time.Second // Apache's minimum for ReceiveMessage
)

// ReceiveMessage pops up to batch_size messages of one group, long-polling within the call's
// deadline, and streams status, messages and the delivery time.
func (m *messaging) ReceiveMessage(req *rmqpb.ReceiveMessageRequest, stream rmqpb.MessagingService_ReceiveMessageServer) error {
	ctx := stream.Context()
	status := func(st *rmqpb.Status) error {
		return stream.Send(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Status{Status: st}})
	}
	group, topic := req.GetGroup().GetName(), req.GetMessageQueue().GetTopic().GetName()
	brokerName := req.GetMessageQueue().GetBroker().GetName()
	if group == "" || topic == "" {
		return status(fail(rmqpb.Code_BAD_REQUEST, "group and topic are required"))
	}
	inv := req.GetInvisibleDuration().AsDuration()
	if req.GetAutoRenew() && req.GetInvisibleDuration() == nil {
		// A push consumer: it settles each message when its listener returns (settings.go).
		inv = defaultAutoRenewInvisible
	}
	if inv < minInvisibleDuration || inv > 12*time.Hour {
		return status(fail(rmqpb.Code_ILLEGAL_INVISIBLE_TIME, "invisible duration %v: must be 10 s .. 12 h", inv))
	}
	if ft := req.GetFilterExpression().GetType(); ft != rmqpb.FilterType_TAG && ft != rmqpb.FilterType_FILTER_TYPE_UNSPECIFIED {
		return status(fail(rmqpb.Code_NOT_IMPLEMENTED, "filter type %s is not served by this proxy yet (TAG only)", ft))
	}
	poll := maxPollWindow
	if lp := req.GetLongPollingTimeout().AsDuration(); lp > 0 {
		poll = min(poll, lp) // the client's await time (the Node client sets it)
	}
	if dl, ok := ctx.Deadline(); ok {
		// Answer before the client's deadline (its await time plus its request timeout).
		poll = min(poll, time.Until(dl)-2*time.Second)
	}
	if poll < 0 {
		return status(fail(rmqpb.Code_ILLEGAL_POLLING_TIME, "the call's deadline leaves no time to poll"))
	}
	batch := min(max(req.GetBatchSize(), 1), 32)
	exp := req.GetFilterExpression().GetExpression()
	if exp == "" {
		exp = "*"
	}
	ext := map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": "-1", "maxMsgNums": strconv.Itoa(int(batch)),
		"invisibleTime": strconv.FormatInt(inv.Milliseconds(), 10), "pollTime": strconv.FormatInt(poll.Milliseconds(), 10),
		"bornTime": strconv.FormatInt(time.Now().UnixMilli(), 10), "initMode": "1", "expType": "TAG", "exp": exp,
	}
	if m.orderly(ctx, group, topic) { // configs.go: an orderly group holds a queue while in flight
		ext["order"] = "true"
	}
	pctx, cancel := context.WithTimeout(ctx, poll+m.cfg.SendTimeout)
	res := m.callMaster(pctx, topic, brokerName, poll+m.cfg.SendTimeout, func() *remoting.Command {
		return remoting.NewRequest(remoting.PopMessage, maps.Clone(ext), nil)
	})
	cancel()
	if res.err != nil && isClosed(m.stopping) {
		return status(fail(rmqpb.Code_MESSAGE_NOT_FOUND, "the proxy is shutting down; no message this time"))
	}
	if res.err != nil {
		// A POP whose answer was lost leaves what it took invisible for the invisible duration.
		return status(fail(rmqpb.Code_HA_NOT_AVAILABLE, "pop from %v", res.err))
	}
	resp := res.resp
	switch resp.Code {
	case remoting.Success:
	case remoting.PullNotFound, remoting.PollingTimeout:
		return status(fail(rmqpb.Code_MESSAGE_NOT_FOUND, "no new message"))
	default:
		return status(fail(sendCode(resp.Code), "pop from %s (%s): code %d %s", brokerName, res.addr, resp.Code, resp.Remark))
	}
	msgs, err := message.DecodeRecords(resp.Body)
	if err != nil {
		return status(fail(rmqpb.Code_INTERNAL_SERVER_ERROR, "pop from %s: %v", brokerName, err))
	}
	if msgs = m.overAttempts(ctx, group, topic, msgs); len(msgs) == 0 {
		return status(fail(rmqpb.Code_MESSAGE_NOT_FOUND, "no new message"))
	}
	if err := status(ok()); err != nil {
		return err
	}
	for _, msg := range msgs {
		if err := stream.Send(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Message{Message: toGRPC(msg, inv)}}); err != nil {
			return err
		}
	}
	return stream.Send(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_DeliveryTimestamp{DeliveryTimestamp: timestamppb.Now()}})
}

// toGRPC is a popped stored message as the 5.x clients read it.
func toGRPC(msg *message.Message, inv time.Duration) *rmqpb.Message {
	props := message.ParseProperties(msg.Properties)
	sp := &rmqpb.SystemProperties{
		MessageId:         messageID(msg, props),
		BodyEncoding:      rmqpb.Encoding_IDENTITY,
		MessageType:       rmqpb.MessageType_NORMAL,
		BornTimestamp:     timestamppb.New(time.UnixMilli(msg.BornTimestamp)),
		BornHost:          msg.BornHost.String(),
		StoreTimestamp:    timestamppb.New(time.UnixMilli(msg.StoreTimestamp)),
		StoreHost:         msg.StoreHost.String(),
		QueueId:           msg.QueueID,
		QueueOffset:       &msg.QueueOffset,
		InvisibleDuration: durationpb.New(inv),
	}
	sum := md5.Sum(msg.Body)
	sp.BodyDigest = &rmqpb.Digest{Type: rmqpb.DigestType_MD5, Checksum: strings.ToUpper(hex.EncodeToString(sum[:]))}
	if tag, ok := props[message.PropertyTags]; ok {
		sp.Tag = &tag
	}
	if keys := props[message.PropertyKeys]; keys != "" {
		sp.Keys = strings.Fields(keys)
	}
	if ck, ok := props[popPropertyCK]; ok {
		h := receiptHandle(ck, msg.PhysicalOffset)
		sp.ReceiptHandle = &h
	}
	if g := props[propertyShardingKey]; g != "" {
		sp.MessageType = rmqpb.MessageType_FIFO
		sp.MessageGroup = &g
	}
	if due, err := strconv.ParseInt(props[message.PropertyTimerDeliverMS], 10, 64); err == nil {
		sp.MessageType = rmqpb.MessageType_DELAY
		sp.DeliveryTimestamp = timestamppb.New(time.UnixMilli(due))
	}
	attempt := msg.ReconsumeTimes + 1
	sp.DeliveryAttempt = &attempt
	user := map[string]string{}
	for k, v := range props {
		if !systemProperty(k) {
			user[k] = v
		}
	}
	return &rmqpb.Message{Topic: &rmqpb.Resource{Name: msg.Topic}, UserProperties: user, SystemProperties: sp, Body: msg.Body}
}

// systemProperty reports whether a stored property is RocketMQ's own (not the application's).
func systemProperty(k string) bool {
	switch k {
	case message.PropertyTags, message.PropertyKeys, message.PropertyUniqClientMessageID, message.PropertyWaitStoreMsgOK,
		popPropertyCK, "MIN_OFFSET", "MAX_OFFSET", "CLUSTER", "TRAN_MSG", "PGROUP", "DELAY", "RETRY_TOPIC",
		"REAL_TOPIC", "REAL_QID", "__STARTDELIVERTIME", message.PropertyTimerDeliverMS, "CONSUME_START_TIME", propertyShardingKey:
		return true
	}
	return false
}

// AckMessage acks each entry's checkpoint on the group its receipt handle names (several of one
// group in one batch ack).
func (m *messaging) AckMessage(ctx context.Context, req *rmqpb.AckMessageRequest) (*rmqpb.AckMessageResponse, error) {
	resp := &rmqpb.AckMessageResponse{Status: ok()}
	group, topic := req.GetGroup().GetName(), req.GetTopic().GetName()
	statuses := m.ackEntries(ctx, group, topic, req.GetEntries()) // batchack.go
	for i, e := range req.GetEntries() {
		st := statuses[i]
		resp.Entries = append(resp.Entries, &rmqpb.AckMessageResultEntry{MessageId: e.GetMessageId(), ReceiptHandle: e.GetReceiptHandle(), Status: st})
		if st.Code != rmqpb.Code_OK {
			resp.Status = st
		}
	}
	return resp, nil
}

// ChangeInvisibleDuration moves a message's invisible time and returns the receipt handle to use
// from now on.
func (m *messaging) ChangeInvisibleDuration(ctx context.Context, req *rmqpb.ChangeInvisibleDurationRequest) (*rmqpb.ChangeInvisibleDurationResponse, error) {
	var handle string
	inv := req.GetInvisibleDuration().AsDuration()
	if inv < 0 || inv > 12*time.Hour {
		return &rmqpb.ChangeInvisibleDurationResponse{Status: fail(rmqpb.Code_ILLEGAL_INVISIBLE_TIME, "invisible duration %v: must not be negative, at most 12 h", inv)}, nil
	}
	// 0 (a consumer without a backoff policy retrying at once): visible again at once; the
	// brokers take at least 1 ms.
	inv = max(inv, time.Millisecond)
	st := m.checkpointOp(ctx, remoting.ChangeMessageInvisibleTime, req.GetGroup().GetName(), req.GetTopic().GetName(), req.GetReceiptHandle(),
		func(ext map[string]string, ei pop.ExtraInfo) func(*remoting.Command) {
			ext["invisibleTime"] = strconv.FormatInt(inv.Milliseconds(), 10)
			return func(r *remoting.Command) {
				ei.PopTime, _ = strconv.ParseInt(r.Ext("popTime"), 10, 64)
				ei.InvisibleTime, _ = strconv.ParseInt(r.Ext("invisibleTime"), 10, 64)
				handle = withSameCommitLogOffset(ei.String(), req.GetReceiptHandle())
			}
		})
	return &rmqpb.ChangeInvisibleDurationResponse{Status: st, ReceiptHandle: handle}, nil
}

// checkpointOp sends an ACK or CHANGE of the checkpoint handle names to its group's master;
// prepare may add header fields and return what to do with a successful answer.
func (m *messaging) checkpointOp(ctx context.Context, code int32, group, topic, handle string,
	prepare func(map[string]string, pop.ExtraInfo) func(*remoting.Command)) *rmqpb.Status {
	ei, err := pop.ParseExtraInfo(handle)
	if err != nil {
		return fail(rmqpb.Code_INVALID_RECEIPT_HANDLE, "receipt handle: %v", err)
	}
	ext := map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(int(ei.QueueID)),
		"extraInfo": handle, "offset": strconv.FormatInt(ei.MsgQueueOffset, 10),
	}
	var done func(*remoting.Command)
	if prepare != nil {
		done = prepare(ext, ei)
	}
	sctx, cancel := m.budget(ctx)
	defer cancel()
	res := m.callMaster(sctx, topic, ei.BrokerName, m.cfg.SendTimeout, func() *remoting.Command {
		return remoting.NewRequest(code, maps.Clone(ext), nil)
	})
	switch {
	case res.err != nil && res.unknown:
		return fail(rmqpb.Code_PROXY_TIMEOUT, "%v: outcome unknown", res.err)
	case res.err != nil:
		return fail(rmqpb.Code_HA_NOT_AVAILABLE, "no master of %s answered: %v", ei.BrokerName, res.err)
	}
	switch r := res.resp; r.Code {
	case remoting.Success:
		if done != nil {
			done(r)
		}
		return ok()
	case remoting.NoMessage:
		return fail(rmqpb.Code_INVALID_RECEIPT_HANDLE, "%s", r.Remark)
	default:
		return fail(sendCode(r.Code), "%s (%s): code %d %s", ei.BrokerName, res.addr, r.Code, r.Remark)
	}
}
