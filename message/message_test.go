package message

import (
	"bytes"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func sampleMessage() *Message {
	return &Message{
		Topic:                     "TopicTest",
		QueueID:                   3,
		Flag:                      7,
		QueueOffset:               42,
		PhysicalOffset:            1 << 33,
		SysFlag:                   SysFlagCompressed | TransactionCommitType,
		BornTimestamp:             1700000000000,
		BornHost:                  netip.MustParseAddrPort("10.0.0.1:5555"),
		StoreTimestamp:            1700000000123,
		StoreHost:                 netip.MustParseAddrPort("192.168.0.1:10911"),
		ReconsumeTimes:            2,
		PreparedTransactionOffset: 99,
		Body:                      []byte("hello world"),
		Properties:                FormatProperties(map[string]string{PropertyTags: "TagA", PropertyKeys: "k1 k2"}),
	}
}

func TestRecordRoundTrip(t *testing.T) {
	cases := map[string]func(m *Message){
		"v4":       func(m *Message) {},
		"born v6":  func(m *Message) { m.BornHost = netip.MustParseAddrPort("[2001:db8::1]:80") },
		"store v6": func(m *Message) { m.StoreHost = netip.MustParseAddrPort("[::1]:10911") },
		"both v6": func(m *Message) {
			m.BornHost, m.StoreHost = netip.MustParseAddrPort("[fe80::1]:1"), netip.MustParseAddrPort("[::2]:2")
		},
		"v2 topic":   func(m *Message) { m.Topic = RetryTopicPrefix + strings.Repeat("g", 200) },
		"empty body": func(m *Message) { m.Body = []byte{} },
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			m := sampleMessage()
			mod(m)
			b, err := EncodeRecord(m)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != RecordSize(m) {
				t.Fatalf("size %d, RecordSize %d", len(b), RecordSize(m))
			}
			got, n, err := DecodeRecord(append(b, 0xAA, 0xBB))
			if err != nil {
				t.Fatal(err)
			}
			if n != len(b) {
				t.Fatalf("consumed %d, want %d", n, len(b))
			}
			want := *m
			want.SysFlag = got.SysFlag // IPv6 bits are set by the encoder
			if m.BornHost.Addr().Is6() != (got.SysFlag&SysFlagBornHostV6 != 0) || m.StoreHost.Addr().Is6() != (got.SysFlag&SysFlagStoreHostV6 != 0) {
				t.Fatalf("IPv6 bits wrong: %#x", got.SysFlag)
			}
			if !reflect.DeepEqual(&want, got) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, &want)
			}
			v, err := ParseView(b)
			if err != nil {
				t.Fatal(err)
			}
			if v.StoreTimestamp() != m.StoreTimestamp || string(v.Topic()) != m.Topic || string(v.Tags()) != "TagA" || string(v.Keys()) != "k1 k2" {
				t.Fatalf("view fields wrong")
			}
			v.SetQueueOffset(5)
			v.SetPhysicalOffset(6)
			v.SetStoreTimestamp(7)
			if v.QueueOffset() != 5 || v.PhysicalOffset() != 6 || v.StoreTimestamp() != 7 {
				t.Fatalf("patch failed")
			}
			if _, _, err := DecodeRecord(b); err != nil {
				t.Fatalf("patching offsets must keep the CRC valid: %v", err)
			}
		})
	}
}

func TestRecordMagicChoice(t *testing.T) {
	m := sampleMessage()
	m.Topic = strings.Repeat("t", 127)
	b, _ := EncodeRecord(m)
	if got := uint32(b[4])<<24 | uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7]); got != MagicCodeV1 {
		t.Fatalf("127-byte topic magic %#x", got)
	}
	m.Topic = strings.Repeat("t", 128)
	b, _ = EncodeRecord(m)
	if got := uint32(b[4])<<24 | uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7]); got != MagicCodeV2 {
		t.Fatalf("128-byte topic magic %#x", got)
	}
}

func TestEncodeRecordLimits(t *testing.T) {
	m := sampleMessage()
	m.Topic = strings.Repeat("t", 256)
	if _, err := EncodeRecord(m); !errors.Is(err, ErrMalformed) {
		t.Fatalf("long topic: %v", err)
	}
	m = sampleMessage()
	m.Properties = strings.Repeat("p", MaxPropertiesLength+1)
	if _, err := EncodeRecord(m); !errors.Is(err, ErrMalformed) {
		t.Fatalf("long properties: %v", err)
	}
	m.Properties = strings.Repeat("p", MaxPropertiesLength)
	if _, err := EncodeRecord(m); err != nil {
		t.Fatalf("max properties: %v", err)
	}
}

