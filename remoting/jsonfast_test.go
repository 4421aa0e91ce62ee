package remoting

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// BenchmarkFastJSONHeader decodes the JSON headers of the two commands every send carries: a
// SEND_MESSAGE_V2 request as the Go clients write it (13 short fields, properties escaped) and
// its SEND_OK response.
func BenchmarkFastJSONHeader(b *testing.B) {
	req := &Command{Code: 310, Language: "GO", Version: 317, Opaque: 12345, ExtFields: map[string]string{
		"a": "mqbench_producer", "b": "BenchCPU", "c": "TBW102", "d": "4", "e": "3", "f": "0",
		"g": "1764488183123", "h": "0", "i": "UNIQ_KEY\x01C0A80001000000000000000000001\x02WAIT\x01true\x02",
		"j": "0", "k": "false", "l": "0", "m": "false",
	}}
	resp := &Command{Code: 0, Language: "GO", Version: 317, Opaque: 12345, Flag: 1, ExtFields: map[string]string{
		"msgId": "7F00000100002A9F0000000000A1B2C3", "queueId": "3", "queueOffset": "123456",
		"transactionId": "C0A80001000000000000000000001", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true",
	}}
	for _, c := range []struct {
		name string
		cmd  *Command
	}{{"send-request", req}, {"send-response", resp}} {
		h := encodeJSONHeader(nil, c.cmd)
		n := bytes.Count(h, colon)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(h)))
			for b.Loop() {
				if _, err := fastJSONHeader(h, n); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"-flat", func(b *testing.B) { // extFields kept flat (flatext.go), as a broker decodes sends
			b.ReportAllocs()
			b.SetBytes(int64(len(h)))
			keep := flatRule{codes: []int32{310}, responses: true}
			for b.Loop() {
				if _, err := fastJSONHeaderKeeping(h, n, keep); err != nil {
					b.Fatal(err)
				}
			}
		})
		bin, err := encodeBinaryHeader(nil, c.cmd)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name+"-binary-flat", func(b *testing.B) { // the same command as a ROCKETMQ binary header
			b.ReportAllocs()
			b.SetBytes(int64(len(bin)))
			keep := flatRule{codes: []int32{310}, responses: true}
			for b.Loop() {
				if _, err := decodeBinaryHeaderKeeping(bin, keep); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"-checked", func(b *testing.B) { // with the field count check Decode runs first
			b.ReportAllocs()
			b.SetBytes(int64(len(h)))
			for b.Loop() {
				if _, err := decodeJSONHeader(h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The fast parser takes the headers clients send without the general decoder, one-character and
// escaped keys and values around the end of extFields included, and gives what encoding/json
// gives.
func TestFastJSONHeaderExtFields(t *testing.T) {
	h := []byte(`{"code":310,"extFields":{"a":"g","\"":"q","\u0062":"}","c":"x\"}","i":"K\u0001V\u0002"},"language":"JAVA","serializeTypeCurrentRPC":"JSON"}`)
	fast, err := fastJSONHeader(h, countFields(h, len(h)))
	if err != nil {
		t.Fatalf("fast parser refused it: %v", err)
	}
	want := map[string]string{"a": "g", `"`: "q", "b": "}", "c": `x"}`, "i": "K\x01V\x02"}
	if !reflect.DeepEqual(fast.ExtFields, want) || fast.Code != 310 || fast.Language != "JAVA" {
		t.Fatalf("got %+v", fast)
	}
	slow, err := slowJSONHeader(h)
	if err != nil || !reflect.DeepEqual(fast, slow) {
		t.Fatalf("encoding/json gives %+v (%v)", slow, err)
	}
}

// A value the fast parser skips (serializeTypeCurrentRPC) is still checked: an invalid escape
// there is refused as encoding/json refuses it.
func TestFastJSONHeaderChecksSkippedValue(t *testing.T) {
	h := []byte(`{"code":1,"serializeTypeCurrentRPC":"\x"}`)
	if c, err := fastJSONHeader(h, 0); err == nil {
		t.Fatalf("fast parser accepted an invalid escape: %+v", c)
	}
	if _, err := slowJSONHeader(h); err == nil {
		t.Fatal("encoding/json accepted it: the test proves nothing")
	}
	if c, err := fastJSONHeader([]byte(`{"code":1,"serializeTypeCurrentRPC":"J\u0053ON"}`), 0); err != nil || c.Code != 1 {
		t.Fatalf("valid escape: %+v %v", c, err)
	}
}

// Whitespace inside extFields, and a header cut off after it, in buffers with no spare capacity:
// the values come from the object's own bytes, never from past its end.
func TestFastJSONHeaderWhitespaceAndTruncation(t *testing.T) {
	for _, h := range []string{
		`{"extFields":{  "a":"b"}`, // truncated: the outer object never closes
		`{"extFields":{  "a":"b"  ,  "c" : "d"   }   }`,
		"{\"extFields\":{ \n\t\"a\":\"b\" }}",
		`{"extFields":{   }}`,
	} {
		b := []byte(h)
		b = b[:len(b):len(b)]
		fast, err := fastJSONHeader(b, countFields(b, len(b)))
		slow, serr := slowJSONHeader(b)
		switch {
		case err != nil && serr == nil && !errors.Is(err, errSlowPath):
			t.Fatalf("%q: fast %v, slow accepted", h, err)
		case err == nil && (serr != nil || !reflect.DeepEqual(fast, slow)):
			t.Fatalf("%q: fast %+v, slow %+v %v", h, fast, slow, serr)
		}
	}
}

// The header's numbers are read as they are scanned: int32's bounds are taken, a number past
// them (however many digits) and the forms JSON forbids go to the general decoder.
func TestFastJSONHeaderNumbers(t *testing.T) {
	for h, want := range map[string]int32{
		`{"code":2147483647}`: 2147483647, `{"code":-2147483648}`: -2147483648, `{"code":0}`: 0, `{"code":-0}`: 0, `{"code": 17 }`: 17,
	} {
		c, err := fastJSONHeader([]byte(h), 0)
		if err != nil || c.Code != want {
			t.Errorf("%s: code %v, %v; want %d", h, c, err, want)
		}
	}
	for _, h := range []string{
		`{"code":2147483648}`, `{"code":-2147483649}`, `{"code":99999999999999999999999}`, `{"code":01}`,
		`{"code":1.5}`, `{"code":1e3}`, `{"code":-}`, `{"code":+1}`,
	} {
		if _, err := fastJSONHeader([]byte(h), 0); !errors.Is(err, errSlowPath) {
			t.Errorf("%s: %v, want the general decoder", h, err)
		}
	}
}
