package pop

import (
	"encoding/json"
	"reflect"
	"testing"
)

var qk = Key{Group: "G", Topic: "T", QueueID: 1}

func offsets(es []Entry) []int64 {
	out := []int64{}
	for _, e := range es {
		out = append(out, e.Offset)
	}
	return out
}

func TestPopAckAdvancesOverContiguousAcks(t *testing.T) {
	tb := NewTable()
	if tb.Known(qk) {
		t.Fatal("known before any pop")
	}
	// Offsets 5..9 scanned; 7 filtered out.
	tb.Pop(qk, 5, 10, []int64{5, 6, 8, 9}, 1000, 100)
	if s, n, ok := tb.Offsets(qk); !ok || s != 5 || n != 10 {
		t.Fatalf("offsets %d %d %v", s, n, ok)
	}
	if r := tb.Ack(qk, 6, 1000); r != Acked {
		t.Fatalf("ack 6: %v", r)
	}
	if s, _, _ := tb.Offsets(qk); s != 5 {
		t.Fatalf("start %d after acking 6 (5 in flight)", s)
	}
	if r := tb.Ack(qk, 5, 1000); r != Acked {
		t.Fatalf("ack 5: %v", r)
	}
	if s, _, _ := tb.Offsets(qk); s != 8 {
		t.Fatalf("start %d, want 8 (6 acked, 7 filtered)", s)
	}
	for _, c := range []struct {
		off, pt int64
		want    AckResult
	}{{5, 1000, AlreadyDone}, {7, 1000, AlreadyDone}, {8, 999, Stale}, {10, 1000, Unknown}, {2, 1000, AlreadyDone}} {
		if r := tb.Ack(qk, c.off, c.pt); r != c.want {
			t.Errorf("ack %d@%d: %v want %v", c.off, c.pt, r, c.want)
		}
	}
	if r := tb.Ack(Key{Group: "other", Topic: "T", QueueID: 1}, 5, 1000); r != Unknown {
		t.Errorf("other group: %v", r)
	}
}

func TestExpiryReviveAndChange(t *testing.T) {
	tb := NewTable()
	tb.Pop(qk, 0, 3, []int64{0, 1, 2}, 1000, 100)
	if got := tb.Expired(qk, 1099, 10); len(got) != 0 {
		t.Fatalf("expired before the deadline: %v", got)
	}
	if r := tb.Change(qk, 1, 1000, 1050, 500); r != Acked {
		t.Fatalf("change: %v", r)
	}
	if r := tb.Ack(qk, 2, 1000); r != Acked {
		t.Fatalf("ack 2: %v", r)
	}
	got := tb.Expired(qk, 1100, 10)
	if !reflect.DeepEqual(offsets(got), []int64{0}) {
		t.Fatalf("expired at 1100: %v, want [0] (1 changed, 2 acked)", got)
	}
	if d := tb.NextDeadline(qk); d != 1100 {
		t.Fatalf("next deadline %d", d)
	}
	// Revive 0 under a new checkpoint; the old one is stale now.
	tb.Pop(qk, 0, 3, []int64{0}, 1200, 100)
	if e, _ := tb.Get(qk, 0); e.PopTime != 1200 || e.Deadline != 1300 || e.Deliveries != 2 {
		t.Fatalf("revived entry %+v", e)
	}
	if r := tb.Ack(qk, 0, 1000); r != Stale {
		t.Fatalf("old checkpoint ack: %v", r)
	}
	if r := tb.Change(qk, 0, 1000, 1250, 100); r != Stale {
		t.Fatalf("old checkpoint change: %v", r)
	}
	if got := offsets(tb.Expired(qk, 1550, 10)); !reflect.DeepEqual(got, []int64{0, 1}) {
		t.Fatalf("expired at 1550: %v", got)
	}
	if got := offsets(tb.Expired(qk, 1550, 1)); !reflect.DeepEqual(got, []int64{0}) {
		t.Fatalf("expired limited to 1: %v", got)
	}
	// An offset beyond next or below start is never recorded.
	tb.Pop(qk, 0, 4, []int64{2, 3, 9}, 1600, 100)
	if _, ok := tb.Get(qk, 2); ok {
		t.Fatal("acked offset 2 back in flight")
	}
	if _, ok := tb.Get(qk, 9); ok {
		t.Fatal("offset past next recorded")
	}
	if _, ok := tb.Get(qk, 3); !ok {
		t.Fatal("new offset 3 not in flight")
	}
}

func TestSnapshotRestoreAndDelete(t *testing.T) {
	tb := NewTable()
	tb.Pop(qk, 3, 6, []int64{3, 5}, 1000, 100)
	tb.Pop(Key{Group: "G2", Topic: "T", QueueID: 0}, 0, 1, []int64{0}, 1000, 100)
	tb.Ack(qk, 5, 1000)
	data, err := json.Marshal(tb)
	if err != nil {
		t.Fatal(err)
	}
	tb2 := NewTable()
	if err := json.Unmarshal(data, tb2); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tb.Records(), tb2.Records()) {
		t.Fatalf("restored %+v, want %+v", tb2.Records(), tb.Records())
	}
	if s, n, _ := tb2.Offsets(qk); s != 3 || n != 6 {
		t.Fatalf("restored offsets %d %d", s, n)
	}
	tb2.DeleteGroup("G2")
	tb2.DeleteTopic("T")
	if len(tb2.Records()) != 0 {
		t.Fatalf("after deletes: %+v", tb2.Records())
	}
	if err := json.Unmarshal([]byte("{"), tb2); err == nil {
		t.Fatal("bad JSON accepted")
	}
}

func TestExtraInfo(t *testing.T) {
	e := ExtraInfo{CkQueueOffset: 3, PopTime: 1700000000000, InvisibleTime: 30000, BrokerName: "b1", QueueID: 2, MsgQueueOffset: 5}
	s := e.String()
	if s != "3 1700000000000 30000 0 0 b1 2 5" {
		t.Fatalf("text %q", s)
	}
	got, err := ParseExtraInfo(s)
	e.RetryFlag = "0"
	if err != nil || got != e {
		t.Fatalf("parse: %+v %v", got, err)
	}
	if got, err := ParseExtraInfo("3 1 2 0 0 b1 2"); err != nil || got.MsgQueueOffset != -1 {
		t.Fatalf("seven fields: %+v %v", got, err)
	}
	for _, bad := range []string{"", "1 2 3", "x 1 2 0 0 b 1 1", "1 2 3 0 0 b q 1"} {
		if _, err := ParseExtraInfo(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
