package integration

import (
	"encoding/binary"
	"strconv"
	"testing"
	"time"
)

// encodeBinaryRequest builds a request frame with a ROCKETMQ binary header (remoting/doc.go:
// code int16, language byte, version int16, opaque int32, flag int32, remark and extFields
// length-prefixed), as a Java client sends it with rocketmq.serialize.type=ROCKETMQ. Fields are
// written in the order given (key, value, key, value, ...).
func encodeBinaryRequest(code int, opaque int32, fields []string, body []byte) []byte {
	h := binary.BigEndian.AppendUint16(nil, uint16(code))
	h = append(h, 0) // JAVA
	h = binary.BigEndian.AppendUint16(h, 317)
	h = binary.BigEndian.AppendUint32(h, uint32(opaque))
	h = binary.BigEndian.AppendUint32(h, 0) // a request
	h = binary.BigEndian.AppendUint32(h, 0) // no remark
	var ext []byte
	for i := 0; i+1 < len(fields); i += 2 {
		ext = binary.BigEndian.AppendUint16(ext, uint16(len(fields[i])))
		ext = append(ext, fields[i]...)
		ext = binary.BigEndian.AppendUint32(ext, uint32(len(fields[i+1])))
		ext = append(ext, fields[i+1]...)
	}
	h = binary.BigEndian.AppendUint32(h, uint32(len(ext)))
	return frame(1, append(h, ext...), body)
}

// TestBinaryHeaderSend: a broker process takes sends whose header is RocketMQ's binary
// encoding, SEND_MESSAGE (long field names) and SEND_MESSAGE_V2 (one-letter names, a field
// repeated: the later counts, as in a JSON object), answers each SEND_OK in the same encoding,
// and stores exactly what was sent. A binary send with a field of the wrong kind is refused
// with an error answer, not taken.
func TestBinaryHeaderSend(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	topic := uniq("BinaryHeader")
	conn, err := dialRemoting(c.b.addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	send := func(code int, fields []string, body string) *remotingCmd {
		t.Helper()
		opaque := rawOpaque.Add(1)
		if _, err := conn.Write(encodeBinaryRequest(code, opaque, fields, []byte(body))); err != nil {
			t.Fatal(err)
		}
		for {
			resp, err := readFrame(conn)
			if err != nil {
				t.Fatalf("send code %d: %v", code, err)
			}
			if resp.Flag&1 == 1 && resp.Opaque == opaque {
				return resp
			}
		}
	}
	born := strconv.FormatInt(time.Now().UnixMilli(), 10)
	sends := []struct {
		code   int
		fields []string
		body   string
		props  map[string]string
	}{
		{codeSendMessage, []string{
			"producerGroup", "BIN_PRODUCER", "topic", topic, "defaultTopic", "TBW102", "defaultTopicQueueNums", "4",
			"queueId", "0", "sysFlag", "0", "bornTimestamp", born, "flag", "0",
			"properties", props("TAGS", "long", "KEYS", "k1", "WAIT", "true"), "reconsumeTimes", "0", "unitMode", "false", "batch", "false",
		}, "binary v1", map[string]string{"TAGS": "long", "KEYS": "k1"}},
		{310, []string{
			"a", "BIN_PRODUCER", "b", topic, "c", "TBW102", "d", "4", "e", "1", "f", "0", "g", born, "h", "0",
			"i", props("TAGS", "short", "UNIQ_KEY", "0A0000010000000000000000000000AB", "WAIT", "true"), "j", "0", "k", "false", "m", "false",
			"e", "0", // repeated: the later queue id is the one that counts
		}, "binary v2", map[string]string{"TAGS": "short", "UNIQ_KEY": "0A0000010000000000000000000000AB"}},
	}
	for _, s := range sends {
		var resp *remotingCmd
		deadline := time.Now().Add(30 * time.Second)
		for { // the topic's first send may meet a route still being created
			resp = send(s.code, s.fields, s.body)
			if resp.Code == respSuccess || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if resp.Code != respSuccess || resp.Serialize != 1 {
			t.Fatalf("code %d send: answered code %d %q in encoding %d, want SEND_OK in the binary one", s.code, resp.Code, resp.Remark, resp.Serialize)
		}
		if resp.ExtFields["queueId"] != "0" || resp.ExtFields["msgId"] == "" || resp.ExtFields["queueOffset"] == "" {
			t.Fatalf("code %d send: answer fields %v", s.code, resp.ExtFields)
		}
	}
	bad := send(310, []string{"a", "BIN_PRODUCER", "b", topic, "e", "zero", "f", "0", "g", born, "h", "0", "i", "", "j", "0", "k", "false"}, "refused")
	if bad.Code == respSuccess || bad.Remark == "" {
		t.Fatalf("a queue id that is not a number: answered code %d %q", bad.Code, bad.Remark)
	}

	recs := flatten(readAll(t, c, topic))
	if len(recs) != len(sends) {
		t.Fatalf("stored %d records, want %d", len(recs), len(sends))
	}
	for i, s := range sends {
		r := recs[i]
		if string(r.Body) != s.body || r.Topic != topic || r.QueueID != 0 || r.QueueOffset != int64(i) {
			t.Errorf("record %d: %q topic %s queue %d offset %d, want %q on %s/0 at %d", i, r.Body, r.Topic, r.QueueID, r.QueueOffset, s.body, topic, i)
		}
		for k, v := range s.props {
			if r.Properties[k] != v {
				t.Errorf("record %d: property %s = %q, want %q (all: %v)", i, k, r.Properties[k], v, r.Properties)
			}
		}
	}
}
