package fsm

import (
	"reflect"
	"testing"
)

func TestPopOpsRoundTrip(t *testing.T) {
	for _, op := range []*MetaOp{
		{Op: OpPopMessages, Now: 5, Pop: &PopOp{Group: "G", Topic: "T", QueueID: 1, From: 2, Next: 9, Offsets: []int64{2, 4}, Dropped: []int64{1}, PopTime: 5, InvisibleTime: 100}},
		{Op: OpPopAck, Now: 6, Pop: &PopOp{Group: "G", Topic: "T", QueueID: 1, Offsets: []int64{2}, PopTime: 5}},
		{Op: OpPopChange, Now: 7, Pop: &PopOp{Group: "G", Topic: "T", QueueID: 1, Offsets: []int64{4}, PopTime: 5, InvisibleTime: 50}},
	} {
		data, err := EncodeMetadata(op)
		if err != nil {
			t.Fatalf("%s: %v", op.Op, err)
		}
		got, err := DecodeMetadata(data)
		if err != nil || !reflect.DeepEqual(got, op) {
			t.Fatalf("%s: %+v %v", op.Op, got, err)
		}
	}
	for _, bad := range []*MetaOp{
		{Op: OpPopMessages, Now: 1},
		{Op: OpPopMessages, Now: 1, Pop: &PopOp{Group: "G", Topic: "T", QueueID: 0}},
		{Op: OpPopAck, Now: 1, Pop: &PopOp{Group: "G", Topic: "T", QueueID: 0}},
		{Op: OpPopChange, Now: 1, Pop: &PopOp{Group: "G", Topic: "T", QueueID: 0, Offsets: []int64{1}}},
		{Op: OpPopAck, Now: 1, Pop: &PopOp{Group: "", Topic: "T", QueueID: 0, Offsets: []int64{1}}},
	} {
		if _, err := EncodeMetadata(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
