package broker

// CONSUMER_SEND_MSG_BACK (36): a consumer hands back a message it failed to consume. The
// broker reads the original by its commitlog offset and stores a copy for
// %RETRY%<group>, delayed by a level (header delayLevel, or 3 + reconsumeTimes when 0) through
// the delay scheduler (broker/schedule), with RECONSUMETIMES + 1, RETRY_TOPIC = the original topic
// and ORIGIN_MESSAGE_ID kept from the first delivery. Once the message has been reconsumed
// maxReconsumeTimes times (header maxReconsumeTimes, else the group's retryMaxTimes; 4.x rule
// reconsumeTimes >= limit, as SEND_MESSAGE to a retry topic in applyRetryPolicy), or if
// delayLevel < 0, the copy goes to %DLQ%<group> queue 0 undelayed instead.
//
// Both topics are created on demand (1 queue, perm read+write; RocketMQ 4.x creates the DLQ
// write-only, 5.x and this broker keep it readable so operators can consume it). In DLedger mode
// a follower forwards the request to the leader, whose topic creation and append go through
// Raft like any send. Any failure is answered with an error code: the Go and Java clients then
// send the message to %RETRY%<group> themselves, which handleSend serves.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"rocketraft/dledger"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// sendBackHeader is ConsumerSendMsgBackRequestHeader.
type sendBackHeader struct {
	Offset            int64
	Group             string
	DelayLevel        int
	OriginMsgID       string
	OriginTopic       string
	MaxReconsumeTimes *int32
}

// parseSendBackHeader reads and checks the header; offset, group and delayLevel are required.
func parseSendBackHeader(ext map[string]string) (*sendBackHeader, error) {
	h := &sendBackHeader{Group: ext["group"], OriginMsgID: ext["originMsgId"], OriginTopic: ext["originTopic"]}
	var err error
	if h.Offset, err = strconv.ParseInt(ext["offset"], 10, 64); err != nil || h.Offset < 0 {
		return nil, fmt.Errorf("offset %q: want a commitlog offset", ext["offset"])
	}
	if h.Group == "" {
		return nil, errors.New("group is required")
	}
	if h.DelayLevel, err = strconv.Atoi(ext["delayLevel"]); err != nil {
		return nil, fmt.Errorf("delayLevel %q: want an integer", ext["delayLevel"])
	}
	if s, ok := ext["maxReconsumeTimes"]; ok && s != "" {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("maxReconsumeTimes %q: want an integer", s)
		}
		v := int32(n)
		h.MaxReconsumeTimes = &v
	}
	return h, nil
}

