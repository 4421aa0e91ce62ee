package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/meta"
	"rocketraft/broker/txn"
	"rocketraft/config"
	"rocketraft/dledger"
	"rocketraft/internal/sendtrace"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// sender owns producing: SEND_MESSAGE (V2, batch) and CONSUMER_SEND_MSG_BACK from the checks to
// the append and the answer, END_TRANSACTION, and the POP batch ack. It receives what it needs
// explicitly (the store, the topic table, the forwarder, and func values for steps other parts
// own: topic and group creation, the broker permission, registration, delay and replication
// waits), so the send path can be tested with a fake commit log and a fake place, without a
// broker process.
type sender struct {
	cfg    *config.Broker
	logger hclog.Logger
	// place says whether this node takes writes now and hands out the store for reads;
	// commitLog is where records are appended (the place, timed in DLedger mode: metrics.go).
	place     place
	commitLog CommitLog
	topics    *meta.Topics
	stats     *stats
	// delayLevels are the configured delay levels (schedule.go) the plan's classification caps at.
	delayLevels []time.Duration
	// fwd carries writes a follower received to the leader (forward.go).
	fwd *forwarder
	// txn resolves END_TRANSACTION (package broker/txn).
	txn *txn.Service
	// storeHost is this broker's store host, known once it listens (stamped on every record).
	storeHost func() netip.AddrPort

	// Steps owned elsewhere, wired in New.
	ensureTopic            func(tc *protocol.TopicConfig) (*protocol.TopicConfig, bool, error)
	createTopicFromDefault func(topic, defaultTopic string, queueNums, sysFlag int32) (*protocol.TopicConfig, bool, error)
	groupOrCreate          func(name string) (*protocol.SubscriptionGroupConfig, error)
	brokerPermission       func() int32
	triggerRegister        func()
	refuseBadNames         func(req *remoting.Command, checks ...nameCheck) *remoting.Command
	applyDelay             func(p *sendPlan, props map[string]string)
	waitReplicas           func(waitStore bool, results []storage.AppendResult) (int32, string)
	commitOffset           func(group, topic string, qid int32, off int64)
	// topicsSaved returns once topics.json holds every topic created so far (meta.Topics.Sync):
	// set in classic mode, where that file is the only record of a topic, so a message is never
	// acknowledged in a topic a crash could forget; nil in DLedger mode, where the Raft log
	// holds the creation ahead of the messages.
	topicsSaved func() error
}

// sendTimeout bounds one append, as RocketMQ's putMessageTimeout.
const sendTimeout = 8 * time.Second

