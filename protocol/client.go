package protocol

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// MessageQueue identifies one queue of a topic on one broker name. Its members are declared in
// fastjson's alphabetical order so encodings match Java's byte for byte.
type MessageQueue struct {
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
	Topic      string `json:"topic"`
}

// String renders the queue for logs.
func (m MessageQueue) String() string {
	return fmt.Sprintf("MessageQueue [topic=%s, brokerName=%s, queueId=%d]", m.Topic, m.BrokerName, m.QueueID)
}

// ProducerData names one producer group of a heartbeat.
type ProducerData struct {
	GroupName string `json:"groupName"`
}

// Consumer types, message models and consume-from-where values (§4.6).
const (
	ConsumeActively  = "CONSUME_ACTIVELY"
	ConsumePassively = "CONSUME_PASSIVELY"
	ConsumePop       = "CONSUME_POP"

	Clustering   = "CLUSTERING"
	Broadcasting = "BROADCASTING"

	ConsumeFromLastOffset  = "CONSUME_FROM_LAST_OFFSET"
	ConsumeFromFirstOffset = "CONSUME_FROM_FIRST_OFFSET"
	ConsumeFromTimestamp   = "CONSUME_FROM_TIMESTAMP"

	ExpressionTag   = "TAG"
	ExpressionSQL92 = "SQL92"
	// SubAll is the subscription expression matching every tag.
	SubAll = "*"
)

// ConsumerData is one consumer group of a heartbeat.
type ConsumerData struct {
	GroupName           string             `json:"groupName"`
	ConsumeType         string             `json:"consumeType"`
	MessageModel        string             `json:"messageModel"`
	ConsumeFromWhere    string             `json:"consumeFromWhere"`
	SubscriptionDataSet []SubscriptionData `json:"subscriptionDataSet"`
	UnitMode            bool               `json:"unitMode"`
}

// CodeSet holds tag hash codes. It decodes from JSON numbers or numeric strings (the Go client
// sends ["-1234"]) and encodes as numbers. Codes sent by clients are advisory: the Go client hashes
// UTF-8 bytes, so brokers should recompute them from TagsSet.
type CodeSet []int32

// UnmarshalJSON accepts numbers and numeric strings.
func (c *CodeSet) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := make(CodeSet, 0, len(raw))
	for _, r := range raw {
		s := string(r)
		if len(s) > 0 && s[0] == '"' {
			if err := json.Unmarshal(r, &s); err != nil {
				return err
			}
		}
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return fmt.Errorf("protocol: codeSet element %s: %w", r, err)
		}
		out = append(out, int32(n))
	}
	*c = out
	return nil
}

// SubscriptionData is one topic subscription of a consumer group (§4.6).
type SubscriptionData struct {
	ClassFilterMode   bool     `json:"classFilterMode"`
	CodeSet           CodeSet  `json:"codeSet"`
	ExpressionType    string   `json:"expressionType"`
	FilterClassSource string   `json:"filterClassSource,omitempty"`
	SubString         string   `json:"subString"`
	SubVersion        int64    `json:"subVersion"`
	TagsSet           []string `json:"tagsSet"`
	Topic             string   `json:"topic"`
}

// HeartbeatData is the body of HEART_BEAT (§4.6).
type HeartbeatData struct {
	ClientID             string         `json:"clientID"`
	ProducerDataSet      []ProducerData `json:"producerDataSet"`
	ConsumerDataSet      []ConsumerData `json:"consumerDataSet"`
	HeartbeatFingerprint int32          `json:"heartbeatFingerprint,omitempty"`
	WithoutSub           bool           `json:"withoutSub,omitempty"`
}

// LockBatchRequestBody is the body of LOCK_BATCH_MQ and UNLOCK_BATCH_MQ (§4.7).
type LockBatchRequestBody struct {
	ConsumerGroup  string         `json:"consumerGroup"`
	ClientID       string         `json:"clientId"`
	OnlyThisBroker bool           `json:"onlyThisBroker"`
	MqSet          []MessageQueue `json:"mqSet"`
}

// UnlockBatchRequestBody has the same shape as LockBatchRequestBody.
type UnlockBatchRequestBody = LockBatchRequestBody

// LockBatchResponseBody is the body of a LOCK_BATCH_MQ response; lockOKMQSet is always emitted.
type LockBatchResponseBody struct {
	LockOKMQSet []MessageQueue `json:"lockOKMQSet"`
}

// MarshalJSON emits lockOKMQSet as [] when nil.
func (l LockBatchResponseBody) MarshalJSON() ([]byte, error) {
	type plain LockBatchResponseBody
	if l.LockOKMQSet == nil {
		l.LockOKMQSet = []MessageQueue{}
	}
	return marshalCompact(plain(l))
}

// CheckClientConfigBody is the body of CHECK_CLIENT_CONFIG.
type CheckClientConfigBody struct {
	ClientID         string           `json:"clientId"`
	Group            string           `json:"group"`
	SubscriptionData SubscriptionData `json:"subscriptionData"`
}