func TestDecodeRecordRejects(t *testing.T) {
	b, _ := EncodeRecord(sampleMessage())
	for i := 0; i < len(b); i++ {
		if _, _, err := DecodeRecord(b[:i]); err == nil {
			t.Fatalf("truncated to %d decoded", i)
		}
	}
	bad := bytes.Clone(b)
	bad[len(bad)-20] ^= 1 // inside properties: structure fine, CRC covers only the body
	if _, _, err := DecodeRecord(bad); err != nil {
		t.Fatalf("property byte flip must still decode: %v", err)
	}
	bad = bytes.Clone(b)
	bad[90] ^= 1 // body
	if _, _, err := DecodeRecord(bad); !errors.Is(err, ErrMalformed) {
		t.Fatalf("body flip: %v", err)
	}
	bad = bytes.Clone(b)
	bad[3]++ // TOTALSIZE
	if _, _, err := DecodeRecord(append(bad, 0)); err == nil {
		t.Fatal("wrong TOTALSIZE accepted")
	}
	bad = bytes.Clone(b)
	bad[4] = 0
	if _, _, err := DecodeRecord(bad); err == nil {
		t.Fatal("bad magic accepted")
	}
}

func TestProperties(t *testing.T) {
	m := ParseProperties("TAGS\x01TagA\x02KEYS\x01k1 k2\x02WAIT\x01true\x02")
	want := map[string]string{"TAGS": "TagA", "KEYS": "k1 k2", "WAIT": "true"}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("got %v", m)
	}
	if s := FormatProperties(want); s != "KEYS\x01k1 k2\x02TAGS\x01TagA\x02WAIT\x01true\x02" {
		t.Fatalf("format %q", s)
	}
	m = ParseProperties("\x01x\x02a\x01\x02b\x011\x02b\x012\x02noval\x02c\x01v")
	if !reflect.DeepEqual(m, map[string]string{"b": "2", "c": "v"}) {
		t.Fatalf("lenient parse %v", m)
	}
	if v, ok := PropertyValue([]byte("b\x011\x02TAGS\x01x\x02b\x012\x02"), "b"); !ok || string(v) != "2" {
		t.Fatalf("PropertyValue last wins: %q %v", v, ok)
	}
	if _, ok := PropertyValue([]byte("TAGS\x01\x02"), "TAGS"); ok {
		t.Fatal("empty value found")
	}
	if v, ok := PropertyString("b\x011\x02TAGS\x01x\x02b\x012\x02", "b"); !ok || v != "2" {
		t.Fatalf("PropertyString last wins: %q %v", v, ok)
	}
	if _, ok := PropertyString("TAGS\x01\x02", "TAGS"); ok {
		t.Fatal("PropertyString: empty value found")
	}
	if s := FormatProperties(map[string]string{"a\x01": "x", "b": "", "c": "d"}); s != "c\x01d\x02" {
		t.Fatalf("unsafe pairs not skipped: %q", s)
	}
}

func TestJavaHashes(t *testing.T) {
	cases := []struct {
		s    string
		want int64
	}{
		{"", 0},
		{"abc", 96354},
		{"TagA", 2598919},
		{"\U0001F600", 1772899},
		{"é", 233},
		{"polygenelubricants", -2147483648},
	}
	for _, c := range cases {
		if got := TagsCode(c.s); got != c.want {
			t.Errorf("TagsCode(%q) = %d, want %d", c.s, got, c.want)
		}
		if got := TagsCodeBytes([]byte(c.s)); got != c.want {
			t.Errorf("TagsCodeBytes(%q) = %d, want %d", c.s, got, c.want)
		}
	}
	if got := IndexKeyHash("polygenelubricants"); got != 0 {
		t.Errorf("IndexKeyHash(MIN_VALUE) = %d", got)
	}
	if got := IndexKeyHash("abc"); got != 96354 {
		t.Errorf("IndexKeyHash(abc) = %d", got)
	}
	if a, b := IndexKeyHash("TopicTest#order-1"), IndexKeyHashParts([]byte("TopicTest"), []byte("order-1")); a != b {
		t.Errorf("IndexKeyHashParts %d != %d", b, a)
	}
}