// handleSend serves SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE:
// validate, resolve (or auto-create) the topic, encode each message in the
// stored layout with the store host and time stamped, append, and answer with
// the offset msgIds and queue offsets.
func (s *sender) handleSend(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var received int64 // a sendtrace stamp, read only when sends are traced
	if s.cfg.SendTraceEnable {
		received = sendtrace.Now()
	}
	resp := req.NewResponse(remoting.Success, "")
	// The answer's fields are written once and encoded: a flat list, no map (remoting.Command.AppendExt).
	resp.AppendExt("MSG_REGION", s.cfg.RegionID)
	resp.AppendExt("TRACE_ON", strconv.FormatBool(s.cfg.TraceOn))
	fail := func(code int32, format string, args ...any) *remoting.Command {
		resp.Code = code
		resp.Remark = fmt.Sprintf(format, args...)
		return resp
	}
	if ok, _ := s.place.writable(); !ok {
		if fwd := s.fwd.forwardWrite(conn, req); fwd != nil {
			return fwd
		}
		if ok, remark := s.place.writable(); !ok { // else it became the leader while waiting
			return fail(remoting.ServiceNotAvailable, "%s", remark)
		}
	}
	// Everything the answer needs, allocated once: the header, the plan and the records' slice
	// live in it.
	inf := &sendInFlight{conn: conn, req: req, resp: resp}
	h := &inf.h
	if err := parseSendHeader(req, h); err != nil {
		return fail(remoting.SystemError, "bad send header: %v", err)
	}
	if h.Topic == "" || h.ProducerGroup == "" {
		return fail(remoting.SystemError, "bad send header: topic and producerGroup are required")
	}
	batch := req.Code == remoting.SendBatchMessage
	if err := message.ValidateTopic(h.Topic); err != nil {
		return fail(remoting.InvalidParameter, "invalid topic: %v", err)
	}
	if meta.IsNotAllowedToSend(h.Topic) {
		return fail(remoting.NoPermission, "Sending message to topic[%s] is forbidden.", h.Topic)
	}
	if batch && (len(h.Topic) > message.MaxTopicNameLength || strings.HasPrefix(h.Topic, message.RetryTopicPrefix)) {
		return fail(remoting.MessageIllegal, "batch messages cannot be sent to topic %s", h.Topic)
	}
	if len(req.Body) == 0 {
		return fail(remoting.MessageIllegal, "the message body is empty")
	}
	if len(req.Body) > s.cfg.MaxMessageSize {
		return fail(remoting.MessageIllegal, "the message body size %d exceeds maxMessageSize %d", len(req.Body), s.cfg.MaxMessageSize)
	}
	if len(h.Properties) > message.MaxPropertiesLength {
		return fail(remoting.MessageIllegal, "the message properties length %d exceeds %d", len(h.Properties), message.MaxPropertiesLength)
	}
	if !protocol.IsWriteable(s.brokerPermission()) {
		return fail(remoting.NoPermission, "the broker[%s] sending message is forbidden", s.cfg.BrokerName)
	}

	var tc protocol.TopicConfig
	if code, remark := s.resolveSendTopic(h, &tc); code != remoting.Success {
		return fail(code, "%s", remark)
	}
	if !protocol.IsWriteable(tc.Perm) {
		return fail(remoting.NoPermission, "the topic[%s] sending message is forbidden", h.Topic)
	}
	queueCount := max(tc.ReadQueueNums, tc.WriteQueueNums)
	if h.QueueID >= queueCount {
		return fail(remoting.InvalidParameter, "request queueId[%d] is illegal, topic %s has %d queues", h.QueueID, h.Topic, queueCount)
	}
	p := &inf.plan
	p.read(h) // the one read of the properties (sendplan.go)
	if p.queueID < 0 {
		p.queueID = rand.Int32N(max(tc.WriteQueueNums, 1))
	}
	if tc.TopicFilterType == protocol.FilterMultiTag {
		p.sysFlag |= message.SysFlagMultiTags
	}
	if p.retry {
		if code, remark := s.applyRetryPolicy(h, p); code != remoting.Success {
			return fail(code, "%s", remark)
		}
	}

	// A delayed message is stored in SCHEDULE_TOPIC_XXXX but answered with the queue it asked
	// for (schedule.go). A transactional one is stored as a half message until
	// END_TRANSACTION (transaction.go); the response names the half (msgId, queueOffset) and the
	// requested queue. A half message is never delayed.
	inf.respQueueID = p.queueID
	now := req.ReceivedOrNow() // when the request was read: the store timestamp and deadlines count from it
	if batch && p.known.TransactionFlag() {
		return fail(remoting.MessageIllegal, "batch messages cannot be transactional")
	}
	if code, remark := p.classify(batch, s.delayLevels, now); code != remoting.Success {
		return fail(code, "%s", remark)
	}
	switch p.kind {
	case kindHalf:
		toHalfMessage(p)
	case kindDelay, kindTimer:
		s.applyDelay(p, nil)
	}

	records, err := s.encodeSend(inf.one[:0], bornHost(conn, req), h, p, req.Body, batch, now)
	if err != nil {
		return fail(remoting.MessageIllegal, "%v", err)
	}
	inf.records = records
	if err := s.saveTopics(); err != nil {
		return fail(remoting.SystemError, "%v", err)
	}
	alog, async := s.commitLog.(asyncCommitLog)
	if !async {
		ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
		defer cancel()
		results, err := appendScanned(ctx, s.commitLog, records, p.scans(batch))
		return s.finishSend(inf, results, err)
	}
	// DLedger mode: the answer leaves from the goroutine that saw the entry commit, not from a
	// handler goroutine parked per send (sendInFlight.appended).
	inf.s = s
	conn.DeferAt(&inf.answer, req)
	inf.call = appendCall{proposal: proposal{records: records, scans: p.scans(batch)}, deadline: now.Add(sendTimeout), received: received, done: inf}
	alog.AppendCall(&inf.call)
	return nil
}

// sendInFlight is what answering a send needs once its append has an outcome.
type sendInFlight struct {
	conn        *remoting.Conn
	req, resp   *remoting.Command
	h           protocol.SendMessageRequestHeader // as the client sent it
	plan        sendPlan
	records     [][]byte
	one         [1][]byte // backs records for a single message
	respQueueID int32

	// DLedger mode: the append in flight, and its outcome for the deferred answer.
	s       *sender
	call    appendCall
	answer  remoting.Deferred
	results []storage.AppendResult
	err     error
}

// appended answers the send once its append has an outcome (appendDone).
func (inf *sendInFlight) appended(results []storage.AppendResult, err error) {
	inf.results, inf.err = results, err
	if errors.Is(err, dledger.ErrNotLeader) {
		go inf.answer.AnswerWith(inf) // forwards to the new leader: may wait
		return
	}
	inf.answer.AnswerWith(inf)
}

// Respond is the send's answer (remoting.Responder): built on the goroutine that answers.
func (inf *sendInFlight) Respond() *remoting.Command {
	return inf.s.finishSend(inf, inf.results, inf.err)
}

