package broker

// Transactional messages: half messages, END_TRANSACTION (37) and the records they write,
// CHECK_TRANSACTION_STATE back to the producer. The check-back service
// is in txncheck.go, the bookkeeping of unresolved halves in txnbook.go.
//
// A send whose properties hold TRAN_MSG=true is stored as a half message: topic
// RMQ_SYS_TRANS_HALF_TOPIC, queue 0, REAL_TOPIC / REAL_QID added, transaction bits NOT_TYPE (so
// the half queue indexes it). Consumers of the real topic never see it.
//
// END_TRANSACTION commit appends, in one append, the real message (topic and queue from
// REAL_TOPIC / REAL_QID, which are removed with TRAN_MSG; sysFlag COMMIT; PREPAREDTRANSACTIONOFFSET
// = the half's commitlog offset; TRAN_PREPARED_QUEUE_OFFSET = the transaction's first half queue
// offset) and an op record naming the half; rollback appends the op record only; unknown (0)
// does nothing. One append is one Raft entry in DLedger mode (the batcher keeps a send's records
// together and the state machine applies them with one AppendReplicated), so a commit is never
// half done on any replica: the real message exists iff the op record does.
//
// Answers are idempotent: a second END_TRANSACTION for a transaction already resolved (the
// producer's late answer after a check-back's, a retried oneway) is answered SUCCESS and writes
// nothing; one naming an older copy of a re-put half acts on the current copy.
//
// Go client quirk: it sends END_TRANSACTION with InvokeOneWay but without the oneway bit, and
// drops the answer; Java sets the bit. Either way the broker answers unless the bit is set
// (remoting does that), so an error is at least visible to a client that reads it.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"rocketraft/broker/meta"
	"rocketraft/dledger"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// Transaction constants (Java TransactionalMessageUtil and MessageSysFlag).
const (
	// txnGroup is the internal consumer group whose offset on the half topic is the cursor
	// below which every half message is resolved (CID_RMQ_SYS_TRANS in RocketMQ).
	txnGroup = "CID_RMQ_SYS_TRANS"
	// txnOpTag tags op records ("d", RocketMQ's REMOVETAG).
	txnOpTag = "d"
	// txnTimeout bounds one END_TRANSACTION or check-back write.
	txnTimeout = 8 * time.Second
)

// isTransactionalSend reports whether a send takes the half-message path: TRAN_MSG=true, unless
// it is a retry with a delay level (RocketMQ's exception, so a consumer's retry of a committed
// transactional message is not held again).
func isTransactionalSend(h *protocol.SendMessageRequestHeader) bool {
	if v, ok := message.PropertyString(h.Properties, message.PropertyTransactionPrepared); !ok || v != "true" {
		return false
	}
	if _, delayed := message.PropertyString(h.Properties, message.PropertyDelayTimeLevel); delayed && h.ReconsumeTimes > 0 {
		return false
	}
	return true
}

// toHalfMessage rewrites a transactional send into its half message: the real topic and queue
// go into REAL_TOPIC / REAL_QID, the message into the half topic's queue 0 with the transaction
// bits reset to NOT_TYPE (so the half queue indexes it and the store dispatches it there only),
// without any TRAN_PREPARED_QUEUE_OFFSET / TRANSACTION_CHECK_TIMES the client set.
func toHalfMessage(h *protocol.SendMessageRequestHeader) {
	props := message.ParseProperties(h.Properties)
	// The check-back's own properties: a client's value would corrupt the bookkeeping (two
	// transactions sharing an origin, a half discarded unchecked).
	delete(props, message.PropertyTranPreparedQueueOffset)
	delete(props, message.PropertyTransactionCheckTimes)
	props[message.PropertyRealTopic] = h.Topic
	props[message.PropertyRealQueueID] = strconv.FormatInt(int64(h.QueueID), 10)
	h.Properties = message.FormatProperties(props)
	h.Topic = meta.TransHalfTopic
	h.QueueID = 0
	h.SysFlag = message.ResetTransactionType(h.SysFlag, message.TransactionNotType)
}

