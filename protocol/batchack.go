package protocol

// BATCH_ACK_MESSAGE's body, RocketMQ's BatchAckMessageRequestBody JSON:
// {"brokerName":..., "acks":[BatchAck...]}, each BatchAck naming a group, topic and queue, a
// popTime, a start offset and a bit set of the acked offsets relative to it (bit i:
// startOffset+i), the bit set encoded as java.util.BitSet.toByteArray (little-endian bytes) in
// base64. Members have short JSON names ("c", "t", "q", "so", "pt", "b", ...) and long alternates
// ("consumerGroup", ...); both are read, the short ones written.

// BatchAckBody is BATCH_ACK_MESSAGE's request body.
type BatchAckBody struct {
	BrokerName string     `json:"brokerName"`
	Acks       []BatchAck `json:"acks"`
}

// BatchAck is one (group, topic, queue, popTime) checkpoint's acked offsets. Encoding uses the
// short names, as RocketMQ does; decoding also takes the long ones.
type BatchAck struct {
	ConsumerGroup string `json:"c,omitempty"`
	Topic         string `json:"t,omitempty"`
	Retry         string `json:"r,omitempty"`
	StartOffset   int64  `json:"so"`
	QueueID       int32  `json:"q"`
	ReviveQueueID int32  `json:"rq"`
	PopTime       int64  `json:"pt"`
	InvisibleTime int64  `json:"it"`
	BitSet        []byte `json:"b,omitempty"`

	LongGroup       string `json:"consumerGroup,omitempty"`
	LongTopic       string `json:"topic,omitempty"`
	LongStartOffset *int64 `json:"startOffset,omitempty"`
	LongQueueID     *int32 `json:"queueId,omitempty"`
	LongPopTime     *int64 `json:"popTime,omitempty"`
	LongBitSet      []byte `json:"bitSet,omitempty"`
}

// Normalize folds the long member names into the short ones.
func (a *BatchAck) Normalize() {
	if a.ConsumerGroup == "" {
		a.ConsumerGroup = a.LongGroup
	}
	if a.Topic == "" {
		a.Topic = a.LongTopic
	}
	if a.LongStartOffset != nil {
		a.StartOffset = *a.LongStartOffset
	}
	if a.LongQueueID != nil {
		a.QueueID = *a.LongQueueID
	}
	if a.LongPopTime != nil {
		a.PopTime = *a.LongPopTime
	}
	if a.BitSet == nil {
		a.BitSet = a.LongBitSet
	}
}

// Offsets lists the acked offsets the bit set names, ascending.
func (a *BatchAck) Offsets() []int64 {
	var out []int64
	for i, by := range a.BitSet {
		for bit := 0; bit < 8; bit++ {
			if by&(1<<bit) != 0 {
				out = append(out, a.StartOffset+int64(i*8+bit))
			}
		}
	}
	return out
}

// NewBatchAck builds the BatchAck of offsets (all at or above start) of one checkpoint.
func NewBatchAck(group, topic string, qid int32, popTime, start int64, offsets []int64) BatchAck {
	a := BatchAck{ConsumerGroup: group, Topic: topic, Retry: "0", StartOffset: start, QueueID: qid, PopTime: popTime}
	for _, off := range offsets {
		i := off - start
		if i < 0 {
			continue
		}
		for int64(len(a.BitSet)) <= i/8 {
			a.BitSet = append(a.BitSet, 0)
		}
		a.BitSet[i/8] |= 1 << (i % 8)
	}
	return a
}