// finishSend turns an append's outcome into the send's answer.
func (s *sender) finishSend(inf *sendInFlight, results []storage.AppendResult, err error) *remoting.Command {
	resp, h, p := inf.resp, &inf.h, &inf.plan
	if errors.Is(err, dledger.ErrNotLeader) {
		// Leadership moved before the records were proposed (a transfer, or a lost lease): they
		// are not in the log, so the new leader can take them, and a client with a stale route
		// keeps succeeding.
		if fwd := s.fwd.forwardUnproposed(inf.conn, inf.req); fwd != nil {
			return fwd
		}
	}
	if err != nil && !errors.Is(err, storage.ErrFlushDiskTimeout) {
		s.logger.Warn("append failed", "topic", p.topic, "error", err)
		resp.Code, resp.Remark = errorCode(err)
		markRefusal(inf.req, resp, err)
		return resp
	}
	if errors.Is(err, storage.ErrFlushDiskTimeout) {
		resp.Code = remoting.FlushDiskTimeout
		resp.Remark = "the message is stored, but the disk flush timed out"
	}
	if code, remark := s.waitReplicas(p.waitStore(), results); code != remoting.Success { // SYNC_MASTER (ha.go, broker/replication)
		resp.Code, resp.Remark = code, remark
	}
	s.stats.recordSend(h.Topic, p, inf.records, results[0].StoreTimestamp)
	// The three values share one string: the message ids, the queue id, the queue offset.
	var buf [96]byte
	b := s.appendMsgIDs(buf[:0], results)
	idEnd := len(b)
	b = strconv.AppendInt(b, int64(inf.respQueueID), 10)
	qidEnd := len(b)
	b = strconv.AppendInt(b, results[0].QueueOffset, 10)
	vals := string(b)
	resp.AppendExt("msgId", vals[:idEnd])
	resp.AppendExt("queueId", vals[idEnd:qidEnd])
	resp.AppendExt("queueOffset", vals[qidEnd:])
	return resp
}

// sendsInline tells the remoting server when a send may be served on its connection's read
// goroutine (Server.HandleInline): on a DLedger leader, for a plain send to a topic it already
// has, handleSend only validates, encodes and queues the records for the batcher, which answers
// later (conn.Defer), so nothing waits. Everything that could wait goes to a worker as other
// requests do: a follower forwards to the leader, a new topic or a retry topic is created through
// Raft, and classic mode appends (and may wait for a flush or a slave) on the handler goroutine.
func (s *sender) sendsInline(req *remoting.Command) bool {
	if _, async := s.commitLog.(asyncCommitLog); !async || !s.place.decides() {
		return false
	}
	topic := req.Ext("topic")
	if req.Code != remoting.SendMessage {
		topic = req.Ext("b") // SEND_MESSAGE_V2's short names
	}
	return !strings.HasPrefix(topic, message.RetryTopicPrefix) && s.topics.Exists(topic)
}

// resolveSendTopic finds the target topic, creating it from the default topic
// or as a retry/DLQ topic where RocketMQ would, and copies its configuration into *dst (its
// Attributes only to read: see meta.Topics.Lookup).
func (s *sender) resolveSendTopic(h *protocol.SendMessageRequestHeader, dst *protocol.TopicConfig) (int32, string) {
	if s.topics.Lookup(h.Topic, dst) {
		return remoting.Success, ""
	}
	var tc *protocol.TopicConfig
	var created bool
	var err error
	if strings.HasPrefix(h.Topic, message.RetryTopicPrefix) || strings.HasPrefix(h.Topic, message.DLQTopicPrefix) {
		tc, created, err = s.ensureTopic(&protocol.TopicConfig{TopicName: h.Topic, ReadQueueNums: 1, WriteQueueNums: 1,
			Perm: protocol.PermRead | protocol.PermWrite, TopicFilterType: protocol.FilterSingleTag})
	} else {
		tc, created, err = s.createTopicFromDefault(h.Topic, h.DefaultTopic, h.DefaultTopicQueueNums, 0)
	}
	if err != nil {
		code, remark := errorCode(err)
		return code, fmt.Sprintf("create topic %s: %s", h.Topic, remark)
	}
	if tc == nil {
		return remoting.TopicNotExist, fmt.Sprintf("topic[%s] not exist, apply first please!", h.Topic)
	}
	if created {
		s.triggerRegister()
	}
	*dst = *tc
	return remoting.Success, ""
}

// saveTopics makes the topic table durable before a message is stored (topicsSaved); it is
// logged here, as the client only sees SYSTEM_ERROR.
func (s *sender) saveTopics() error {
	if s.topicsSaved == nil {
		return nil
	}
	if err := s.topicsSaved(); err != nil {
		s.logger.Error("refusing a send: the topic table is not saved", "error", err)
		return err
	}
	return nil
}