// endTxnHeader is END_TRANSACTION's request header (EndTransactionRequestHeader).
type endTxnHeader struct {
	producerGroup        string
	tranStateTableOffset int64
	commitLogOffset      int64
	commitOrRollback     int32
	fromTransactionCheck bool
	msgID                string
	transactionID        string
}

// parseEndTxnHeader reads and checks the header; the error names the bad field.
func parseEndTxnHeader(req *remoting.Command) (*endTxnHeader, error) {
	h := &endTxnHeader{producerGroup: req.Ext("producerGroup"), msgID: req.Ext("msgId"), transactionID: req.Ext("transactionId")}
	if h.producerGroup == "" {
		return nil, errors.New("producerGroup is required")
	}
	var err error
	num := func(name string) int64 {
		s := req.Ext(name)
		n, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil && err == nil {
			err = fmt.Errorf("%s %q is not an integer", name, s)
		}
		return n
	}
	h.tranStateTableOffset = num("tranStateTableOffset")
	h.commitLogOffset = num("commitLogOffset")
	h.commitOrRollback = int32(num("commitOrRollback"))
	if err != nil {
		return nil, err
	}
	if h.tranStateTableOffset < 0 || h.commitLogOffset < 0 {
		return nil, errors.New("tranStateTableOffset and commitLogOffset must be >= 0")
	}
	switch h.commitOrRollback {
	case message.TransactionNotType, message.TransactionCommitType, message.TransactionRollbackType:
	default:
		return nil, fmt.Errorf("commitOrRollback %d: want 0 (unknown), 8 (commit) or 12 (rollback)", h.commitOrRollback)
	}
	if s := req.Ext("fromTransactionCheck"); s != "" {
		if h.fromTransactionCheck, err = strconv.ParseBool(s); err != nil {
			return nil, fmt.Errorf("fromTransactionCheck %q is not a boolean", s)
		}
	}
	return h, nil
}

// txnMaster reports whether this node resolves transactions: the classic master, or the ready
// DLedger leader.
func (b *Broker) txnMaster() bool { return b.place.master() }

