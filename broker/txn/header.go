package txn

import (
	"errors"
	"fmt"
	"strconv"

	"rocketraft/message"
	"rocketraft/remoting"
)

// EndRequest is END_TRANSACTION's request header (EndTransactionRequestHeader).
type EndRequest struct {
	ProducerGroup        string
	TranStateTableOffset int64 // the half's queue offset
	CommitLogOffset      int64 // the half's commitlog offset
	CommitOrRollback     int32 // message.Transaction{Not,Commit,Rollback}Type
	FromTransactionCheck bool
	MsgID                string
	TransactionID        string
}

// ParseEndRequest reads and checks END_TRANSACTION's header; the error names the bad field.
func ParseEndRequest(req *remoting.Command) (*EndRequest, error) {
	h := &EndRequest{ProducerGroup: req.Ext("producerGroup"), MsgID: req.Ext("msgId"), TransactionID: req.Ext("transactionId")}
	if h.ProducerGroup == "" {
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
	h.TranStateTableOffset = num("tranStateTableOffset")
	h.CommitLogOffset = num("commitLogOffset")
	h.CommitOrRollback = int32(num("commitOrRollback"))
	if err != nil {
		return nil, err
	}
	if h.TranStateTableOffset < 0 || h.CommitLogOffset < 0 {
		return nil, errors.New("tranStateTableOffset and commitLogOffset must be >= 0")
	}
	switch h.CommitOrRollback {
	case message.TransactionNotType, message.TransactionCommitType, message.TransactionRollbackType:
	default:
		return nil, fmt.Errorf("commitOrRollback %d: want 0 (unknown), 8 (commit) or 12 (rollback)", h.CommitOrRollback)
	}
	if s := req.Ext("fromTransactionCheck"); s != "" {
		if h.FromTransactionCheck, err = strconv.ParseBool(s); err != nil {
			return nil, fmt.Errorf("fromTransactionCheck %q is not a boolean", s)
		}
	}
	return h, nil
}
