package protocol

import (
	"encoding/json"
	"strings"
)

// SubscriptionGroupConfig is a broker's configuration of one consumer group (§4.9). Decoding
// starts from Java's defaults so absent members keep them. The 5.x-only groupRetryPolicy and
// subscriptionDataSet are carried opaquely.
type SubscriptionGroupConfig struct {
	GroupName                      string            `json:"groupName"`
	ConsumeEnable                  bool              `json:"consumeEnable"`
	ConsumeFromMinEnable           bool              `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         bool              `json:"consumeBroadcastEnable"`
	ConsumeMessageOrderly          bool              `json:"consumeMessageOrderly"`
	RetryQueueNums                 int32             `json:"retryQueueNums"`
	RetryMaxTimes                  int32             `json:"retryMaxTimes"`
	GroupRetryPolicy               json.RawMessage   `json:"groupRetryPolicy,omitempty"`
	BrokerID                       int64             `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   int64             `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIdsChangedEnable bool              `json:"notifyConsumerIdsChangedEnable"`
	GroupSysFlag                   int32             `json:"groupSysFlag"`
	ConsumeTimeoutMinute           int32             `json:"consumeTimeoutMinute"`
	SubscriptionDataSet            json.RawMessage   `json:"subscriptionDataSet,omitempty"`
	Attributes                     map[string]string `json:"attributes,omitempty"`
}

// NewSubscriptionGroupConfig returns a config for group with Java's defaults.
func NewSubscriptionGroupConfig(group string) *SubscriptionGroupConfig {
	return &SubscriptionGroupConfig{
		GroupName:                      group,
		ConsumeEnable:                  true,
		ConsumeFromMinEnable:           true,
		ConsumeBroadcastEnable:         true,
		RetryQueueNums:                 1,
		RetryMaxTimes:                  16,
		WhichBrokerWhenConsumeSlowly:   1,
		NotifyConsumerIdsChangedEnable: true,
		ConsumeTimeoutMinute:           15,
	}
}

// UnmarshalJSON decodes over Java's defaults.
func (c *SubscriptionGroupConfig) UnmarshalJSON(b []byte) error {
	type plain SubscriptionGroupConfig
	p := plain(*NewSubscriptionGroupConfig(""))
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*c = SubscriptionGroupConfig(p)
	return nil
}

// SubscriptionGroupWrapper is the body of GET_ALL_SUBSCRIPTIONGROUP_CONFIG and the content of
// subscriptionGroup.json.
type SubscriptionGroupWrapper struct {
	SubscriptionGroupTable map[string]*SubscriptionGroupConfig `json:"subscriptionGroupTable"`
	ForbiddenTable         map[string]map[string]int32         `json:"forbiddenTable"`
	DataVersion            DataVersion                         `json:"dataVersion"`
}

// MarshalJSON replaces nil maps by empty ones.
func (w SubscriptionGroupWrapper) MarshalJSON() ([]byte, error) {
	type plain SubscriptionGroupWrapper
	if w.SubscriptionGroupTable == nil {
		w.SubscriptionGroupTable = map[string]*SubscriptionGroupConfig{}
	}
	if w.ForbiddenTable == nil {
		w.ForbiddenTable = map[string]map[string]int32{}
	}
	return marshalCompact(plain(w))
}

// ConsumerOffsetSerializeWrapper is the body of GET_ALL_CONSUMER_OFFSET and the content of
// consumerOffset.json (§4.8): "topic@group" → queueId → offset. Queue ids are emitted as quoted
// keys; Decode also accepts Java's unquoted form.
type ConsumerOffsetSerializeWrapper struct {
	OffsetTable map[string]map[int32]int64 `json:"offsetTable"`
	DataVersion *DataVersion               `json:"dataVersion,omitempty"`
}

// MarshalJSON emits offsetTable as {} when nil.
func (w ConsumerOffsetSerializeWrapper) MarshalJSON() ([]byte, error) {
	type plain ConsumerOffsetSerializeWrapper
	if w.OffsetTable == nil {
		w.OffsetTable = map[string]map[int32]int64{}
	}
	return marshalCompact(plain(w))
}

// OffsetKey returns the offset-table key "topic@group".
func OffsetKey(topic, group string) string { return topic + "@" + group }

// SplitOffsetKey splits an offset-table key at its first '@' (topic names cannot contain '@').
func SplitOffsetKey(key string) (topic, group string, ok bool) {
	return strings.Cut(key, "@")
}