// applyRetryPolicy handles a message sent to %RETRY%<group>: the group must
// exist, and a message past its retry limit goes to %DLQ%<group> instead
// (RocketMQ 4.x's rule: reconsumeTimes >= max), which p's target then names.
func (s *sender) applyRetryPolicy(h *protocol.SendMessageRequestHeader, p *sendPlan) (int32, string) {
	group := strings.TrimPrefix(h.Topic, message.RetryTopicPrefix)
	gc, err := s.groupOrCreate(group)
	if err != nil {
		code, remark := errorCode(err)
		return code, fmt.Sprintf("subscription group %s: %s", group, remark)
	}
	if gc == nil {
		return remoting.SubscriptionGroupNotExist, fmt.Sprintf("subscription group not exist, %s", group)
	}
	limit := gc.RetryMaxTimes
	if h.MaxReconsumeTimes != nil {
		limit = *h.MaxReconsumeTimes
	}
	if h.ReconsumeTimes < limit {
		return remoting.Success, ""
	}
	dlq := message.DLQTopicPrefix + group
	if _, created, err := s.ensureTopic(&protocol.TopicConfig{TopicName: dlq, ReadQueueNums: 1, WriteQueueNums: 1,
		Perm: protocol.PermRead | protocol.PermWrite, TopicFilterType: protocol.FilterSingleTag}); err != nil {
		code, remark := errorCode(err)
		return code, fmt.Sprintf("create DLQ topic %s: %s", dlq, remark)
	} else if created {
		s.triggerRegister()
	}
	p.toDLQTarget(dlq)
	return remoting.Success, ""
}

// encodeSend turns the request into stored records for p's target: one for a single send,
// one per entry for a batch, all stamped with the same store time, appended to dst.
func (s *sender) encodeSend(dst [][]byte, bornHost netip.AddrPort, h *protocol.SendMessageRequestHeader, p *sendPlan, body []byte, batch bool, now time.Time) ([][]byte, error) {
	m := &message.Message{
		Topic:          p.topic,
		QueueID:        p.queueID,
		SysFlag:        p.sysFlag,
		BornTimestamp:  h.BornTimestamp,
		BornHost:       bornHost,
		StoreTimestamp: now.UnixMilli(),
		StoreHost:      s.storeHost(),
		ReconsumeTimes: h.ReconsumeTimes,
	}
	if !batch {
		m.Flag = h.Flag
		m.Body = body
		m.Properties = p.props
		rec, err := s.encodeWithCluster(m, p.known.Has&message.KnownCluster != 0)
		if err != nil {
			return nil, fmt.Errorf("encode message: %w", err)
		}
		return append(dst, rec), nil
	}
	entries, err := message.DecodeBatch(body)
	if err != nil {
		return nil, fmt.Errorf("decode batch body: %w", err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("the batch holds no message")
	}
	records := make([][]byte, 0, len(entries))
	for _, e := range entries {
		if len(e.Properties) > message.MaxPropertiesLength {
			return nil, fmt.Errorf("a batch message's properties length %d exceeds %d", len(e.Properties), message.MaxPropertiesLength)
		}
		k := message.ReadKnown(e.Properties) // each entry's one scan
		if k.Has&message.KnownDelay != 0 {
			return nil, fmt.Errorf("batch messages cannot be delayed")
		}
		m.Flag = e.Flag
		m.Body = e.Body
		m.Properties = e.Properties
		rec, err := s.encodeWithCluster(m, k.Has&message.KnownCluster != 0)
		if err != nil {
			return nil, fmt.Errorf("encode batch message: %w", err)
		}
		records = append(records, rec)
	}
	return records, nil
}

// appendMsgIDs appends the answer's msgId: the offset message id of each stored record, comma
// separated for a batch, as RocketMQ's broker answers.
func (s *sender) appendMsgIDs(dst []byte, results []storage.AppendResult) []byte {
	for i, r := range results {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = message.AppendOffsetMsgID(dst, s.storeHost(), r.PhysicalOffset)
	}
	return dst
}

// parseSendHeader reads the send header in the naming its code uses: long
// names for SEND_MESSAGE, single letters for SEND_MESSAGE_V2 and
// SEND_BATCH_MESSAGE. The fields are read as the server kept them, flat
// (handlers.go), without a map.
func parseSendHeader(req *remoting.Command, h *protocol.SendMessageRequestHeader) error {
	f := protocol.NewSendHeaderFields(req.Code == remoting.SendMessageV2 || req.Code == remoting.SendBatchMessage || req.Code == remoting.SendReplyMessageV2)
	for k, v := range req.ExtSeq() {
		f.Set(k, v)
	}
	return f.Header(h)
}
