package pop

import (
	"fmt"
	"strconv"
	"strings"
)

// ExtraInfo is the checkpoint handle a POP client sends back with ACK_MESSAGE and
// CHANGE_MESSAGE_INVISIBLETIME (the message's POP_CK property). Its text is space separated:
//
//	<ckQueueOffset> <popTime> <invisibleTime> <reviveQid> <retryFlag> <brokerName> <queueId> <msgQueueOffset>
//
// This broker identifies a checkpoint by queue, message offset and popTime; the other fields
// are carried for the client.
type ExtraInfo struct {
	CkQueueOffset  int64
	PopTime        int64
	InvisibleTime  int64
	ReviveQid      int32
	RetryFlag      string
	BrokerName     string
	QueueID        int32
	MsgQueueOffset int64
}

// String renders the extraInfo text.
func (e ExtraInfo) String() string {
	flag := e.RetryFlag
	if flag == "" {
		flag = "0"
	}
	return fmt.Sprintf("%d %d %d %d %s %s %d %d", e.CkQueueOffset, e.PopTime, e.InvisibleTime, e.ReviveQid, flag, e.BrokerName, e.QueueID, e.MsgQueueOffset)
}

// ParseExtraInfo parses the extraInfo text. The Java client sends at least the first seven
// fields (older ones omit msgQueueOffset, which then comes from the request's offset: -1 here).
func ParseExtraInfo(s string) (ExtraInfo, error) {
	f := strings.Fields(s)
	if len(f) < 7 {
		return ExtraInfo{}, fmt.Errorf("extraInfo %q: %d fields, want at least 7", s, len(f))
	}
	var e ExtraInfo
	var err error
	num := func(i int) int64 {
		if err != nil {
			return 0
		}
		var v int64
		if v, err = strconv.ParseInt(f[i], 10, 64); err != nil {
			err = fmt.Errorf("extraInfo %q: field %d: %w", s, i+1, err)
		}
		return v
	}
	e.CkQueueOffset, e.PopTime, e.InvisibleTime = num(0), num(1), num(2)
	e.ReviveQid = int32(num(3))
	e.RetryFlag, e.BrokerName = f[4], f[5]
	e.QueueID = int32(num(6))
	e.MsgQueueOffset = -1
	if len(f) > 7 {
		e.MsgQueueOffset = num(7)
	}
	if err != nil {
		return ExtraInfo{}, err
	}
	return e, nil
}
