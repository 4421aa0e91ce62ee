package fsm

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"rocketraft/protocol"
)

func TestMessagesRoundTrip(t *testing.T) {
	appends := [][][]byte{{[]byte("a"), []byte("bc")}, {[]byte("def")}}
	b := EncodeMessages(appends)
	if len(b) != MessagesSize(appends) {
		t.Fatalf("size %d, MessagesSize %d", len(b), MessagesSize(appends))
	}
	got, err := DecodeMessages(b)
	if err != nil || !reflect.DeepEqual(got, appends) {
		t.Fatalf("%q %v", got, err)
	}
	for _, odd := range [][][][]byte{nil, {{}}, {{{}}, {[]byte("x")}}} {
		if got, err := DecodeMessages(EncodeMessages(odd)); err != nil || len(got) != len(odd) {
			t.Fatalf("%q: %q %v", odd, got, err)
		}
	}
	// An entry of sends of one message each decodes in two allocations, whatever its size.
	singles := make([][][]byte, 100)
	for i := range singles {
		singles[i] = [][]byte{[]byte("record")}
	}
	entry := EncodeMessages(singles)
	if n := testing.AllocsPerRun(20, func() { _, _ = DecodeMessages(entry) }); n != 2 {
		t.Fatalf("decoding 100 single-record appends allocates %v times, want 2", n)
	}
	for _, bad := range [][]byte{nil, {KindMessages}, b[:len(b)-1], append(b[:len(b)-4:len(b)-4], 0, 0, 0, 0)} {
		if _, err := DecodeMessages(bad); !errors.Is(err, ErrMalformedEntry) {
			t.Fatalf("%x: %v", bad, err)
		}
	}
}

func TestMetadataRoundTrip(t *testing.T) {
	ops := []*MetaOp{
		{Op: OpPutTopic, Now: 5, Topic: &protocol.TopicConfig{TopicName: "T", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6, Attributes: map[string]string{"b": "2", "a": "1"}}},
		{Op: OpDeleteTopic, Now: 6, Name: "T"},
		{Op: OpPutGroup, Now: 7, Group: protocol.NewSubscriptionGroupConfig("G")},
		{Op: OpDeleteGroup, Now: 8, Name: "G"},
		{Op: OpCommitOffsets, Now: 9, Offsets: []OffsetCommit{{Group: "G", Topic: "T", QueueID: 3, Offset: 42}}},
		{Op: OpLockQueues, Now: 10, Lock: &QueueLock{Group: "G", ClientID: "c1", Queues: []protocol.MessageQueue{{BrokerName: "b", QueueID: 1, Topic: "T"}}}},
		{Op: OpUnlockQueues, Now: 11, Lock: &QueueLock{Group: "G", ClientID: "c1", Queues: []protocol.MessageQueue{{BrokerName: "b", QueueID: 1, Topic: "T"}}}},
	}
	for _, op := range ops {
		b, err := EncodeMetadata(op)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := EncodeMetadata(op)
		if !bytes.Equal(b, again) {
			t.Fatal("encoding not deterministic")
		}
		got, err := DecodeMetadata(b)
		if err != nil || !reflect.DeepEqual(got, op) {
			t.Fatalf("%+v %v", got, err)
		}
	}
	for _, op := range []*MetaOp{{Op: "x", Now: 1}, {Op: OpPutTopic, Now: 1}, {Op: OpDeleteTopic, Name: "T"}, {Op: OpCommitOffsets, Now: 1}, {Op: OpLockQueues, Now: 1}, {Op: OpUnlockQueues, Now: 1, Lock: &QueueLock{Group: "G", ClientID: "c"}}} {
		if _, err := EncodeMetadata(op); err == nil {
			t.Fatalf("%+v encoded", op)
		}
	}
}

// FuzzDecodeEntry: the decoders never panic; whatever decodes re-encodes to the same bytes
// (messages), or whose encoding is a fixed point of decode+encode (metadata).
func FuzzDecodeEntry(f *testing.F) {
	f.Add(EncodeMessages([][][]byte{{[]byte("record")}}))
	f.Add(EncodeMessages([][][]byte{{[]byte("a"), []byte("b")}, {[]byte("c")}}))
	m, _ := EncodeMetadata(&MetaOp{Op: OpCommitOffsets, Now: 9, Offsets: []OffsetCommit{{Group: "G", Topic: "T", QueueID: 3, Offset: 42}}})
	f.Add(m)
	m, _ = EncodeMetadata(&MetaOp{Op: OpPutTopic, Now: 5, Topic: protocol.NewTopicConfig("T")})
	f.Add(m)
	f.Add([]byte{KindMessages, 0, 0, 0, 1})
	f.Add([]byte{KindMetadata, '{', '}'})
	f.Add(append([]byte{KindMetadata}, `{"op":"putTopic","now":1,"topic":{"topicName":"T","attributes":{}}}`...))
	f.Fuzz(func(t *testing.T, data []byte) {
		if appends, err := DecodeMessages(data); err == nil {
			if !bytes.Equal(EncodeMessages(appends), data) {
				t.Fatal("messages entry does not re-encode to itself")
			}
		}
		if op, err := DecodeMetadata(data); err == nil {
			b, err := EncodeMetadata(op)
			if err != nil {
				t.Fatalf("decoded op does not encode: %v", err)
			}
			op2, err := DecodeMetadata(b)
			if err != nil {
				t.Fatalf("re-encoded metadata does not decode: %v", err)
			}
			if b2, _ := EncodeMetadata(op2); !bytes.Equal(b, b2) {
				t.Fatalf("metadata encoding is not a fixed point: %s vs %s", b, b2)
			}
		}
	})
}