// handleEndTransaction serves END_TRANSACTION (37). A DLedger follower forwards it to the
// leader; a classic slave answers SLAVE_NOT_AVAILABLE as RocketMQ's does.
func (b *Broker) handleEndTransaction(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if resp := b.forwardOrRefuse(conn, req); resp != nil {
		return resp
	}
	if b.isClassicSlave() {
		return req.NewResponse(remoting.SlaveNotAvailable, "the broker is a slave; END_TRANSACTION goes to the master")
	}
	h, err := parseEndTxnHeader(req)
	if err != nil {
		return req.NewResponse(remoting.SystemError, "bad END_TRANSACTION header: "+err.Error())
	}
	if h.commitOrRollback == message.TransactionNotType {
		// The producer does not know yet: the check-back will ask again.
		b.logger.Debug("transaction state unknown; left to the check-back", "group", h.producerGroup,
			"halfOffset", h.tranStateTableOffset, "msgId", h.msgID, "fromCheck", h.fromTransactionCheck, "remark", req.Remark)
		return req.NewResponse(remoting.Success, "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), txnTimeout)
	defer cancel()
	code, remark, err := b.txn.end(ctx, h)
	if errors.Is(err, dledger.ErrNotLeader) {
		// Leadership moved before the records were proposed: the next leader can take it.
		if fwd := b.forwardUnproposed(conn, req); fwd != nil {
			return fwd
		}
	}
	resp := req.NewResponse(code, remark)
	if err != nil {
		resp.Code, resp.Remark = errorCode(err)
		markRefusal(req, resp, err)
		b.logger.Warn("END_TRANSACTION failed", "group", h.producerGroup, "halfOffset", h.tranStateTableOffset,
			"commitLogOffset", h.commitLogOffset, "error", err)
	}
	return resp
}

// readHalf reads the half record at phys and checks it against the header's group and queue
// offset, with RocketMQ's remarks for each mismatch (SYSTEM_ERROR).
func (b *Broker) readHalf(h *endTxnHeader) (*message.Message, halfEntry, string) {
	st, release, err := b.acquireStore()
	if err != nil {
		return nil, halfEntry{}, "Find prepared transaction message failed: " + err.Error()
	}
	rec, err := st.ReadRecord(h.commitLogOffset)
	release()
	if err != nil {
		return nil, halfEntry{}, fmt.Sprintf("Find prepared transaction message failed: commitLogOffset %d: %v", h.commitLogOffset, err)
	}
	m, _, err := message.DecodeRecord(rec)
	if err != nil {
		return nil, halfEntry{}, fmt.Sprintf("Find prepared transaction message failed: commitLogOffset %d: %v", h.commitLogOffset, err)
	}
	if m.Topic != meta.TransHalfTopic {
		return nil, halfEntry{}, fmt.Sprintf("Find prepared transaction message failed: the message at commitLogOffset %d is in topic %s, not a half message", h.commitLogOffset, m.Topic)
	}
	v, _ := message.ParseView(rec)
	e, err := parseHalf(v)
	if err != nil {
		return nil, halfEntry{}, "Find prepared transaction message failed: " + err.Error()
	}
	switch {
	case e.group != h.producerGroup:
		return nil, halfEntry{}, fmt.Sprintf("The producer group wrong: the half message belongs to %q", e.group)
	case m.QueueOffset != h.tranStateTableOffset:
		return nil, halfEntry{}, fmt.Sprintf("The transaction state table offset wrong: the half message at %d has queue offset %d", h.commitLogOffset, m.QueueOffset)
	case m.PhysicalOffset != h.commitLogOffset:
		return nil, halfEntry{}, "The commit log offset wrong"
	}
	return m, e, ""
}

// readHalfAt reads the half record at phys (the current copy of a transaction).
func (b *Broker) readHalfAt(phys int64) (*message.Message, error) {
	st, release, err := b.acquireStore()
	if err != nil {
		return nil, err
	}
	rec, err := st.ReadRecord(phys)
	release()
	if err != nil {
		return nil, fmt.Errorf("read half message at %d: %w", phys, err)
	}
	m, _, err := message.DecodeRecord(rec)
	if err != nil {
		return nil, fmt.Errorf("decode half message at %d: %w", phys, err)
	}
	return m, nil
}

// commitRecord builds the real message of a committed half: its original topic and queue back,
// the half-message properties gone.
func (b *Broker) commitRecord(half *message.Message, origin int64, now int64) ([]byte, error) {
	props := message.ParseProperties(half.Properties)
	topic := props[message.PropertyRealTopic]
	qid, err := strconv.ParseInt(props[message.PropertyRealQueueID], 10, 32)
	if topic == "" || err != nil || qid < 0 {
		return nil, fmt.Errorf("half message at %d has no usable %s/%s (%q, %q)", half.PhysicalOffset,
			message.PropertyRealTopic, message.PropertyRealQueueID, topic, props[message.PropertyRealQueueID])
	}
	delete(props, message.PropertyRealTopic)
	delete(props, message.PropertyRealQueueID)
	delete(props, message.PropertyTransactionPrepared)
	props[message.PropertyTranPreparedQueueOffset] = strconv.FormatInt(origin, 10)
	props[message.PropertyWaitStoreMsgOK] = "false"
	m := *half
	m.Topic, m.QueueID = topic, int32(qid)
	m.QueueOffset, m.PhysicalOffset = 0, 0
	m.SysFlag = message.ResetTransactionType(half.SysFlag, message.TransactionCommitType)
	m.StoreTimestamp, m.StoreHost = now, b.storeHost
	m.PreparedTransactionOffset = half.PhysicalOffset
	m.Properties = message.FormatProperties(props)
	rec, err := message.EncodeRecord(&m)
	if err != nil {
		return nil, fmt.Errorf("encode committed message: %w", err)
	}
	return rec, nil
}

// opRecord builds the op record that marks half queue offset halfOffset resolved.
func (b *Broker) opRecord(halfOffset int64, now int64) ([]byte, error) {
	m := &message.Message{
		Topic:          meta.TransOpHalfTopic,
		BornTimestamp:  now,
		BornHost:       b.storeHost,
		StoreTimestamp: now,
		StoreHost:      b.storeHost,
		Body:           []byte(strconv.FormatInt(halfOffset, 10)),
		Properties: message.FormatProperties(map[string]string{
			message.PropertyTags: txnOpTag, message.PropertyWaitStoreMsgOK: "false"}),
	}
	rec, err := message.EncodeRecord(m)
	if err != nil {
		return nil, fmt.Errorf("encode op record: %w", err)
	}
	return rec, nil
}

// halfCopy builds a copy of half in topic (the half topic for a check-back's re-put, with the
// check count raised; TRANS_CHECK_MAX_TIME_TOPIC for a discarded one), stamped now.
func (b *Broker) halfCopy(half *message.Message, topic string, origin int64, checks int, now int64) ([]byte, error) {
	props := message.ParseProperties(half.Properties)
	props[message.PropertyTransactionCheckTimes] = strconv.Itoa(checks)
	props[message.PropertyTranPreparedQueueOffset] = strconv.FormatInt(origin, 10)
	m := *half
	m.Topic, m.QueueID = topic, 0
	m.QueueOffset, m.PhysicalOffset = 0, 0
	m.StoreTimestamp, m.StoreHost = now, b.storeHost
	m.Properties = message.FormatProperties(props)
	rec, err := message.EncodeRecord(&m)
	if err != nil {
		return nil, fmt.Errorf("encode half message copy: %w", err)
	}
	return rec, nil
}

// appendTxn appends records as one unit (one Raft entry in DLedger mode; a full disk is refused
// before proposing, as for sends). A flush timeout means stored.
func (b *Broker) appendTxn(ctx context.Context, records [][]byte) ([]storage.AppendResult, error) {
	res, err := b.commitLog.Append(ctx, records)
	if err != nil && !errors.Is(err, storage.ErrFlushDiskTimeout) {
		return nil, fmt.Errorf("append transaction records: %w", err)
	}
	if len(res) != len(records) {
		return nil, fmt.Errorf("append transaction records: %d results for %d records", len(res), len(records))
	}
	return res, nil
}

// checkHeader is CHECK_TRANSACTION_STATE's header for the half copy stored at phys/queueOffset.
func checkHeader(storeHost netip.AddrPort, half *message.Message, queueOffset, phys int64) map[string]string {
	props := message.ParseProperties(half.Properties)
	uniq := props[message.PropertyUniqClientMessageID]
	txID := props[message.PropertyTransactionID]
	if txID == "" {
		txID = uniq
	}
	return map[string]string{
		"tranStateTableOffset": strconv.FormatInt(queueOffset, 10),
		"commitLogOffset":      strconv.FormatInt(phys, 10),
		"msgId":                uniq,
		"transactionId":        txID,
		"offsetMsgId":          message.OffsetMsgID(storeHost, phys),
	}
}

// checkBody is CHECK_TRANSACTION_STATE's body: the half message in stored layout with its real
// topic and queue, and the queue and commitlog offsets of the copy the producer must answer for.
func checkBody(half *message.Message, queueOffset, phys int64) ([]byte, error) {
	m := *half
	props := message.ParseProperties(half.Properties)
	if t := props[message.PropertyRealTopic]; t != "" {
		m.Topic = t
	}
	if q, err := strconv.ParseInt(props[message.PropertyRealQueueID], 10, 32); err == nil && q >= 0 {
		m.QueueID = int32(q)
	}
	m.QueueOffset, m.PhysicalOffset = queueOffset, phys
	body, err := message.EncodeRecord(&m)
	if err != nil {
		return nil, fmt.Errorf("encode check body: %w", err)
	}
	return body, nil
}
