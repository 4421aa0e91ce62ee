package remoting

import (
	"bytes"
	"context"
	"maps"
	"reflect"
	"testing"
	"time"
)

// sendV2Header is a SEND_MESSAGE_V2 request's JSON header as a Go client writes it, with the
// queue id (e) given twice: the later value is the one a map keeps.
var sendV2Header = []byte(`{"code":310,"language":"GO","version":317,"opaque":7,"flag":0,"extFields":{"a":"pg","b":"T","c":"TBW102","d":"4","e":"1","f":"0","g":"1764488183123","h":"0","i":"WAIT\u0001true\u0002","e":"3"},"serializeTypeCurrentRPC":"JSON"}`)

// A request whose code the rule names keeps its fields flat; every way of reading them gives
// what the map gives, and asking for the map builds it once.
func TestFlatExtRequest(t *testing.T) {
	want, err := decodeJSONHeader(sendV2Header)
	if err != nil {
		t.Fatal(err)
	}
	c, err := decodeJSONHeaderKeeping(sendV2Header, flatRule{codes: []int32{10, 310}})
	if err != nil {
		t.Fatal(err)
	}
	if c.ExtFields != nil || len(c.flatExt) != 10 {
		t.Fatalf("not kept flat: map %v, %d flat", c.ExtFields, len(c.flatExt))
	}
	if c.Ext("e") != "3" || c.Ext("i") != "WAIT\x01true\x02" || c.Ext("zz") != "" {
		t.Fatalf("Ext: e=%q i=%q", c.Ext("e"), c.Ext("i"))
	}
	if n, err := c.ExtInt32("d"); n != 4 || err != nil {
		t.Fatalf("ExtInt32(d) = %d, %v", n, err)
	}
	if _, err := c.ExtInt64("zz"); err == nil {
		t.Fatal("ExtInt64 of an absent field: no error")
	}
	seen := map[string]string{} // the last value per key, as a typed header reads them
	var order []string
	for k, v := range c.ExtSeq() {
		seen[k] = v
		order = append(order, k)
	}
	if !maps.Equal(seen, want.ExtFields) || len(order) != 10 || order[4] != "e" || order[9] != "e" {
		t.Fatalf("ExtSeq %v in order %v, map %v", seen, order, want.ExtFields)
	}
	if s := c.String(); c.ExtFields != nil || !bytes.Contains([]byte(s), []byte("e:3")) {
		t.Fatalf("String %q built the map (%v) or lost a field", s, c.ExtFields)
	}
	frame, err := Encode(c)
	if err != nil || c.flatExt == nil {
		t.Fatalf("Encode: %v, flat list gone %v", err, c.flatExt == nil)
	}
	again, err := Decode(frame[4:]) // past the length field
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(again.ExtFields, want.ExtFields) {
		t.Fatalf("re-encoded fields %v, want %v", again.ExtFields, want.ExtFields)
	}
	if m := c.Fields(); !maps.Equal(m, want.ExtFields) || c.flatExt != nil {
		t.Fatalf("Fields %v, want %v", m, want.ExtFields)
	}
	c.SetExt("x", "y")
	if c.Ext("x") != "y" || c.Ext("e") != "3" {
		t.Fatalf("after SetExt: %v", c.ExtFields)
	}
}

// A field set on a flat command without Fields (ExtFields assigned directly) is not lost: it
// wins over the flat value.
func TestFlatExtDirectAssignment(t *testing.T) {
	c, err := decodeJSONHeaderKeeping(sendV2Header, flatRule{codes: []int32{310}})
	if err != nil {
		t.Fatal(err)
	}
	c.ExtFields = map[string]string{"e": "9", "new": "1"}
	got := map[string]string{}
	for k, v := range c.ExtSeq() {
		got[k] = v
	}
	if got["e"] != "9" || got["new"] != "1" || got["a"] != "pg" || c.Ext("e") != "9" {
		t.Fatalf("ExtSeq %v, Ext(e) %q", got, c.Ext("e"))
	}
	if m := c.Fields(); m["e"] != "9" || m["new"] != "1" || m["b"] != "T" {
		t.Fatalf("Fields %v", m)
	}
}

