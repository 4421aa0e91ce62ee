package broker

// Transactional messages, the broker's side: a send whose properties hold TRAN_MSG=true is stored
// as a half message (sendPlan.classify in sendplan.go, then toHalfMessage: topic RMQ_SYS_TRANS_HALF_TOPIC, queue
// 0, REAL_TOPIC / REAL_QID added, transaction bits NOT_TYPE, so the half queue indexes it and
// consumers of the real topic never see it); END_TRANSACTION (37) is adapted to package
// broker/txn, which resolves transactions and runs the check-back (its package comment has the
// records and the locking). newTxnService wires it.
//
// Go client quirk: it sends END_TRANSACTION with InvokeOneWay but without the oneway bit, and
// drops the answer; Java sets the bit. Either way the broker answers unless the bit is set
// (remoting does that), so an error is at least visible to a client that reads it.

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"time"

	"rocketraft/broker/meta"
	"rocketraft/broker/txn"
	"rocketraft/dledger"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// toHalfMessage turns a transactional send's target into its half message: the real topic and queue
// go into REAL_TOPIC / REAL_QID, the message into the half topic's queue 0 with the transaction
// bits reset to NOT_TYPE (so the half queue indexes it and the store dispatches it there only),
// without any TRAN_PREPARED_QUEUE_OFFSET / TRANSACTION_CHECK_TIMES the client set.
func toHalfMessage(h *sendPlan) {
	props := message.ParseProperties(h.props)
	// The check-back's own properties: a client's value would corrupt the bookkeeping (two
	// transactions sharing an origin, a half discarded unchecked).
	delete(props, message.PropertyTranPreparedQueueOffset)
	delete(props, message.PropertyTransactionCheckTimes)
	props[message.PropertyRealTopic] = h.topic
	props[message.PropertyRealQueueID] = strconv.FormatInt(int64(h.queueID), 10)
	h.props = message.FormatProperties(props)
	h.topic = meta.TransHalfTopic
	h.queueID = 0
	h.sysFlag = message.ResetTransactionType(h.sysFlag, message.TransactionNotType)
}

// handleEndTransaction serves END_TRANSACTION (37). A DLedger follower forwards it to the
// leader; a classic slave answers SLAVE_NOT_AVAILABLE as RocketMQ's does.
func (s *sender) handleEndTransaction(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if resp := s.fwd.forwardOrRefuse(conn, req); resp != nil {
		return resp
	}
	if s.place.haPart() == haSlave { // a classic slave (Broker.isClassicSlave)
		return req.NewResponse(remoting.SlaveNotAvailable, "the broker is a slave; END_TRANSACTION goes to the master")
	}
	h, err := txn.ParseEndRequest(req)
	if err != nil {
		return req.NewResponse(remoting.SystemError, "bad END_TRANSACTION header: "+err.Error())
	}
	if h.CommitOrRollback == message.TransactionNotType {
		// The producer does not know yet: the check-back will ask again.
		s.logger.Debug("transaction state unknown; left to the check-back", "group", h.ProducerGroup,
			"halfOffset", h.TranStateTableOffset, "msgId", h.MsgID, "fromCheck", h.FromTransactionCheck, "remark", req.Remark)
		return req.NewResponse(remoting.Success, "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), txn.Timeout)
	defer cancel()
	code, remark, err := s.txn.End(ctx, h)
	if errors.Is(err, dledger.ErrNotLeader) {
		// Leadership moved before the records were proposed: the next leader can take it.
		if fwd := s.fwd.forwardUnproposed(conn, req); fwd != nil {
			return fwd
		}
	}
	resp := req.NewResponse(code, remark)
	if err != nil {
		resp.Code, resp.Remark = errorCode(err)
		markRefusal(req, resp, err)
		s.logger.Warn("END_TRANSACTION failed", "group", h.ProducerGroup, "halfOffset", h.TranStateTableOffset,
			"commitLogOffset", h.CommitLogOffset, "error", err)
	}
	return resp
}

// newTxnService wires the transaction service (package broker/txn) to this broker's store,
// append path, offsets, topics and producer connections (New calls it once the commitlog is
// open).
func (b *Broker) newTxnService() *txn.Service {
	return txn.New(txn.Config{
		Acquire: b.acquireStore,
		Append:  b.commitLog.Append,
		// The classic master, or the ready DLedger leader, resolves transactions.
		IsMaster:        b.place.master,
		CommittedOffset: b.tables.committedOffset,
		CommitOffset:    b.tables.commitOffset,
		EnsureCheckMaxTopic: func() error {
			_, _, err := b.tables.ensureTopic(&protocol.TopicConfig{TopicName: meta.TransCheckMaxTimeTopic, ReadQueueNums: 1, WriteQueueNums: 1,
				Perm: protocol.PermRead | protocol.PermWrite, TopicFilterType: protocol.FilterSingleTag})
			return err
		},
		ProducerConn: func(group string) txn.Producer {
			if c := b.clients.ProducerConn(group); c != nil {
				return c
			}
			return nil // not a typed nil: the service tests for none
		},
		StoreHost:     func() netip.AddrPort { return b.storeHost },
		CheckInterval: time.Duration(b.cfg.TransactionCheckInterval) * time.Millisecond,
		CheckTimeout:  time.Duration(b.cfg.TransactionTimeOut) * time.Millisecond,
		CheckMax:      b.cfg.TransactionCheckMax,
		Logger:        b.logger.Named("txn"),
	})
}
