package broker

import (
	"testing"

	"rocketraft/broker/pop"
	"rocketraft/fsm"
)

// TestPopAckSeveralOffsets: one OpPopAck lists a batch ack's offsets; every replica acks all of
// them, and a one-offset op (ACK_MESSAGE's) still acks exactly one.
func TestPopAckSeveralOffsets(t *testing.T) {
	b := metaBroker(t, t.TempDir())
	k := pop.Key{Group: "G", Topic: "T", QueueID: 0}
	ops := []*fsm.MetaOp{
		{Op: fsm.OpPopMessages, Now: 1000, Pop: &fsm.PopOp{Group: "G", Topic: "T", Next: 4, Offsets: []int64{0, 1, 2, 3}, PopTime: 1000, InvisibleTime: 100}},
		{Op: fsm.OpPopAck, Now: 1001, Pop: &fsm.PopOp{Group: "G", Topic: "T", Offsets: []int64{0, 2}, PopTime: 1000}},
		{Op: fsm.OpPopAck, Now: 1002, Pop: &fsm.PopOp{Group: "G", Topic: "T", Offsets: []int64{1}, PopTime: 1000}},
	}
	for _, op := range ops {
		if err := b.tables.ApplyMeta(op); err != nil {
			t.Fatal(err)
		}
	}
	if in := b.pop.table.Inflight(k); len(in) != 1 || in[0].Offset != 3 {
		t.Fatalf("in flight %+v, want only 3", in)
	}
	if s, _, _ := b.pop.table.Offsets(k); s != 3 {
		t.Fatalf("start %d, want 3", s)
	}
}
