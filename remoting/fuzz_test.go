package remoting

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

// FuzzDecode feeds arbitrary frames (after the length field) to the decoder.
// Invariants: never panic; whatever decodes re-encodes and decodes to the same
// command.
func FuzzDecode(f *testing.F) {
	for _, st := range []byte{SerializeJSON, SerializeRocketMQ} {
		frame, _ := Encode(&Command{Code: 10, Opaque: 1, Remark: "r", ExtFields: map[string]string{"a": "b"}, Body: []byte{1, 2}, SerializeType: st})
		f.Add(frame[4:])
	}
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	f.Add([]byte{1, 0, 0, 21, 0, 10, 9, 1, 61, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, frame []byte) {
		c, err := Decode(frame)
		if err != nil {
			return
		}
		enc, err := Encode(c)
		if err != nil {
			return // e.g. a JSON-decoded code that does not fit a binary header
		}
		again, err := Decode(enc[4:])
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if c.Body == nil && again.Body != nil || !bytes.Equal(c.Body, again.Body) || c.Code != again.Code || c.Opaque != again.Opaque || !reflect.DeepEqual(c.ExtFields, again.ExtFields) {
			t.Fatalf("round trip changed the command:\n%+v\n%+v", c, again)
		}
	})
}

// FuzzJSONHeader targets the JSON header decoder alone.
func FuzzJSONHeader(f *testing.F) {
	f.Add([]byte(`{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T1"}}`))
	f.Add([]byte(`{"code":1,"extFields":{"x":1,"y":true,"z":null}}`))
	f.Add([]byte(`{"code":1,"extFields":{"a":"1","b":{"c":{"d":"e"}}},"x":{"y":"z"}}`))
	f.Fuzz(func(t *testing.T, h []byte) {
		c, err := decodeJSONHeader(h)
		if err != nil {
			return
		}
		out, err := decodeJSONHeader(encodeJSONHeader(nil, c))
		if err != nil {
			t.Fatalf("re-decode %q: %v", encodeJSONHeader(nil, c), err)
		}
		if out.Code != c.Code || out.Remark != c.Remark || !reflect.DeepEqual(out.ExtFields, c.ExtFields) {
			t.Fatalf("round trip: %+v vs %+v", c, out)
		}
	})
}

// FuzzBinaryHeader targets the ROCKETMQ header decoder alone, with its flat decode (a send's)
// giving what the map decode gives: the same refusal or the same fields.
func FuzzBinaryHeader(f *testing.F) {
	h, _ := encodeBinaryHeader(nil, &Command{Code: 10, Remark: "x", ExtFields: map[string]string{"k": "v"}})
	f.Add(h)
	f.Fuzz(func(t *testing.T, h []byte) {
		c, err := decodeBinaryHeader(h)
		// The rule names the header's own code, so a request takes the flat path too, even
		// when it is refused.
		flat, ferr := decodeBinaryHeaderKeeping(h, flatRule{codes: []int32{binaryHeaderCode(h)}, responses: true})
		if (err == nil) != (ferr == nil) {
			t.Fatalf("map decode error %v, flat decode error %v", err, ferr)
		}
		if err != nil {
			return
		}
		if !reflect.DeepEqual(flat.Fields(), c.ExtFields) || flat.Code != c.Code || flat.Remark != c.Remark {
			t.Fatalf("flat decode %+v, map decode %+v", flat, c)
		}
		enc, err := encodeBinaryHeader(nil, c)
		if err != nil {
			t.Fatal(err)
		}
		out, err := decodeBinaryHeader(enc)
		if err != nil || out.Code != c.Code || out.Remark != c.Remark || len(out.ExtFields) > len(c.ExtFields) {
			t.Fatalf("round trip: %v %+v %+v", err, c, out)
		}
	})
}

// binaryHeaderCode is the request code a binary header starts with (0 for fewer than 2 bytes).
func binaryHeaderCode(h []byte) int32 {
	if len(h) < 2 {
		return 0
	}
	return int32(int16(binary.BigEndian.Uint16(h)))
}

