package remoting

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func roundTrip(t *testing.T, c *Command) *Command {
	t.Helper()
	frame, err := Encode(c)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	if got := int(binary.BigEndian.Uint32(frame)); got != len(frame)-4 {
		t.Fatalf("length field %d, frame %d", got, len(frame))
	}
	body, err := ReadFrame(bytes.NewReader(frame), DefaultMaxFrameSize)
	if err != nil {
		t.Fatalf("read frame: %v", err)
	}
	out, err := Decode(body)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return out
}

func TestRoundTripBothSerializations(t *testing.T) {
	for _, st := range []byte{SerializeJSON, SerializeRocketMQ} {
		in := &Command{
			Code: SendMessageV2, Language: "GO", Version: 317, Opaque: 42, Flag: FlagOneway,
			Remark: "hi \"there\"\n\\",
			ExtFields: map[string]string{
				"a": "group", "b": "Topic", "i": "TAGS\x01TagA\x02KEYS\x01k1 k2\x02", "e": "-1", "empty": "",
				"unicode": "héllo 世界",
			},
			Body:          []byte("payload"),
			SerializeType: st,
		}
		out := roundTrip(t, in)
		if !reflect.DeepEqual(in, out) {
			t.Fatalf("serialize %d: got %+v want %+v", st, out, in)
		}
	}
}

func TestEmptyBodyAndFieldsRoundTrip(t *testing.T) {
	for _, st := range []byte{SerializeJSON, SerializeRocketMQ} {
		in := &Command{Code: HeartBeat, Language: "JAVA", Version: ServerVersion, Opaque: -7, ExtFields: map[string]string{}, SerializeType: st}
		out := roundTrip(t, in)
		if out.Body != nil || len(out.ExtFields) != 0 || out.Opaque != -7 {
			t.Fatalf("serialize %d: %+v", st, out)
		}
	}
}