// Only what the rule names stays flat: another code, a response (its flag read after the
// fields), and a code that comes after extFields get the map.
func TestFlatExtRuleBounds(t *testing.T) {
	rule := flatRule{codes: []int32{310}}
	for name, h := range map[string]string{
		"other code":        `{"code":11,"extFields":{"a":"b"}}`,
		"response":          `{"code":310,"extFields":{"a":"b"},"flag":1}`,
		"code after fields": `{"extFields":{"a":"b"},"code":310}`,
	} {
		c, err := decodeJSONHeaderKeeping([]byte(h), rule)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.flatExt != nil || c.ExtFields["a"] != "b" {
			t.Errorf("%s: flat %v, map %v", name, c.flatExt, c.ExtFields)
		}
	}
	c, err := decodeJSONHeaderKeeping([]byte(`{"code":0,"flag":1,"extFields":{"msgId":"X"}}`), flatRule{responses: true})
	if err != nil || c.flatExt == nil || c.Ext("msgId") != "X" {
		t.Fatalf("response kept flat: %+v %v", c, err)
	}
	c, err = decodeJSONHeaderKeeping([]byte(`{"code":310,"extFields":{}}`), rule)
	if err != nil || c.flatExt != nil || c.ExtFields == nil {
		t.Fatalf("empty extFields: %+v %v", c, err)
	}
}

// Decoding a send's header flat allocates the command, one string for the plain values, the
// escaped properties and the list: no map.
func TestFlatExtAllocations(t *testing.T) {
	rule := flatRule{codes: []int32{310}}
	n := bytes.Count(sendV2Header, colon)
	flat := testing.AllocsPerRun(100, func() { _, _ = fastJSONHeaderKeeping(sendV2Header, n, rule) })
	asMap := testing.AllocsPerRun(100, func() { _, _ = fastJSONHeader(sendV2Header, n) })
	if flat > 4 || flat >= asMap {
		t.Fatalf("flat decode allocates %v times (map %v), want at most 4", flat, asMap)
	}
}

