package proxy

// Transactional messages through the proxy.
//
// A TRANSACTION message is sent to the brokers as the 4.x clients send one (broker/transaction.go
// takes that path): TRAN_MSG=true, PGROUP = the topic (the producer group the proxy uses for
// every send, as Apache's proxy does), the prepared bit in sysFlag, and
// CHECK_IMMUNITY_TIME_IN_SECONDS from the message's orphaned_transaction_recovery_duration. The
// answer carries a transaction id naming the half message (txnID) which the client hands back in
// EndTransaction; the proxy then sends END_TRANSACTION to the current master of that group.
//
// Check-back: the proxy registers itself with the brokers as a producer of every topic its
// clients publish (txnregister.go), so a broker's CHECK_TRANSACTION_STATE reaches it; it pushes
// a RecoverOrphanedTransactionCommand to a connected client publishing the topic
// (clients.go), whose checker answers with EndTransaction.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/proxy/rmqpb"
	"rocketraft/remoting"
)

// Transaction resolutions in END_TRANSACTION's commitOrRollback (message/sysflag.go).
var txnResolution = map[rmqpb.TransactionResolution]int32{
	rmqpb.TransactionResolution_TRANSACTION_RESOLUTION_UNSPECIFIED: message.TransactionNotType,
	rmqpb.TransactionResolution_COMMIT:                             message.TransactionCommitType,
	rmqpb.TransactionResolution_ROLLBACK:                           message.TransactionRollbackType,
}

// endTxnAttempts bounds how often one EndTransaction is tried (a new master is looked up
// between tries); END_TRANSACTION is idempotent on the brokers, so a retry never commits twice.
const endTxnAttempts = 4

// halfProperties adds a TRANSACTION message's half-message properties to props (nothing for
// other messages).
func halfProperties(msg *rmqpb.Message, props map[string]string) {
	sp := msg.GetSystemProperties()
	if sp.GetMessageType() != rmqpb.MessageType_TRANSACTION {
		return
	}
	props[message.PropertyTransactionPrepared] = "true"
	props[message.PropertyProducerGroup] = msg.GetTopic().GetName()
	if d := sp.GetOrphanedTransactionRecoveryDuration(); d != nil && d.AsDuration() >= time.Second {
		props[message.PropertyCheckImmunityTime] = strconv.FormatInt(int64(d.AsDuration()/time.Second), 10)
	}
}

// halfSysFlag is the send's sysFlag: the prepared bit for a TRANSACTION message.
func halfSysFlag(msg *rmqpb.Message) int32 {
	if msg.GetSystemProperties().GetMessageType() == rmqpb.MessageType_TRANSACTION {
		return message.TransactionPreparedType
	}
	return 0
}

// txnID is what EndTransaction needs to find a half message: its group, its queue offset in
// the half topic and its commitlog offset. The clients treat it as opaque.
type txnID struct {
	broker                string
	queueOffset, physical int64
}

// txnIDPrefix versions the format.
const txnIDPrefix = "t1"

// String is "t1:<queueOffset>:<commitLogOffset>:<brokerName>" (the name last: it may hold ':').
func (id txnID) String() string {
	return fmt.Sprintf("%s:%d:%d:%s", txnIDPrefix, id.queueOffset, id.physical, id.broker)
}

// parseTxnID reads a transaction id made by String; the error says what is wrong.
func parseTxnID(s string) (txnID, error) {
	f := strings.SplitN(s, ":", 4)
	if len(f) != 4 || f[0] != txnIDPrefix {
		return txnID{}, fmt.Errorf("transaction id %q was not issued by this proxy (want %s:<queueOffset>:<commitLogOffset>:<broker>)", s, txnIDPrefix)
	}
	q, err1 := strconv.ParseInt(f[1], 10, 64)
	p, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || q < 0 || p < 0 || f[3] == "" {
		return txnID{}, fmt.Errorf("transaction id %q: bad offsets or empty broker name", s)
	}
	return txnID{broker: f[3], queueOffset: q, physical: p}, nil
}