// TestWorkedExample decodes one SEND_MESSAGE_V2-style frame (code 105, topic T1) in both
// header forms, byte by byte.
func TestWorkedExample(t *testing.T) {
	jsonHeader := `{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T1"}}`
	if len(jsonHeader) != 101 {
		t.Fatalf("header length %d", len(jsonHeader))
	}
	frame := append([]byte{0, 0, 0, 0x69, 0, 0, 0, 0x65}, jsonHeader...)
	body, err := ReadFrame(bytes.NewReader(frame), DefaultMaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	if c.Code != 105 || c.Language != "GO" || c.Version != 317 || c.Opaque != 1 || c.Ext("topic") != "T1" {
		t.Fatalf("json: %+v", c)
	}

	bin, _ := hex.DecodeString("00000026" + "01000022" + "0069" + "09" + "013D" + "00000001" + "00000000" + "00000000" + "0000000D" + "0005746F706963" + "000000025431")
	body, err = ReadFrame(bytes.NewReader(bin), DefaultMaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	c, err = Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	if c.Code != 105 || c.Language != "GO" || c.Version != 317 || c.Opaque != 1 || c.Ext("topic") != "T1" || c.SerializeType != SerializeRocketMQ {
		t.Fatalf("binary: %+v", c)
	}
	// Our encoder must produce exactly these bytes for the same command.
	again, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, bin) {
		t.Fatalf("binary encode:\n got %x\nwant %x", again, bin)
	}
}

func TestLenientJSONExtFields(t *testing.T) {
	h := `{"code":10,"opaque":3,"flag":0,"language":9,"extFields":{"queueId":3,"unitMode":false,"topic":"T","nothing":null}}`
	frame := make([]byte, 4, 4+len(h))
	binary.BigEndian.PutUint32(frame, uint32(len(h)))
	c, err := Decode(append(frame, h...))
	if err != nil {
		t.Fatal(err)
	}
	if c.Ext("queueId") != "3" || c.Ext("unitMode") != "false" || c.Ext("topic") != "T" || c.Language != "GO" {
		t.Fatalf("%+v", c)
	}
	if _, ok := c.ExtFields["nothing"]; ok {
		t.Fatal("null field kept")
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := map[string][]byte{
		"short":          {0, 0},
		"header overrun": {0, 0, 0, 50, '{', '}'},
		"bad json":       append([]byte{0, 0, 0, 5}, "{code"...),
		"bad type":       {7, 0, 0, 0},
		"short binary":   {1, 0, 0, 3, 0, 1, 2},
		"number in code": append([]byte{0, 0, 0, 14}, `{"code":"x1"}`...),
	}
	for name, frame := range cases {
		if _, err := Decode(frame); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestReadFrameLimits(t *testing.T) {
	big := []byte{0x01, 0x00, 0x00, 0x00} // 16 MiB + 4 with the length field
	if _, err := ReadFrame(bytes.NewReader(big), DefaultMaxFrameSize); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	trunc := []byte{0, 0, 0, 20, 0, 0, 0, 2, '{', '}'}
	if _, err := ReadFrame(bytes.NewReader(trunc), DefaultMaxFrameSize); !errors.Is(err, ErrBadFrame) {
		t.Fatalf("truncated: %v", err)
	}
	tiny := []byte{0, 0, 0, 2, 0, 0}
	if _, err := ReadFrame(bytes.NewReader(tiny), DefaultMaxFrameSize); !errors.Is(err, ErrBadFrame) {
		t.Fatalf("tiny: %v", err)
	}
}

func TestEncodeRefusesBigCodeInBinary(t *testing.T) {
	c := &Command{Code: 200050, SerializeType: SerializeRocketMQ}
	if _, err := Encode(c); err == nil {
		t.Fatal("POP code encoded in binary header")
	}
	c.SerializeType = SerializeJSON
	if out := roundTrip(t, c); out.Code != 200050 {
		t.Fatalf("json POP code: %d", out.Code)
	}
}

func TestExtHelpers(t *testing.T) {
	c := &Command{ExtFields: map[string]string{"n": "12", "bad": "x", "b": "TRUE", "big": "9999999999"}}
	if n, err := c.ExtInt64("n"); err != nil || n != 12 {
		t.Fatal(n, err)
	}
	if _, err := c.ExtInt64("missing"); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatal(err)
	}
	if _, err := c.ExtInt64("bad"); err == nil || !strings.Contains(err.Error(), "bad") {
		t.Fatal(err)
	}
	if _, err := c.ExtInt32("big"); err == nil {
		t.Fatal("int32 overflow accepted")
	}
	if !c.ExtBool("b") || c.ExtBool("n") {
		t.Fatal("bool parsing")
	}
	if c.ExtInt64Or("missing", 5) != 5 {
		t.Fatal("default")
	}
}

// A connection writes a frame's head and then the command's body from where it is; the two
// together are the frame Encode renders, in both header encodings, with and without a body.
func TestEncodeHeadThenBody(t *testing.T) {
	for _, st := range []byte{SerializeJSON, SerializeRocketMQ} {
		for _, body := range [][]byte{nil, []byte("payload"), bytes.Repeat([]byte{7}, 200<<10)} {
			c := &Command{Code: SendMessageV2, Opaque: 9, ExtFields: map[string]string{"b": "T"}, Body: body, SerializeType: st}
			whole, err := Encode(c)
			if err != nil {
				t.Fatal(err)
			}
			head, err := encodeHead(c)
			if err != nil {
				t.Fatal(err)
			}
			if got := append(head, body...); !bytes.Equal(got, whole) {
				t.Fatalf("serialize %d, %d-byte body: head+body differs from the frame", st, len(body))
			}
		}
	}
}

// Frames whose bodies are larger than the connection's write buffer, between small ones, arrive
// whole and in order: the body goes to the socket after its head, not copied into a frame.
func TestLargeBodiesOverAConnection(t *testing.T) {
	srv := startServer(t, func(s *Server) { s.Handle(SendMessageV2, echo) })
	cl := NewClient(ClientConfig{})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type call struct {
		body []byte
		ch   chan *Command
	}
	var calls []call
	for i := range 40 {
		size := 10 + i
		if i%3 == 0 {
			size = 100<<10 + i // over the 64 KiB write buffer
		}
		body := bytes.Repeat([]byte{byte(i)}, size)
		ch := make(chan *Command, 1)
		req := NewRequest(SendMessageV2, nil, body)
		if err := cl.InvokeAsync(ctx, srv.Addr(), req, time.Now().Add(30*time.Second), func(resp *Command, err error) {
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
			ch <- resp
		}); err != nil {
			t.Fatal(err)
		}
		calls = append(calls, call{body, ch})
	}
	for i, c := range calls {
		select {
		case resp := <-c.ch:
			if resp == nil || !bytes.Equal(resp.Body, c.body) {
				t.Fatalf("call %d: the echoed body differs (%d bytes sent)", i, len(c.body))
			}
		case <-ctx.Done():
			t.Fatalf("call %d: no answer", i)
		}
	}
}
