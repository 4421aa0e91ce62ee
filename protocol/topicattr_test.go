package protocol

import (
	"reflect"
	"strings"
	"testing"
)

func TestAlterTopicAttributes(t *testing.T) {
	got, err := AlterTopicAttributes(nil, "+message.type=FIFO", true)
	if err != nil || !reflect.DeepEqual(got, map[string]string{"message.type": "FIFO"}) {
		t.Fatalf("create: %v %v", got, err)
	}
	cur := map[string]string{"message.type": "FIFO"}
	if got, err := AlterTopicAttributes(cur, "", false); err != nil || !reflect.DeepEqual(got, cur) {
		t.Fatalf("no change: %v %v", got, err)
	}
	if got, err := AlterTopicAttributes(cur, "+message.type=MIXED", false); err != nil || got["message.type"] != "MIXED" || cur["message.type"] != "FIFO" {
		t.Fatalf("replace: %v %v (current %v must not change)", got, err, cur)
	}
	if got, err := AlterTopicAttributes(cur, "-message.type", false); err != nil || got != nil {
		t.Fatalf("delete: %v %v", got, err)
	}
	for _, c := range []struct {
		mods   string
		create bool
		want   string
	}{
		{"+message.type=fifo", true, `value "fifo" is not one of`},
		{"+queue.type=BatchCQ", true, "unsupported attribute key: queue.type"},
		{"message.type=FIFO", true, "want +key=value or -key"},
		{"+message.type", true, "needs =value"},
		{"-message.type", true, "only additions"},
		{"-message.type", false, "nonexistent"},
		{"+message.type=FIFO,+message.type=NORMAL", true, "given twice"},
	} {
		if _, err := AlterTopicAttributes(nil, c.mods, c.create); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.mods, err, c.want)
		}
	}
	if s := FormatTopicAttributes(map[string]string{"message.type": "FIFO"}); s != "+message.type=FIFO" {
		t.Fatalf("format %q", s)
	}
}

// TestBatchAckBody: the bit set round-trips, and RocketMQ's long member names are read.
func TestBatchAckBody(t *testing.T) {
	a := NewBatchAck("G", "T", 3, 1000, 10, []int64{10, 12, 27})
	body := BatchAckBody{BrokerName: "b", Acks: []BatchAck{a}}
	data, err := Encode(body)
	if err != nil {
		t.Fatal(err)
	}
	var got BatchAckBody
	if err := Decode(data, &got); err != nil {
		t.Fatal(err)
	}
	got.Acks[0].Normalize()
	if offs := got.Acks[0].Offsets(); !reflect.DeepEqual(offs, []int64{10, 12, 27}) {
		t.Fatalf("offsets %v from %s", offs, data)
	}
	if !strings.Contains(string(data), `"c":"G"`) || !strings.Contains(string(data), `"so":10`) {
		t.Fatalf("short names expected: %s", data)
	}
	long := `{"brokerName":"b","acks":[{"consumerGroup":"G","topic":"T","startOffset":5,"queueId":1,"popTime":7,"bitSet":"Aw=="}]}`
	var fromLong BatchAckBody
	if err := Decode([]byte(long), &fromLong); err != nil {
		t.Fatal(err)
	}
	g := fromLong.Acks[0]
	g.Normalize()
	if g.ConsumerGroup != "G" || g.Topic != "T" || g.QueueID != 1 || g.PopTime != 7 || !reflect.DeepEqual(g.Offsets(), []int64{5, 6}) {
		t.Fatalf("long names: %+v %v", g, g.Offsets())
	}
}
