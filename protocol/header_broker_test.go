package protocol

import (
	"errors"
	"maps"
	"reflect"
	"slices"
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

// SendHeaderFields reads the same header from fields one by one (the flat form a broker
// decodes sends in) as FromExt and FromExtV2 from a map, errors included; unknown keys are
// ignored and a repeated key counts once, its last value.
func TestSendHeaderFields(t *testing.T) {
	h := sampleSend()
	read := func(h *SendMessageRequestHeader, v2 bool, pairs ...string) error {
		f := NewSendHeaderFields(v2)
		for i := 0; i+1 < len(pairs); i += 2 {
			f.Set(pairs[i], pairs[i+1])
		}
		return f.Header(h)
	}
	flatten := func(m map[string]string) []string {
		var out []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, k, m[k])
		}
		return out
	}
	for form, ext := range []map[string]string{h.ToExt(), h.ToExtV2()} {
		var got SendMessageRequestHeader
		pairs := append([]string{"queueId", "99", "e", "99", "zz", "unknown"}, flatten(ext)...) // overridden later
		if err := read(&got, form == 1, pairs...); err != nil || !reflect.DeepEqual(&got, h) {
			t.Fatalf("form %d: %+v %v", form, got, err)
		}
	}
	for _, bad := range []map[string]string{
		{"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "x", "f": "0", "g": "1", "h": "0"},
		{"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "h": "0"},
	} {
		var fromMap, fromFields SendMessageRequestHeader
		want := fromMap.FromExtV2(bad)
		got := read(&fromFields, true, flatten(bad)...)
		if want == nil || got == nil || got.Error() != want.Error() {
			t.Fatalf("SendHeaderFields error %v, FromExtV2 %v", got, want)
		}
	}
}

// Reading a plain send's header (no maxReconsumeTimes, whose value is a pointer) allocates
// nothing: the send path reads one per message.
func TestSendHeaderFieldsAllocations(t *testing.T) {
	pairs := []string{"a", "PG", "b", "T", "c", "TBW102", "d", "4", "e", "1", "f", "0", "g", "1700000000123", "h", "0",
		"i", "WAIT\x01true\x02", "j", "0", "k", "false", "m", "false"}
	var h SendMessageRequestHeader
	n := testing.AllocsPerRun(100, func() {
		f := NewSendHeaderFields(true)
		for i := 0; i < len(pairs); i += 2 {
			f.Set(pairs[i], pairs[i+1])
		}
		if err := f.Header(&h); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 || h.BornTimestamp != 1700000000123 {
		t.Fatalf("%v allocations, header %+v", n, h)
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
