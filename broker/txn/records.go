package txn

import (
	"fmt"
	"net/netip"
	"strconv"

	"rocketraft/broker/meta"
	"rocketraft/message"
)

// opTag tags op records ("d", RocketMQ's REMOVETAG).
const opTag = "d"

// commitRecord builds the real message of a committed half: its original topic and queue back,
// the half-message properties gone, stored by host at now (ms).
func commitRecord(half *message.Message, origin int64, host netip.AddrPort, now int64) ([]byte, error) {
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
	m.StoreTimestamp, m.StoreHost = now, host
	m.PreparedTransactionOffset = half.PhysicalOffset
	m.Properties = message.FormatProperties(props)
	rec, err := message.EncodeRecord(&m)
	if err != nil {
		return nil, fmt.Errorf("encode committed message: %w", err)
	}
	return rec, nil
}

// opRecord builds the op record that marks half queue offset halfOffset resolved.
func opRecord(halfOffset int64, host netip.AddrPort, now int64) ([]byte, error) {
	m := &message.Message{
		Topic:          meta.TransOpHalfTopic,
		BornTimestamp:  now,
		BornHost:       host,
		StoreTimestamp: now,
		StoreHost:      host,
		Body:           []byte(strconv.FormatInt(halfOffset, 10)),
		Properties: message.FormatProperties(map[string]string{
			message.PropertyTags: opTag, message.PropertyWaitStoreMsgOK: "false"}),
	}
	rec, err := message.EncodeRecord(m)
	if err != nil {
		return nil, fmt.Errorf("encode op record: %w", err)
	}
	return rec, nil
}

// halfCopy builds a copy of half in topic (the half topic for a check-back's re-put, with the
// check count raised; TRANS_CHECK_MAX_TIME_TOPIC for a discarded one), stamped now.
func halfCopy(half *message.Message, topic string, origin int64, checks int, host netip.AddrPort, now int64) ([]byte, error) {
	props := message.ParseProperties(half.Properties)
	props[message.PropertyTransactionCheckTimes] = strconv.Itoa(checks)
	props[message.PropertyTranPreparedQueueOffset] = strconv.FormatInt(origin, 10)
	m := *half
	m.Topic, m.QueueID = topic, 0
	m.QueueOffset, m.PhysicalOffset = 0, 0
	m.StoreTimestamp, m.StoreHost = now, host
	m.Properties = message.FormatProperties(props)
	rec, err := message.EncodeRecord(&m)
	if err != nil {
		return nil, fmt.Errorf("encode half message copy: %w", err)
	}
	return rec, nil
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
