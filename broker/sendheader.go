package broker

import (
	"fmt"
	"strconv"

	"rocketraft/remoting"
)

// sendHeader is SendMessageRequestHeader. SEND_MESSAGE (10) and
// SEND_REPLY_MESSAGE (324) carry it with long field names; SEND_MESSAGE_V2
// (310), SEND_BATCH_MESSAGE (320, always V2) and SEND_REPLY_MESSAGE_V2 (325)
// with single letters (protocol doc §2.4).
type sendHeader struct {
	ProducerGroup         string
	Topic                 string
	DefaultTopic          string
	DefaultTopicQueueNums int32
	QueueID               int32
	SysFlag               int32
	BornTimestamp         int64
	Flag                  int32
	Properties            string
	ReconsumeTimes        int32
	UnitMode              bool
	MaxReconsumeTimes     int32 // -1 when absent
	Batch                 bool
}

// sendFieldNames lists each field's V1 name and V2 letter.
var sendFieldNames = [...][2]string{
	{"producerGroup", "a"}, {"topic", "b"}, {"defaultTopic", "c"}, {"defaultTopicQueueNums", "d"},
	{"queueId", "e"}, {"sysFlag", "f"}, {"bornTimestamp", "g"}, {"flag", "h"}, {"properties", "i"},
	{"reconsumeTimes", "j"}, {"unitMode", "k"}, {"maxReconsumeTimes", "l"}, {"batch", "m"},
}

func isV2Send(code int32) bool {
	return code == remoting.SendMessageV2 || code == remoting.SendBatchMessage || code == remoting.SendReplyMessageV2
}

func parseSendHeader(req *remoting.Command) (*sendHeader, error) {
	col := 0
	if isV2Send(req.Code) {
		col = 1
	}
	get := func(i int) (string, bool) {
		v, ok := req.ExtFields[sendFieldNames[i][col]]
		return v, ok
	}
	var firstErr error
	num := func(i int, required bool, bits int) int64 {
		v, ok := get(i)
		if !ok || v == "" {
			if required && firstErr == nil {
				firstErr = fmt.Errorf("the custom field <%s> is null", sendFieldNames[i][0])
			}
			return 0
		}
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("the custom field <%s> is not a valid number: %q", sendFieldNames[i][0], v)
		}
		return n
	}
	h := &sendHeader{}
	h.ProducerGroup, _ = get(0)
	h.Topic, _ = get(1)
	h.DefaultTopic, _ = get(2)
	h.DefaultTopicQueueNums = int32(num(3, true, 32))
	h.QueueID = int32(num(4, true, 32))
	h.SysFlag = int32(num(5, true, 32))
	h.BornTimestamp = num(6, true, 64)
	h.Flag = int32(num(7, true, 32))
	h.Properties, _ = get(8)
	h.ReconsumeTimes = int32(num(9, false, 32))
	if v, _ := get(10); v == "true" {
		h.UnitMode = true
	}
	h.MaxReconsumeTimes = -1
	if _, ok := get(11); ok {
		h.MaxReconsumeTimes = int32(num(11, false, 32))
	}
	if v, _ := get(12); v == "true" {
		h.Batch = true
	}
	if firstErr != nil {
		return nil, firstErr
	}
	if h.ProducerGroup == "" {
		return nil, fmt.Errorf("the custom field <producerGroup> is null")
	}
	if h.Topic == "" {
		return nil, fmt.Errorf("the custom field <topic> is null")
	}
	return h, nil
}
