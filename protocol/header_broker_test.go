package protocol

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func sampleSend() *SendMessageRequestHeader {
	return &SendMessageRequestHeader{ProducerGroup: "PG", Topic: "T", DefaultTopic: AutoCreateTopicKey, DefaultTopicQueueNums: 4,
		QueueID: 2, SysFlag: 4, BornTimestamp: 1700000000123, Flag: 7, Properties: "TAGS\x01a\x02", ReconsumeTimes: 1,
		UnitMode: false, MaxReconsumeTimes: ptr(int32(16)), Batch: true, BrokerName: "broker-a"}
}

func TestSendHeaderV1V2(t *testing.T) {
	h := sampleSend()
	v1 := h.ToExt()
	if v1["producerGroup"] != "PG" || v1["bornTimestamp"] != "1700000000123" || v1["bname"] != "broker-a" || v1["maxReconsumeTimes"] != "16" {
		t.Fatalf("v1 %v", v1)
	}
	v2 := h.ToExtV2()
	want := map[string]string{"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "2", "f": "4", "g": "1700000000123", "h": "7",
		"i": "TAGS\x01a\x02", "j": "1", "k": "false", "l": "16", "m": "true", "n": "broker-a"}
	if !reflect.DeepEqual(v2, want) {
		t.Fatalf("v2 %v", v2)
	}
	var a, b SendMessageRequestHeader
	if err := a.FromExt(v1); err != nil || !reflect.DeepEqual(&a, h) {
		t.Fatalf("v1 round trip %+v %v", a, err)
	}
	if err := b.FromExtV2(v2); err != nil || !reflect.DeepEqual(&b, h) {
		t.Fatalf("v2 round trip %+v %v", b, err)
	}
}

func TestSendHeaderGoClientV2(t *testing.T) {
	// What the Go client sends for SEND_BATCH_MESSAGE (no bname when unset, no l).
	ext := map[string]string{"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "-1", "f": "0", "g": "1", "h": "0", "i": "", "j": "0", "k": "false", "m": "true"}
	var h SendMessageRequestHeader
	if err := h.FromExtV2(ext); err != nil {
		t.Fatal(err)
	}
	if h.QueueID != -1 || !h.Batch || h.MaxReconsumeTimes != nil {
		t.Fatalf("%+v", h)
	}
	delete(ext, "g")
	if err := h.FromExtV2(ext); !errors.Is(err, ErrMissingField) || !strings.Contains(err.Error(), ": g") {
		t.Fatalf("err %v", err)
	}
}

func TestPullHeaders(t *testing.T) {
	h := &PullMessageRequestHeader{ConsumerGroup: "G", Topic: "T", QueueID: 1, QueueOffset: 100, MaxMsgNums: 32,
		SysFlag: PullCommitOffset | PullSuspend, CommitOffset: 90, SuspendTimeoutMillis: 20000, SubVersion: 0, ExpressionType: ExpressionTag}
	var back PullMessageRequestHeader
	if err := back.FromExt(h.ToExt()); err != nil || !reflect.DeepEqual(&back, h) {
		t.Fatalf("round trip %+v %v", back, err)
	}
	ext := h.ToExt()
	delete(ext, "suspendTimeoutMillis")
	if err := back.FromExt(ext); !errors.Is(err, ErrMissingField) || !strings.Contains(err.Error(), "suspendTimeoutMillis") {
		t.Fatalf("err %v", err)
	}
	r := &PullMessageResponseHeader{SuggestWhichBrokerID: 0, NextBeginOffset: 132, MinOffset: 0, MaxOffset: 200}
	var rb PullMessageResponseHeader
	if err := rb.FromExt(r.ToExt()); err != nil || rb != *r {
		t.Fatalf("response %+v %v", rb, err)
	}
}