// A server told to keep a code flat hands its handler such a command; a client keeping its
// responses flat gets them so.
func TestFlatExtOverConnections(t *testing.T) {
	srv := NewServer(ServerConfig{Addr: "127.0.0.1:0", FlatExtCodes: []int32{310}})
	got := make(chan bool, 1)
	srv.Handle(310, func(_ *Conn, req *Command) *Command {
		got <- req.ExtFields == nil && req.Ext("b") == "T"
		resp := req.NewResponse(Success, "")
		resp.SetExt("queueOffset", "5")
		return resp
	})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cl := NewClient(ClientConfig{FlatExtResponses: true})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, srv.Addr(), NewRequest(310, map[string]string{"b": "T"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !<-got {
		t.Fatal("the handler did not get the request's fields flat")
	}
	if resp.ExtFields != nil || resp.Ext("queueOffset") != "5" || !reflect.DeepEqual(resp.Fields(), map[string]string{"queueOffset": "5"}) {
		t.Fatalf("response %+v", resp)
	}
}

// A command built flat (NewFlatRequest, AppendExt) is encoded without a map, a repeated key
// reaching the peer as its later value; Fields gives a signer the whole map to add to, and an
// empty one for a command without fields.
func TestAppendExtEncodes(t *testing.T) {
	for _, st := range []byte{SerializeJSON, SerializeRocketMQ} {
		c := NewFlatRequest(310, 2, []byte("body"))
		c.SerializeType = st
		c.AppendExt("a", "1")
		c.AppendExt("b", "2")
		c.AppendExt("a", "3")
		if c.ExtFields != nil || c.Ext("a") != "3" {
			t.Fatalf("built flat: map %v, a=%q", c.ExtFields, c.Ext("a"))
		}
		frame, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(frame[4:])
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{"a": "3", "b": "2"}; !maps.Equal(got.ExtFields, want) || string(got.Body) != "body" {
			t.Fatalf("serialize type %d: decoded %v %q, want %v", st, got.ExtFields, got.Body, want)
		}
		m := c.Fields()
		m["Signature"] = "s"
		if c.Ext("Signature") != "s" || c.Ext("b") != "2" || len(c.ExtFields) != 3 {
			t.Fatalf("after Fields: %v", c.ExtFields)
		}
		c.AppendExt("c", "4") // with a map, it sets the map
		if c.ExtFields["c"] != "4" {
			t.Fatalf("AppendExt after Fields: %v", c.ExtFields)
		}
	}
	if m := (&Command{}).Fields(); m == nil {
		t.Fatal("Fields of a command without fields is nil")
	}
}

// A ROCKETMQ binary header of a code the rule names is kept flat as a JSON one is: the same
// fields in wire order (a repeated key included, the later read as the value), the map built
// only on request, three allocations whatever the field count; a code the rule does not name,
// and a header without fields, get the map.
func TestFlatExtBinaryHeader(t *testing.T) {
	js, err := decodeJSONHeaderKeeping(sendV2Header, flatRule{codes: []int32{310}})
	if err != nil {
		t.Fatal(err)
	}
	js.SerializeType = SerializeRocketMQ
	frame, err := Encode(js)
	if err != nil {
		t.Fatal(err)
	}
	header := frame[8 : 8+int(uint32(frame[5])<<16|uint32(frame[6])<<8|uint32(frame[7]))]
	rule := flatRule{codes: []int32{310}}
	c, err := decodeBinaryHeaderKeeping(header, rule)
	if err != nil {
		t.Fatal(err)
	}
	if c.ExtFields != nil || !reflect.DeepEqual(c.flatExt, js.flatExt) || c.Code != 310 || c.Opaque != 7 || c.Language != "GO" {
		t.Fatalf("binary flat decode %+v, want the JSON one's fields %v", c, js.flatExt)
	}
	if c.Ext("e") != "3" || c.Ext("i") != "WAIT\x01true\x02" {
		t.Fatalf("Ext: e=%q i=%q", c.Ext("e"), c.Ext("i"))
	}
	asMap, err := decodeBinaryHeader(header)
	if err != nil || asMap.flatExt != nil || !maps.Equal(asMap.ExtFields, c.Fields()) {
		t.Fatalf("map decode %v (%v), flat one's map %v", asMap.ExtFields, err, c.Fields())
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = decodeBinaryHeaderKeeping(header, rule) }); n > 3 {
		t.Fatalf("flat binary decode allocates %v times, want at most 3", n)
	}
	other, err := decodeBinaryHeaderKeeping(header, flatRule{codes: []int32{11}})
	if err != nil || other.flatExt != nil || other.ExtFields["e"] != "3" {
		t.Fatalf("a code the rule does not name: flat %v, map %v, %v", other.flatExt, other.ExtFields, err)
	}
	empty, err := decodeBinaryHeaderKeeping(encodeBinaryHeaderOrFail(t, &Command{Code: 310}), rule)
	if err != nil || empty.flatExt != nil || empty.ExtFields == nil {
		t.Fatalf("no fields: %+v %v", empty, err)
	}
}

func encodeBinaryHeaderOrFail(t *testing.T, c *Command) []byte {
	t.Helper()
	h, err := encodeBinaryHeader(nil, c)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A client with BinaryHeaders sends every request, whatever its SerializeType, in the binary
// header (sync, async and oneway), and reads the answers, which come back in it.
func TestClientBinaryHeaders(t *testing.T) {
	seen := make(chan byte, 3)
	srv := startServer(t, func(s *Server) {
		s.Handle(HeartBeat, func(c *Conn, req *Command) *Command {
			seen <- req.SerializeType
			return echo(c, req)
		})
	})
	cl := NewClient(ClientConfig{BinaryHeaders: true})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, srv.Addr(), NewRequest(HeartBeat, map[string]string{"v": "sync"}, []byte("b")))
	if err != nil || resp.SerializeType != SerializeRocketMQ || resp.Ext("echo") != "sync" || string(resp.Body) != "b" {
		t.Fatalf("sync: %+v %v", resp, err)
	}
	got := make(chan *Command, 1)
	if err := cl.InvokeAsync(ctx, srv.Addr(), NewRequest(HeartBeat, map[string]string{"v": "async"}, nil), time.Now().Add(10*time.Second),
		func(resp *Command, err error) { got <- resp }); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r == nil || r.Ext("echo") != "async" || r.SerializeType != SerializeRocketMQ {
		t.Fatalf("async: %+v", r)
	}
	if err := cl.InvokeOneway(ctx, srv.Addr(), NewRequest(HeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		select {
		case st := <-seen:
			if st != SerializeRocketMQ {
				t.Fatalf("request %d arrived in encoding %d", i, st)
			}
		case <-ctx.Done():
			t.Fatalf("request %d never arrived", i)
		}
	}
}
