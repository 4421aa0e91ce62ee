package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"

	"rocketraft/protocol"
)

// Entry kinds: the first byte of every Raft entry's Data.
const (
	// KindMessages is an entry of appends (see EncodeMessages).
	KindMessages byte = 1
	// KindMetadata is an entry of one metadata operation (see EncodeMetadata).
	KindMetadata byte = 2
)

// ErrMalformedEntry is wrapped by every decoding error.
var ErrMalformedEntry = errors.New("fsm: malformed raft entry")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// messagesOverhead is the envelope around the records: kind, append count, CRC.
const messagesOverhead = 1 + 4 + 4

// MessagesSize is the length of EncodeMessages(appends), for batchers that bound entry bytes.
func MessagesSize(appends [][][]byte) int {
	n := messagesOverhead
	for _, recs := range appends {
		n += 4
		for _, r := range recs {
			n += 4 + len(r)
		}
	}
	return n
}

// EncodeMessages builds one KindMessages entry carrying several appends; each append is the
// records of one send (a batch must stay contiguous), already encoded with
// message.EncodeRecord with store timestamp and hosts stamped by the leader. The layout is in
// the package doc. Whatever the appends hold, the entry decodes: an empty append or a record
// the store rejects gives that append an ErrMessageIllegal outcome on every replica, never a
// panic.
func EncodeMessages(appends [][][]byte) []byte {
	b := make([]byte, 0, MessagesSize(appends))
	b = append(b, KindMessages)
	b = binary.BigEndian.AppendUint32(b, uint32(len(appends)))
	for _, recs := range appends {
		b = binary.BigEndian.AppendUint32(b, uint32(len(recs)))
		for _, r := range recs {
			b = binary.BigEndian.AppendUint32(b, uint32(len(r)))
			b = append(b, r...)
		}
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// DecodeMessages decodes a KindMessages entry. The records are slices of data (not copies).
// It never panics and never allocates more than the entry's size implies; it fails only on a
// damaged envelope (CRC, lengths, trailing bytes).
func DecodeMessages(data []byte) ([][][]byte, error) {
	if len(data) < messagesOverhead {
		return nil, fmt.Errorf("%w: messages entry of %d bytes", ErrMalformedEntry, len(data))
	}
	if data[0] != KindMessages {
		return nil, fmt.Errorf("%w: kind %d, want %d (messages)", ErrMalformedEntry, data[0], KindMessages)
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: messages entry CRC mismatch", ErrMalformedEntry)
	}
	p := body[1:]
	u32 := func() (int, bool) {
		if len(p) < 4 {
			return 0, false
		}
		v := binary.BigEndian.Uint32(p)
		p = p[4:]
		return int(v), true
	}
	na, ok := u32()
	if !ok || na > len(p)/4 {
		return nil, fmt.Errorf("%w: bad append count", ErrMalformedEntry)
	}
	appends := make([][][]byte, na)
	// Every append's records are slices of one list, sized for a record per append (a send of
	// one message): an entry costs two allocations, not one per send. A batch send grows the
	// list; the appends before keep the old backing array, which holds the same slices.
	all := make([][]byte, 0, na)
	for i := range appends {
		nr, ok := u32()
		if !ok || nr > len(p)/4 {
			return nil, fmt.Errorf("%w: append %d: bad record count", ErrMalformedEntry, i)
		}
		start := len(all)
		for j := range nr {
			n, ok := u32()
			if !ok || n > len(p) {
				return nil, fmt.Errorf("%w: append %d record %d: bad length", ErrMalformedEntry, i, j)
			}
			all, p = append(all, p[:n:n]), p[n:]
		}
		appends[i] = all[start:len(all):len(all)]
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrMalformedEntry, len(p))
	}
	return appends, nil
}

// Metadata operations (MetaOp.Op).
const (
	// OpPutTopic creates or replaces MetaOp.Topic.
	OpPutTopic = "putTopic"
	// OpDeleteTopic deletes topic MetaOp.Name: its config, its consume queues in the store, and
	// the consumer offsets of it.
	OpDeleteTopic = "deleteTopic"
	// OpPutGroup creates or replaces MetaOp.Group.
	OpPutGroup = "putGroup"
	// OpDeleteGroup deletes group MetaOp.Name and its consumer offsets.
	OpDeleteGroup = "deleteGroup"
	// OpCommitOffsets sets every consumer offset in MetaOp.Offsets, in order.
	OpCommitOffsets = "commitOffsets"
	// OpLockQueues grants MetaOp.Lock's queues to its client as of MetaOp.Now (orderly
	// consumption, LOCK_BATCH_MQ). The leader decided the grant before proposing it, so the
	// apply is unconditional: replicating grants is what lets a new leader refuse a queue to a
	// second client while the first still believes it holds it (broker/locks.go).
	OpLockQueues = "lockQueues"
	// OpUnlockQueues releases those of MetaOp.Lock's queues its client holds (UNLOCK_BATCH_MQ).
	OpUnlockQueues = "unlockQueues"
	// OpPopMessages records one POP_MESSAGE of one queue (MetaOp.Pop: Offsets handed out at
	// PopTime for InvisibleTime, the queue's next new offset Next, From for a queue the group
	// never popped, Dropped in-flight offsets whose messages are gone). See broker/pop.
	OpPopMessages = "popMessages"
	// OpPopAck consumes the POP checkpoint (MetaOp.Pop: Offsets[0], PopTime) (ACK_MESSAGE).
	OpPopAck = "popAck"
	// OpPopChange moves the POP checkpoint (Offsets[0], PopTime) to MetaOp.Now, invisible for
	// InvisibleTime (CHANGE_MESSAGE_INVISIBLETIME).
	OpPopChange = "popChange"
)

// MetaOp is one metadata operation. Its effect depends only on its fields and the tables' state:
// Now is the leader's clock when it proposed the operation (milliseconds), to be used wherever
// a table records a time (data versions).
type MetaOp struct {
	Op      string                            `json:"op"`
	Now     int64                             `json:"now"`
	Topic   *protocol.TopicConfig             `json:"topic,omitempty"`
	Group   *protocol.SubscriptionGroupConfig `json:"group,omitempty"`
	Name    string                            `json:"name,omitempty"`
	Offsets []OffsetCommit                    `json:"offsets,omitempty"`
	Lock    *QueueLock                        `json:"lock,omitempty"`
	Pop     *PopOp                            `json:"pop,omitempty"`
	// KeepOffsets is local to a classic broker and never encoded: its deleteGroup keeps the
	// group's consumer offsets unless the request asked to clean them (RocketMQ's cleanOffset).
	// A replicated deleteGroup always deletes them on every replica.
	KeepOffsets bool `json:"-"`
}

// PopOp is the subject of the POP operations: one queue of one consumer group.
type PopOp struct {
	Group         string  `json:"group"`
	Topic         string  `json:"topic"`
	QueueID       int32   `json:"queueId"`
	From          int64   `json:"from,omitempty"`
	Next          int64   `json:"next,omitempty"`
	Offsets       []int64 `json:"offsets,omitempty"`
	Dropped       []int64 `json:"dropped,omitempty"`
	PopTime       int64   `json:"popTime"`
	InvisibleTime int64   `json:"invisibleTime,omitempty"`
}

// QueueLock is the subject of OpLockQueues and OpUnlockQueues: one client's queues in one
// consumer group.
type QueueLock struct {
	Group    string                  `json:"group"`
	ClientID string                  `json:"clientId"`
	Queues   []protocol.MessageQueue `json:"queues"`
}

// OffsetCommit is one consumer offset.
type OffsetCommit struct {
	Group   string `json:"group"`
	Topic   string `json:"topic"`
	QueueID int32  `json:"queueId"`
	Offset  int64  `json:"offset"`
}

// validate checks what every replica must agree is well formed.
func (op *MetaOp) validate() error {
	switch op.Op {
	case OpPutTopic:
		if op.Topic == nil || op.Topic.TopicName == "" {
			return fmt.Errorf("%s without a topic name", op.Op)
		}
	case OpPutGroup:
		if op.Group == nil || op.Group.GroupName == "" {
			return fmt.Errorf("%s without a group name", op.Op)
		}
	case OpDeleteTopic, OpDeleteGroup:
		if op.Name == "" {
			return fmt.Errorf("%s without a name", op.Op)
		}
	case OpCommitOffsets:
		if len(op.Offsets) == 0 {
			return fmt.Errorf("%s without offsets", op.Op)
		}
		for i, o := range op.Offsets {
			if o.Group == "" || o.Topic == "" || o.QueueID < 0 {
				return fmt.Errorf("%s: offset %d: empty group or topic, or negative queue id", op.Op, i)
			}
		}
	case OpLockQueues, OpUnlockQueues:
		if op.Lock == nil || op.Lock.Group == "" || op.Lock.ClientID == "" || len(op.Lock.Queues) == 0 {
			return fmt.Errorf("%s without a group, client id or queues", op.Op)
		}
	case OpPopMessages, OpPopAck, OpPopChange:
		p := op.Pop
		if p == nil || p.Group == "" || p.Topic == "" || p.QueueID < 0 {
			return fmt.Errorf("%s without a group, topic or queue id", op.Op)
		}
		if op.Op != OpPopMessages && len(p.Offsets) != 1 {
			return fmt.Errorf("%s needs exactly one offset", op.Op)
		}
		if op.Op != OpPopAck && p.InvisibleTime <= 0 {
			return fmt.Errorf("%s without an invisible time", op.Op)
		}
	default:
		return fmt.Errorf("unknown op %q", op.Op)
	}
	if op.Now <= 0 {
		return fmt.Errorf("%s without a time", op.Op)
	}
	return nil
}

// EncodeMetadata builds one KindMetadata entry: the kind byte, then op as JSON.
func EncodeMetadata(op *MetaOp) ([]byte, error) {
	if err := op.validate(); err != nil {
		return nil, fmt.Errorf("fsm: encode metadata: %w", err)
	}
	j, err := json.Marshal(op)
	if err != nil {
		return nil, fmt.Errorf("fsm: encode metadata: %w", err)
	}
	return append([]byte{KindMetadata}, j...), nil
}

// DecodeMetadata decodes and validates a KindMetadata entry. Unknown JSON members are an
// error, so an entry written by a newer version is not half applied.
func DecodeMetadata(data []byte) (*MetaOp, error) {
	if len(data) < 1 || data[0] != KindMetadata {
		return nil, fmt.Errorf("%w: not a metadata entry", ErrMalformedEntry)
	}
	dec := json.NewDecoder(bytes.NewReader(data[1:]))
	dec.DisallowUnknownFields()
	var op MetaOp
	if err := dec.Decode(&op); err != nil {
		return nil, fmt.Errorf("%w: metadata: %w", ErrMalformedEntry, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: metadata: trailing data", ErrMalformedEntry)
	}
	if err := op.validate(); err != nil {
		return nil, fmt.Errorf("%w: metadata: %w", ErrMalformedEntry, err)
	}
	return &op, nil
}
