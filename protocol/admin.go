package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// TopicOffset is one queue's entry in TopicStatsTable.
type TopicOffset struct {
	MinOffset           int64 `json:"minOffset"`
	MaxOffset           int64 `json:"maxOffset"`
	LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"`
}

// TopicStatsTable is the body of GET_TOPIC_STATS_INFO (202). Its wire form uses MessageQueue
// objects as map keys (fastjson form, §4.1); use Encode/Decode.
type TopicStatsTable struct {
	OffsetTable map[MessageQueue]TopicOffset
	TopicPutTps float64
}

// EncodeFastjson writes {"offsetTable":{{mq}:{...},...},"topicPutTps":x}.
func (t TopicStatsTable) EncodeFastjson() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(`{"offsetTable":`)
	if err := writeMQMap(&buf, t.OffsetTable); err != nil {
		return nil, err
	}
	fmt.Fprintf(&buf, `,"topicPutTps":%s}`, mustJSON(t.TopicPutTps))
	return buf.Bytes(), nil
}

// UnmarshalJSON parses the normalized form produced by Decode.
func (t *TopicStatsTable) UnmarshalJSON(b []byte) error {
	var aux struct {
		OffsetTable map[string]TopicOffset `json:"offsetTable"`
		TopicPutTps float64                `json:"topicPutTps"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	m, err := parseMQKeys(aux.OffsetTable)
	if err != nil {
		return err
	}
	*t = TopicStatsTable{OffsetTable: m, TopicPutTps: aux.TopicPutTps}
	return nil
}

// OffsetWrapper is one queue's entry in ConsumeStats.
type OffsetWrapper struct {
	BrokerOffset   int64 `json:"brokerOffset"`
	ConsumerOffset int64 `json:"consumerOffset"`
	PullOffset     int64 `json:"pullOffset"`
	LastTimestamp  int64 `json:"lastTimestamp"`
}

// ConsumeStats is the body of GET_CONSUME_STATS (208), keyed by MessageQueue in fastjson form.
type ConsumeStats struct {
	OffsetTable map[MessageQueue]OffsetWrapper
	ConsumeTps  float64
}

// EncodeFastjson writes {"consumeTps":x,"offsetTable":{{mq}:{...},...}}.
func (c ConsumeStats) EncodeFastjson() ([]byte, error) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `{"consumeTps":%s,"offsetTable":`, mustJSON(c.ConsumeTps))
	if err := writeMQMap(&buf, c.OffsetTable); err != nil {
		return nil, err
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON parses the normalized form produced by Decode.
func (c *ConsumeStats) UnmarshalJSON(b []byte) error {
	var aux struct {
		OffsetTable map[string]OffsetWrapper `json:"offsetTable"`
		ConsumeTps  float64                  `json:"consumeTps"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	m, err := parseMQKeys(aux.OffsetTable)
	if err != nil {
		return err
	}
	*c = ConsumeStats{OffsetTable: m, ConsumeTps: aux.ConsumeTps}
	return nil
}

// ResetOffsetBody is the body of RESET_CONSUMER_CLIENT_OFFSET (broker → client), MessageQueue →
// offset in fastjson form, which the Go client splits by hand: keep names free of braces.
type ResetOffsetBody struct {
	OffsetTable map[MessageQueue]int64
}

// EncodeFastjson writes {"offsetTable":{{mq}:offset,...}}.
func (r ResetOffsetBody) EncodeFastjson() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(`{"offsetTable":`)
	if err := writeMQMap(&buf, r.OffsetTable); err != nil {
		return nil, err
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON parses the normalized form produced by Decode.
func (r *ResetOffsetBody) UnmarshalJSON(b []byte) error {
	var aux struct {
		OffsetTable map[string]int64 `json:"offsetTable"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	m, err := parseMQKeys(aux.OffsetTable)
	if err != nil {
		return err
	}
	r.OffsetTable = m
	return nil
}

// Connection describes one client connection in admin bodies.
type Connection struct {
	ClientAddr string `json:"clientAddr"`
	ClientID   string `json:"clientId"`
	Language   string `json:"language"`
	Version    int32  `json:"version"`
}

// ConsumerConnection is the body of GET_CONSUMER_CONNECTION_LIST (203).
type ConsumerConnection struct {
	ConnectionSet     []Connection                `json:"connectionSet"`
	ConsumeFromWhere  string                      `json:"consumeFromWhere,omitempty"`
	ConsumeType       string                      `json:"consumeType,omitempty"`
	MessageModel      string                      `json:"messageModel,omitempty"`
	SubscriptionTable map[string]SubscriptionData `json:"subscriptionTable"`
}

// MarshalJSON replaces nil collections by empty ones.
func (c ConsumerConnection) MarshalJSON() ([]byte, error) {
	type plain ConsumerConnection
	if c.ConnectionSet == nil {
		c.ConnectionSet = []Connection{}
	}
	if c.SubscriptionTable == nil {
		c.SubscriptionTable = map[string]SubscriptionData{}
	}
	return marshalCompact(plain(c))
}

// ProducerConnection is the body of GET_PRODUCER_CONNECTION_LIST (204).
type ProducerConnection struct {
	ConnectionSet []Connection `json:"connectionSet"`
}

// MarshalJSON emits connectionSet as [] when nil.
func (p ProducerConnection) MarshalJSON() ([]byte, error) {
	type plain ProducerConnection
	if p.ConnectionSet == nil {
		p.ConnectionSet = []Connection{}
	}
	return marshalCompact(plain(p))
}

// compareMQ orders queues by topic, broker name, queue id.
func compareMQ(a, b MessageQueue) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	if c := strings.Compare(a.BrokerName, b.BrokerName); c != 0 {
		return c
	}
	return int(a.QueueID) - int(b.QueueID)
}

// writeMQMap writes m in fastjson's object-key form, keys sorted, compact.
func writeMQMap[V any](buf *bytes.Buffer, m map[MessageQueue]V) error {
	buf.WriteByte('{')
	for i, mq := range slices.SortedFunc(maps.Keys(m), compareMQ) {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := marshalCompact(mq)
		if err != nil {
			return err
		}
		v, err := marshalCompact(m[mq])
		if err != nil {
			return err
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return nil
}

// parseMQKeys converts a map whose keys are MessageQueue JSON texts (as left by Normalize).
func parseMQKeys[V any](in map[string]V) (map[MessageQueue]V, error) {
	out := make(map[MessageQueue]V, len(in))
	for k, v := range in {
		var mq MessageQueue
		if err := json.Unmarshal([]byte(k), &mq); err != nil {
			return nil, fmt.Errorf("protocol: message queue key %q: %w", k, err)
		}
		out[mq] = v
	}
	return out, nil
}

func mustJSON(v any) []byte {
	b, err := marshalCompact(v)
	if err != nil {
		panic(err)
	}
	return b
}