// EncodeRecordAdding writes the record EncodeRecord writes with the property appended to the
// properties string, a separator put in where they lack a trailing one.
func TestEncodeRecordAdding(t *testing.T) {
	for _, props := range []string{"", "TAGS\x01a\x02", "TAGS\x01a"} {
		m := &Message{Topic: "T", QueueID: 1, Body: []byte("body"), Properties: props,
			BornHost: netip.MustParseAddrPort("10.0.0.1:5"), StoreHost: netip.MustParseAddrPort("[2001:db8::1]:10911")}
		got, err := EncodeRecordAdding(m, PropertyCluster, "C1")
		if err != nil {
			t.Fatal(err)
		}
		joined := props
		if joined != "" && !strings.HasSuffix(joined, "\x02") {
			joined += "\x02"
		}
		m2 := *m
		m2.Properties = joined + "CLUSTER\x01C1\x02"
		want, err := EncodeRecord(&m2)
		if err != nil || !bytes.Equal(got, want) || cap(got) != len(got) {
			t.Fatalf("props %q: record %x (cap %d), want %x (%v)", props, got, cap(got), want, err)
		}
	}
	long := &Message{Topic: "T", Properties: strings.Repeat("x", MaxPropertiesLength-5)}
	if _, err := EncodeRecordAdding(long, PropertyCluster, "C1"); !errors.Is(err, ErrMalformed) {
		t.Fatalf("properties over the limit once added: %v", err)
	}
}

func TestOffsetMsgID(t *testing.T) {
	host := netip.MustParseAddrPort("192.168.0.1:10911")
	if id := OffsetMsgID(host, 0); id != "C0A8000100002A9F0000000000000000" {
		t.Fatalf("id %s", id)
	}
	id := OffsetMsgID(host, 123456789)
	h, off, err := ParseOffsetMsgID(strings.ToLower(id))
	if err != nil || h != host || off != 123456789 {
		t.Fatalf("parse: %v %v %v", h, off, err)
	}
	v6 := netip.MustParseAddrPort("[2001:db8::5]:10911")
	id = OffsetMsgID(v6, 77)
	if len(id) != 56 {
		t.Fatalf("v6 id %s", id)
	}
	if h, off, err := ParseOffsetMsgID(id); err != nil || h != v6 || off != 77 {
		t.Fatalf("v6 parse: %v %v %v", h, off, err)
	}
	if got := string(AppendOffsetMsgID([]byte("x,"), host, 0)); got != "x,C0A8000100002A9F0000000000000000" {
		t.Fatalf("appended %s", got)
	}
	// The id is built once per acknowledged message: the string is its one allocation.
	if n := testing.AllocsPerRun(100, func() { _ = OffsetMsgID(v6, 77) }); n != 1 {
		t.Fatalf("OffsetMsgID allocates %v times, want 1", n)
	}
	for _, bad := range []string{"", "XYZ", strings.Repeat("G", 32), strings.Repeat("0", 31)} {
		if _, _, err := ParseOffsetMsgID(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestBatch(t *testing.T) {
	in := []BatchEntry{{Flag: 1, Body: []byte("a"), Properties: "KEYS\x01x\x02"}, {Flag: 2, Body: []byte{}, Properties: ""}}
	b, err := EncodeBatch(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeBatch(b)
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("batch round trip: %v %+v", err, out)
	}
	for i := 1; i < len(b); i++ {
		if i == 30 { // exactly the first entry
			continue
		}
		if _, err := DecodeBatch(b[:i]); err == nil {
			t.Fatalf("truncated batch at %d decoded", i)
		}
	}
	if _, err := DecodeBatch(nil); err == nil {
		t.Fatal("empty batch decoded")
	}
}

func TestValidateTopic(t *testing.T) {
	ok := []string{"TopicTest", "a|b%c_d-e", strings.Repeat("t", 127), RetryTopicPrefix + strings.Repeat("g", 248)}
	for _, n := range ok {
		if err := ValidateTopic(n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	bad := []string{"", "a b", "topic.x", strings.Repeat("t", 128), RetryTopicPrefix + strings.Repeat("g", 249), "日本"}
	for _, n := range bad {
		if err := ValidateTopic(n); !errors.Is(err, ErrInvalidName) {
			t.Errorf("%q accepted: %v", n, err)
		}
	}
	if err := ValidateGroup("GID_1"); err != nil {
		t.Error(err)
	}
}

func TestTransactionType(t *testing.T) {
	f := ResetTransactionType(SysFlagCompressed|TransactionPreparedType, TransactionCommitType)
	if TransactionType(f) != TransactionCommitType || f&SysFlagCompressed == 0 {
		t.Fatalf("reset %#x", f)
	}
	if IsDispatchable(TransactionPreparedType) || IsDispatchable(TransactionRollbackType) || !IsDispatchable(TransactionCommitType) || !IsDispatchable(0) {
		t.Fatal("IsDispatchable")
	}
}