// halfSent makes the transaction id of a half message the broker of group brokerName stored
// (its answer r), and notes the sending client as a transactional producer.
func (m *messaging) halfSent(ctx context.Context, brokerName string, r *remoting.Command) (string, *rmqpb.Status) {
	m.clients.markTransactional(clientID(ctx))
	_, phys, err := message.ParseOffsetMsgID(r.Ext("msgId"))
	q, qerr := strconv.ParseInt(r.Ext("queueOffset"), 10, 64)
	if err != nil || qerr != nil {
		// Stored, but it cannot be named: the broker's check-back resolves it.
		return "", fail(rmqpb.Code_INTERNAL_SERVER_ERROR, "half message stored by %s, but its answer names no offsets (msgId %q, queueOffset %q); the transaction is left to the check-back",
			brokerName, r.Ext("msgId"), r.Ext("queueOffset"))
	}
	return txnID{broker: brokerName, queueOffset: q, physical: phys}.String(), ok()
}

// EndTransaction commits, rolls back or leaves unknown a half message at the current master of
// its group (the route is asked again when the master changed since the send).
func (m *messaging) EndTransaction(ctx context.Context, req *rmqpb.EndTransactionRequest) (*rmqpb.EndTransactionResponse, error) {
	answer := func(s *rmqpb.Status) (*rmqpb.EndTransactionResponse, error) {
		return &rmqpb.EndTransactionResponse{Status: s}, nil
	}
	topic := req.GetTopic().GetName()
	if topic == "" {
		return answer(fail(rmqpb.Code_ILLEGAL_TOPIC, "topic is empty"))
	}
	id, err := parseTxnID(req.GetTransactionId())
	if err != nil {
		return answer(fail(rmqpb.Code_INVALID_TRANSACTION_ID, "%v", err))
	}
	resolution, known := txnResolution[req.GetResolution()]
	if !known {
		return answer(fail(rmqpb.Code_BAD_REQUEST, "transaction resolution %v is not COMMIT, ROLLBACK or unspecified", req.GetResolution()))
	}
	header := map[string]string{
		"producerGroup":        topic,
		"tranStateTableOffset": strconv.FormatInt(id.queueOffset, 10),
		"commitLogOffset":      strconv.FormatInt(id.physical, 10),
		"commitOrRollback":     strconv.FormatInt(int64(resolution), 10),
		"fromTransactionCheck": strconv.FormatBool(req.GetSource() == rmqpb.TransactionSource_SOURCE_SERVER_CHECK),
		"msgId":                req.GetMessageId(),
		"transactionId":        req.GetTransactionId(),
	}
	var last error
	for attempt := 0; attempt < endTxnAttempts; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return answer(fail(rmqpb.Code_PROXY_TIMEOUT, "end transaction %s: %v (last: %v)", id, ctx.Err(), last))
			case <-time.After(time.Duration(attempt) * 300 * time.Millisecond):
			}
		}
		addrs, err := m.groupAddrs(ctx, topic, id.broker)
		if err != nil {
			last = err
			continue
		}
		// The master first; if it cannot be reached (killed, and the route not updated yet), the
		// group's other nodes: a DLedger follower forwards END_TRANSACTION to the leader.
		for _, addr := range addrs {
			ictx, cancel := context.WithTimeout(ctx, m.cfg.SendTimeout)
			r, err := m.cl.Invoke(ictx, addr, remoting.NewRequest(remoting.EndTransaction, header, nil))
			cancel()
			if err != nil {
				last = fmt.Errorf("%s (%s): %w", id.broker, addr, err)
				if errors.Is(err, remoting.ErrNotSent) {
					continue
				}
				break
			}
			if r.Code == remoting.Success {
				return answer(ok())
			}
			if r.Code == remoting.SystemError && (strings.Contains(r.Remark, "wrong") || strings.Contains(r.Remark, "Find prepared transaction message failed")) {
				// The half is not where the id says, or belongs to another topic.
				return answer(fail(rmqpb.Code_INVALID_TRANSACTION_ID, "broker %s: %s", id.broker, r.Remark))
			}
			// Not the master any more, no leader yet, busy, or an outcome the broker does not
			// know: END_TRANSACTION is idempotent, so it is asked again after a fresh route.
			last = fmt.Errorf("broker %s (%s): code %d %s", id.broker, addr, r.Code, r.Remark)
			break
		}
	}
	return answer(fail(rmqpb.Code_HA_NOT_AVAILABLE, "no master of %s ended transaction %s: %v", id.broker, id, last))
}