// handleSendBack serves CONSUMER_SEND_MSG_BACK.
func (s *sender) handleSendBack(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	resp := req.NewResponse(remoting.Success, "")
	fail := func(code int32, format string, args ...any) *remoting.Command {
		resp.Code = code
		resp.Remark = fmt.Sprintf(format, args...)
		return resp
	}
	if ok, _ := s.place.writable(); !ok {
		if fwd := s.fwd.forwardWrite(conn, req); fwd != nil {
			return fwd
		}
		if ok, remark := s.place.writable(); !ok {
			return fail(remoting.ServiceNotAvailable, "%s", remark)
		}
	}
	h, err := parseSendBackHeader(req.ExtFields)
	if err != nil {
		return fail(remoting.SystemError, "bad send-back header: %v", err)
	}
	if bad := s.refuseBadNames(req, consumerGroupName("group", h.Group)); bad != nil {
		return bad
	}
	gc, err := s.groupOrCreate(h.Group)
	if err != nil {
		code, remark := errorCode(err)
		return fail(code, "subscription group %s: %s", h.Group, remark)
	}
	if gc == nil {
		return fail(remoting.SubscriptionGroupNotExist, "subscription group not exist, %s", h.Group)
	}
	if !protocol.IsWriteable(s.brokerPermission()) {
		return fail(remoting.NoPermission, "the broker[%s] sending message is forbidden", s.cfg.BrokerName)
	}
	if gc.RetryQueueNums <= 0 {
		return resp // RocketMQ: the group wants no retries; the message is dropped
	}

	orig, err := s.readOriginal(h.Offset)
	if err != nil {
		return fail(remoting.SystemError, "look message by offset failed, %d: %v", h.Offset, err)
	}
	limit := gc.RetryMaxTimes
	if h.MaxReconsumeTimes != nil {
		limit = *h.MaxReconsumeTimes
	}
	toDLQ := orig.ReconsumeTimes >= limit || h.DelayLevel < 0
	topic, queues := message.RetryTopicPrefix+h.Group, gc.RetryQueueNums
	if toDLQ {
		topic, queues = message.DLQTopicPrefix+h.Group, 1
	}
	tc, created, err := s.ensureTopic(&protocol.TopicConfig{TopicName: topic, ReadQueueNums: queues, WriteQueueNums: queues,
		Perm: protocol.PermRead | protocol.PermWrite, TopicFilterType: protocol.FilterSingleTag})
	if err != nil {
		code, remark := errorCode(err)
		return fail(code, "create topic %s: %s", topic, remark)
	}
	if created {
		s.logger.Info("created topic for send-back", "topic", topic, "queues", queues)
		s.triggerRegister()
	}
	if !protocol.IsWriteable(tc.Perm) {
		return fail(remoting.NoPermission, "the topic[%s] sending message is forbidden", topic)
	}

	now := time.Now()
	p, origTopic := s.sendBackPlan(orig, h, topic, tc, toDLQ)
	m := &message.Message{
		Topic: p.topic, QueueID: p.queueID, Flag: orig.Flag, SysFlag: p.sysFlag,
		BornTimestamp: orig.BornTimestamp, BornHost: orig.BornHost,
		StoreTimestamp: now.UnixMilli(), StoreHost: s.storeHost(),
		ReconsumeTimes: orig.ReconsumeTimes + 1, Body: orig.Body, Properties: p.props,
	}
	rec, err := message.EncodeRecord(m)
	if err != nil {
		return fail(remoting.MessageIllegal, "encode the send-back copy: %v", err)
	}
	records := [][]byte{rec}
	if err := s.saveTopics(); err != nil {
		return fail(remoting.SystemError, "%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	results, err := s.commitLog.Append(ctx, records)
	if errors.Is(err, dledger.ErrNotLeader) {
		if fwd := s.fwd.forwardUnproposed(conn, req); fwd != nil {
			return fwd
		}
	}
	if err != nil && !errors.Is(err, storage.ErrFlushDiskTimeout) {
		code, remark := errorCode(err)
		s.logger.Warn("send-back append failed", "group", h.Group, "topic", topic, "error", err)
		resp := fail(code, "%s", remark)
		markRefusal(req, resp, err)
		return resp
	}
	s.stats.recordSendBack(origTopic, h.Group, topic, records[:len(results)], toDLQ)
	return resp
}

// readOriginal reads the record a consumer hands back.
func (s *sender) readOriginal(offset int64) (*message.Message, error) {
	st, release, err := s.place.acquire()
	if err != nil {
		return nil, err
	}
	raw, err := st.ReadRecord(offset)
	release()
	if err != nil {
		return nil, err
	}
	m, _, err := message.DecodeRecord(raw)
	if err != nil {
		return nil, fmt.Errorf("decode record at %d: %w", offset, err)
	}
	return m, nil
}

// sendBackPlan builds the copy's target and properties as a send plan (one scan of the
// original's properties), delayed by applyDelay as a producer's delayed send unless it goes to
// the DLQ or carries a PREPARED/ROLLBACK transaction type (sendPlan.classify's rule). origTopic is
// the topic the message was first sent to (its RETRY_TOPIC once retried).
func (s *sender) sendBackPlan(orig *message.Message, h *sendBackHeader, topic string, tc *protocol.TopicConfig, toDLQ bool) (p *sendPlan, origTopic string) {
	props := message.ParseProperties(orig.Properties)
	if _, ok := props[message.PropertyRetryTopic]; !ok {
		props[message.PropertyRetryTopic] = orig.Topic
	}
	if props[message.PropertyOriginMessageID] == "" {
		id := h.OriginMsgID
		if id == "" {
			id = message.OffsetMsgID(orig.StoreHost, orig.PhysicalOffset)
		}
		props[message.PropertyOriginMessageID] = id
	}
	props[message.PropertyWaitStoreMsgOK] = "false"
	// What the delay scheduler added on an earlier round must not name the previous target.
	delete(props, message.PropertyRealTopic)
	delete(props, message.PropertyRealQueueID)
	delete(props, message.PropertyTimerDeliverMS)
	origTopic = props[message.PropertyRetryTopic]
	p = &sendPlan{topic: topic, sysFlag: orig.SysFlag, retry: !toDLQ, toDLQ: toDLQ}
	_, hasCluster := props[message.PropertyCluster]
	if toDLQ {
		delete(props, message.PropertyDelayTimeLevel)
		p.props = s.withCluster(message.FormatProperties(props), hasCluster)
		return p, origTopic
	}
	level := h.DelayLevel
	if level == 0 {
		level = 3 + int(orig.ReconsumeTimes)
	}
	props[message.PropertyDelayTimeLevel] = strconv.Itoa(level)
	p.queueID = rand.Int32N(max(tc.WriteQueueNums, 1))
	if t := message.TransactionType(orig.SysFlag); t != message.TransactionNotType && t != message.TransactionCommitType {
		p.props = s.withCluster(message.FormatProperties(props), hasCluster)
		return p, origTopic
	}
	if !hasCluster {
		props[message.PropertyCluster] = s.cfg.BrokerClusterName
	}
	p.kind, p.level = kindDelay, min(level, len(s.delayLevels))
	s.applyDelay(p, props)
	return p, origTopic
}