// FuzzReadFrame checks the frame reader never panics or over-allocates past the limit.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{0, 0, 0, 6, 0, 0, 0, 2, '{', '}'})
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF})
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ReadFrame(bytes.NewReader(data), 1<<16)
		if err == nil && len(b)+4 > 1<<16 {
			t.Fatalf("frame of %d bytes over the limit", len(b))
		}
	})
}

// FuzzFastJSONHeader checks the reflection-free header parser against
// encoding/json: whatever the fast parser accepts, the general decoder must
// accept with the same result.
func FuzzFastJSONHeader(f *testing.F) {
	f.Add([]byte(`{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T1"}}`))
	f.Add([]byte(`{"code":10,"extFields":{"i":"TAGS\u0001A\u0002","u":"\ud83d\ude00 \"q\" \\ \/"},"serializeTypeCurrentRPC":"JSON","remark":null}`))
	f.Add([]byte(` { "code" : -3 , "opaque" : 2147483647 } `))
	// one-character keys (SEND_MESSAGE_V2), escaped ones, values around the object's end
	f.Add([]byte(`{"code":310,"extFields":{"a":"g","\"":"q","\u0062":"}","c":"x\"}"},"language":"JAVA"}`))
	f.Add([]byte(`{"extFields":{"\\":"","b":"\u0001","\u0001":"1"},"language":"GO2"}`))
	f.Add([]byte(`{"code":1,"serializeTypeCurrentRPC":"\x"}`)) // an invalid escape in a skipped value
	f.Add([]byte(`{"extFields":{  "a":"b"}`))                  // whitespace before the fields, cut off after them
	f.Fuzz(func(t *testing.T, h []byte) {
		h = h[:len(h):len(h)] // no spare capacity to read into by mistake
		fast, err := fastJSONHeader(h, countFields(h, len(h)))
		if err != nil {
			return
		}
		slow, err := slowJSONHeader(h)
		if err != nil {
			t.Fatalf("fast accepted what encoding/json rejects: %q: %v", h, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("results differ for %q:\nfast %+v\nslow %+v", h, fast, slow)
		}
		// Kept flat (flatext.go), the same header reads the same once its map is built.
		flat, err := fastJSONHeaderKeeping(h, countFields(h, len(h)), flatRule{codes: []int32{fast.Code}, responses: true})
		if errors.Is(err, errSlowPath) {
			return // a key repeated past MaxExtFields counts in a list, not in a map
		} else if err != nil {
			t.Fatalf("flat decode refused %q: %v", h, err)
		}
		flat.Fields()
		if !reflect.DeepEqual(flat, fast) {
			t.Fatalf("flat decode differs for %q:\nflat %+v\nmap  %+v", h, flat, fast)
		}
	})
}

// FuzzReadFrameChunked feeds arbitrary byte streams to the frame reader, with short reads. Invariants:
// never panic; a frame it returns is no longer than announced and within the limit, and its
// header word respects MaxHeaderSize.
func FuzzReadFrameChunked(f *testing.F) {
	ok, _ := Encode(&Command{Code: 10, Remark: "r", ExtFields: map[string]string{"a": "b"}, Body: []byte("body")})
	f.Add(ok, uint16(1000))
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0, 0, 0, 0}, uint16(7))
	f.Add([]byte{0, 0, 0, 8, 1, 0xff, 0xff, 0xff, 1, 2, 3}, uint16(3))
	f.Add([]byte{0, 0, 0, 3, 0, 0}, uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16) {
		const limit = 1 << 20
		r := bytes.NewReader(data)
		for {
			frame, err := ReadFrame(iotestShort{r: r, n: int(chunk%4096) + 1}, limit)
			if err != nil {
				return
			}
			if len(frame)+4 > limit || len(frame) < 4 {
				t.Fatalf("frame of %d bytes returned", len(frame))
			}
			if h := int(binary.BigEndian.Uint32(frame) & 0xFFFFFF); h > MaxHeaderSize || h > len(frame)-4 {
				t.Fatalf("header length %d accepted in a frame of %d", h, len(frame))
			}
			_, _ = Decode(frame)
		}
	})
}

// iotestShort reads at most n bytes at a time.
type iotestShort struct {
	r *bytes.Reader
	n int
}

func (s iotestShort) Read(p []byte) (int, error) {
	if len(p) > s.n {
		p = p[:s.n]
	}
	return s.r.Read(p)
}