// groupAddrs lists the addresses of group brokerName in topic's route, the master first.
func (m *messaging) groupAddrs(ctx context.Context, topic, brokerName string) ([]string, error) {
	r, err := m.routes.get(ctx, topic)
	if err != nil {
		return nil, err
	}
	for _, bd := range r.BrokerDatas {
		if bd.BrokerName != brokerName {
			continue
		}
		var out []string
		// The master as the leader book knows it (it may be newer than the route), then the
		// route's master and the other nodes.
		lctx, cancel := context.WithTimeout(ctx, m.cfg.SendTimeout)
		if a, err := m.masterOf(lctx, topic, brokerName); err == nil && a != "" {
			out = append(out, a)
		}
		cancel()
		if a := bd.MasterAddr(); a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
		for _, id := range slices.Sorted(maps.Keys(bd.BrokerAddrs)) {
			if a := bd.BrokerAddrs[id]; id != protocol.MasterID && a != "" && !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	return nil, fmt.Errorf("group %q of topic %s has no broker in the route", brokerName, topic)
}

// onCheckTransaction serves a broker's CHECK_TRANSACTION_STATE (oneway): the question is queued
// for a client publishing the topic (written by another goroutine, clients.go).
func (m *messaging) onCheckTransaction(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if err := m.recoverOrphaned(conn, req); err != nil {
		m.log.Debug("transaction check-back not passed on", "broker", conn.RemoteAddr(), "error", err)
	}
	return nil
}

// errNoPublisher: no connected client publishes the topic (the broker asks again later).
var errNoPublisher = errors.New("no connected client publishes the topic")

// recoverOrphaned pushes one check-back to a client: the half message as the client reads a
// message, and the transaction id naming the copy the broker asked about.
func (m *messaging) recoverOrphaned(conn *remoting.Conn, req *remoting.Command) error {
	msg, _, err := message.DecodeRecord(req.Body)
	if err != nil {
		return fmt.Errorf("CHECK_TRANSACTION_STATE body: %w", err)
	}
	q, err1 := strconv.ParseInt(req.Ext("tranStateTableOffset"), 10, 64)
	p, err2 := strconv.ParseInt(req.Ext("commitLogOffset"), 10, 64)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("CHECK_TRANSACTION_STATE header: tranStateTableOffset %q, commitLogOffset %q", req.Ext("tranStateTableOffset"), req.Ext("commitLogOffset"))
	}
	broker := m.registrar.brokerName(conn)
	if broker == "" {
		if broker, err = m.brokerOfAddr(msg.Topic, conn.RemoteAddr()); err != nil {
			return err
		}
	}
	c := m.clients.publisher(msg.Topic)
	if c == nil {
		return fmt.Errorf("topic %s: %w", msg.Topic, errNoPublisher)
	}
	id := txnID{broker: broker, queueOffset: q, physical: p}
	gm := toGRPC(msg, 0)
	gm.SystemProperties.MessageType = rmqpb.MessageType_TRANSACTION
	gm.SystemProperties.InvisibleDuration = nil
	if uniq := req.Ext("msgId"); uniq != "" {
		gm.SystemProperties.MessageId = uniq
	}
	for _, k := range []string{message.PropertyTransactionCheckTimes, message.PropertyTranPreparedQueueOffset,
		message.PropertyCheckImmunityTime, message.PropertyTransactionID} {
		delete(gm.UserProperties, k)
	}
	cmd := &rmqpb.TelemetryCommand{Status: ok(), Command: &rmqpb.TelemetryCommand_RecoverOrphanedTransactionCommand{
		RecoverOrphanedTransactionCommand: &rmqpb.RecoverOrphanedTransactionCommand{Message: gm, TransactionId: id.String()}}}
	if err := c.push(cmd, m.log); err != nil {
		return err
	}
	m.log.Debug("transaction check-back queued for a producer", "topic", msg.Topic, "client", c.id, "transaction", id.String())
	return nil
}

// brokerOfAddr names the group of topic's route that lists addr.
func (m *messaging) brokerOfAddr(topic, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.SendTimeout)
	defer cancel()
	r, err := m.routes.get(ctx, topic)
	if err != nil {
		return "", err
	}
	for _, bd := range r.BrokerDatas {
		for _, a := range bd.BrokerAddrs {
			if a == addr {
				return bd.BrokerName, nil
			}
		}
	}
	return "", fmt.Errorf("no group of topic %s lists broker %s", topic, addr)
}
