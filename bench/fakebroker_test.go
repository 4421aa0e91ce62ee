package bench

// A minimal in-memory name server + broker speaking the RocketMQ remoting
// protocol (JSON headers), just enough for the official Go client's
// producer, push consumer and pull consumer, so that the benchmark's use of
// the client can be tested end to end without a real broker. It listens on
// 127.0.0.1 only and serves both roles on one port.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type fakeCmd struct {
	Code      int16             `json:"code"`
	Language  string            `json:"language"`
	Version   int16             `json:"version"`
	Opaque    int32             `json:"opaque"`
	Flag      int32             `json:"flag"`
	Remark    string            `json:"remark,omitempty"`
	ExtFields map[string]string `json:"extFields,omitempty"`
	Body      []byte            `json:"-"`
}

type fakeQueue struct {
	msgs [][]byte // encoded MessageExt records
}

type fakeBroker struct {
	t      testing.TB
	ln     net.Listener
	addr   string
	queues int

	mu        sync.Mutex
	topics    map[string][]*fakeQueue
	offsets   map[string]int64 // group|topic|queue -> committed offset
	consumers map[string]map[string]bool
	phys      int64
	created   []string // topic/readQueues/writeQueues of create requests

	stored  atomic.Int64 // messages stored
	sendReq atomic.Int64 // send requests
	closed  atomic.Bool
	conns   sync.WaitGroup
}

func newFakeBroker(t testing.TB, queues int) *fakeBroker {
	return newFakeBrokerAt(t, "127.0.0.1:0", queues)
}

func newFakeBrokerAt(t testing.TB, addr string, queues int) *fakeBroker {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBroker{
		t: t, ln: ln, addr: ln.Addr().String(), queues: queues,
		topics:    make(map[string][]*fakeQueue),
		offsets:   make(map[string]int64),
		consumers: make(map[string]map[string]bool),
	}
	go b.serve()
	t.Cleanup(b.close)
	return b
}

func (b *fakeBroker) close() {
	b.closed.Store(true)
	b.ln.Close()
}

func (b *fakeBroker) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		go b.handleConn(c)
	}
}

func (b *fakeBroker) handleConn(c net.Conn) {
	defer c.Close()
	var wmu sync.Mutex
	write := func(resp *fakeCmd) {
		hdr, _ := json.Marshal(resp)
		frame := make([]byte, 8, 8+len(hdr)+len(resp.Body))
		binary.BigEndian.PutUint32(frame[0:], uint32(4+len(hdr)+len(resp.Body)))
		binary.BigEndian.PutUint32(frame[4:], uint32(len(hdr))) // JSON codec
		frame = append(frame, hdr...)
		frame = append(frame, resp.Body...)
		wmu.Lock()
		_, _ = c.Write(frame)
		wmu.Unlock()
	}
	var lenBuf [4]byte
	for {
		if _, err := io.ReadFull(c, lenBuf[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(lenBuf[:])
		data := make([]byte, n)
		if _, err := io.ReadFull(c, data); err != nil {
			return
		}
		hl := binary.BigEndian.Uint32(data[0:4]) & 0xFFFFFF
		req := &fakeCmd{}
		if err := json.Unmarshal(data[4:4+hl], req); err != nil {
			b.t.Errorf("fake broker: bad header: %v", err)
			return
		}
		req.Body = data[4+hl:]
		go func() {
			resp := b.handle(req)
			if resp == nil || req.Flag&2 != 0 { // oneway: no response
				return
			}
			resp.Opaque = req.Opaque
			resp.Flag = 1
			resp.Language = "JAVA"
			write(resp)
		}()
	}
}

func ok(ext map[string]string, body []byte) *fakeCmd {
	return &fakeCmd{Code: 0, ExtFields: ext, Body: body}
}

func (b *fakeBroker) topic(name string) []*fakeQueue {
	qs, found := b.topics[name]
	if !found {
		qs = make([]*fakeQueue, b.queues)
		for i := range qs {
			qs[i] = &fakeQueue{}
		}
		b.topics[name] = qs
	}
	return qs
}

func (b *fakeBroker) handle(req *fakeCmd) *fakeCmd {
	ext := req.ExtFields
	switch req.Code {
	case 105: // GET_ROUTEINFO_BY_TOPIC: every topic exists
		body := fmt.Sprintf(`{"queueDatas":[{"brokerName":"fake","readQueueNums":%d,"writeQueueNums":%d,"perm":6,"topicSynFlag":0}],`+
			`"brokerDatas":[{"brokerName":"fake","cluster":"c","brokerAddrs":{"0":"%s"}}]}`, b.queues, b.queues, b.addr)
		return ok(nil, []byte(body))
	case 34: // HEARTBEAT
		var hb struct {
			ClientID  string `json:"clientID"`
			Consumers []struct {
				GroupName string `json:"groupName"`
			} `json:"consumerDataSet"`
		}
		_ = json.Unmarshal(req.Body, &hb)
		b.mu.Lock()
		for _, c := range hb.Consumers {
			if b.consumers[c.GroupName] == nil {
				b.consumers[c.GroupName] = make(map[string]bool)
			}
			b.consumers[c.GroupName][hb.ClientID] = true
		}
		b.mu.Unlock()
		return ok(nil, nil)
	case 38: // GET_CONSUMER_LIST_BY_GROUP
		b.mu.Lock()
		var ids []string
		for id := range b.consumers[ext["consumerGroup"]] {
			ids = append(ids, id)
		}
		b.mu.Unlock()
		body, _ := json.Marshal(map[string][]string{"consumerIdList": ids})
		return ok(nil, body)
	case 10, 310, 320: // SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE
		return b.send(req)
	case 14: // QUERY_CONSUMER_OFFSET
		b.mu.Lock()
		off, found := b.offsets[ext["consumerGroup"]+"|"+ext["topic"]+"|"+ext["queueId"]]
		b.mu.Unlock()
		if !found {
			return &fakeCmd{Code: 22, Remark: "not found"}
		}
		return ok(map[string]string{"offset": strconv.FormatInt(off, 10)}, nil)
	case 15: // UPDATE_CONSUMER_OFFSET
		off, _ := strconv.ParseInt(ext["commitOffset"], 10, 64)
		b.mu.Lock()
		b.offsets[ext["consumerGroup"]+"|"+ext["topic"]+"|"+ext["queueId"]] = off
		b.mu.Unlock()
		return ok(nil, nil)
	case 30: // GET_MAX_OFFSET
		q, _ := strconv.Atoi(ext["queueId"])
		b.mu.Lock()
		n := len(b.topic(ext["topic"])[q%b.queues].msgs)
		b.mu.Unlock()
		return ok(map[string]string{"offset": strconv.Itoa(n)}, nil)
	case 11: // PULL_MESSAGE
		return b.pull(req)
	case 17: // UPDATE_AND_CREATE_TOPIC
		b.mu.Lock()
		b.created = append(b.created, ext["topic"]+"/"+ext["readQueueNums"]+"/"+ext["writeQueueNums"])
		b.mu.Unlock()
		return ok(nil, nil)
	default:
		return ok(nil, nil)
	}
}

func (b *fakeBroker) send(req *fakeCmd) *fakeCmd {
	b.sendReq.Add(1)
	ext := req.ExtFields
	get := func(long, short string) string {
		if v, found := ext[long]; found {
			return v
		}
		return ext[short]
	}
	topic := get("topic", "b")
	qid, _ := strconv.Atoi(get("queueId", "e"))
	born, _ := strconv.ParseInt(get("bornTimestamp", "g"), 10, 64)
	sysFlag, _ := strconv.Atoi(get("sysFlag", "f"))
	flag, _ := strconv.Atoi(get("flag", "h"))
	type one struct {
		flag  int32
		body  []byte
		props []byte
	}
	var msgs []one
	if req.Code == 320 {
		// concatenated: size, magic, crc, flag, bodyLen, body, propLen(2), props
		d := req.Body
		for len(d) >= 20 {
			size := int(binary.BigEndian.Uint32(d[0:]))
			f := int32(binary.BigEndian.Uint32(d[12:]))
			bl := int(binary.BigEndian.Uint32(d[16:]))
			body := d[20 : 20+bl]
			pl := int(binary.BigEndian.Uint16(d[20+bl:]))
			props := d[22+bl : 22+bl+pl]
			msgs = append(msgs, one{f, body, props})
			d = d[size:]
		}
	} else {
		msgs = []one{{int32(flag), req.Body, []byte(get("properties", "i"))}}
	}
	b.mu.Lock()
	q := b.topic(topic)[qid%b.queues]
	first := int64(len(q.msgs))
	for _, m := range msgs {
		q.msgs = append(q.msgs, encodeMessageExt(topic, qid, int64(len(q.msgs)), b.phys, int32(sysFlag), m.flag, born, m.body, m.props))
		b.phys += int64(len(m.body))
	}
	b.mu.Unlock()
	b.stored.Add(int64(len(msgs)))
	return ok(map[string]string{
		"msgId":       fmt.Sprintf("7F00000100002A9F%016X", first),
		"queueId":     strconv.Itoa(qid),
		"queueOffset": strconv.FormatInt(first, 10),
	}, nil)
}

func (b *fakeBroker) pull(req *fakeCmd) *fakeCmd {
	ext := req.ExtFields
	qid, _ := strconv.Atoi(ext["queueId"])
	off, _ := strconv.ParseInt(ext["queueOffset"], 10, 64)
	maxN, _ := strconv.Atoi(ext["maxMsgNums"])
	if maxN <= 0 {
		maxN = 1
	}
	topic, group := ext["topic"], ext["consumerGroup"]
	if sys, _ := strconv.Atoi(ext["sysFlag"]); sys&1 != 0 { // commit offset flag
		if c, _ := strconv.ParseInt(ext["commitOffset"], 10, 64); c > 0 {
			b.mu.Lock()
			b.offsets[group+"|"+topic+"|"+ext["queueId"]] = c
			b.mu.Unlock()
		}
	}
	deadline := time.Now().Add(100 * time.Millisecond) // short long-polling
	for {
		b.mu.Lock()
		q := b.topic(topic)[qid%b.queues]
		total := int64(len(q.msgs))
		var body []byte
		next := off
		for next < total && int(next-off) < maxN {
			body = append(body, q.msgs[next]...)
			next++
		}
		b.mu.Unlock()
		fields := map[string]string{
			"nextBeginOffset":      strconv.FormatInt(next, 10),
			"minOffset":            "0",
			"maxOffset":            strconv.FormatInt(total, 10),
			"suggestWhichBrokerId": "0",
		}
		if off > total {
			fields["nextBeginOffset"] = strconv.FormatInt(total, 10)
			return &fakeCmd{Code: 21, ExtFields: fields} // offset moved
		}
		if len(body) > 0 {
			return ok(fields, body)
		}
		if time.Now().After(deadline) || b.closed.Load() {
			return &fakeCmd{Code: 19, ExtFields: fields} // PULL_NOT_FOUND
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// encodeMessageExt encodes a stored message the way a broker returns it in
// a pull response (IPv4 hosts).
func encodeMessageExt(topic string, qid int, qoff, phys int64, sysFlag, flag int32, born int64, body, props []byte) []byte {
	var buf bytes.Buffer
	w := func(v any) { _ = binary.Write(&buf, binary.BigEndian, v) }
	size := 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + len(body) + 1 + len(topic) + 2 + len(props)
	w(int32(size))
	w(int32(-626843481)) // magic 0xDAA320A7
	w(int32(crc32.ChecksumIEEE(body)))
	w(int32(qid))
	w(flag)
	w(qoff)
	w(phys)
	w(sysFlag)
	w(born)
	buf.Write([]byte{127, 0, 0, 1})
	w(int32(5555))
	w(time.Now().UnixMilli())
	buf.Write([]byte{127, 0, 0, 1})
	w(int32(10911))
	w(int32(0))
	w(int64(0))
	w(int32(len(body)))
	buf.Write(body)
	buf.WriteByte(byte(len(topic)))
	buf.WriteString(topic)
	w(int16(len(props)))
	buf.Write(props)
	return buf.Bytes()
}

// countTopic returns how many messages topic holds.
func (b *fakeBroker) countTopic(topic string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, q := range b.topics[topic] {
		n += len(q.msgs)
	}
	return n
}

// hasTag reports whether some stored message of topic carries tag.
func (b *fakeBroker) hasTag(topic, tag string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, q := range b.topics[topic] {
		for _, m := range q.msgs {
			if strings.Contains(string(m), "TAGS\x01"+tag) {
				return true
			}
		}
	}
	return false
}

// TestServeFakeBroker serves the fake name server + broker for manual smoke
// tests of the mqbench binary, e.g.
//
//	MQBENCH_FAKE_ADDR=127.0.0.1:29876 go test ./bench -run ServeFake -v -timeout 0 &
//	mqbench produce -n 127.0.0.1:29876 -t T --duration 5s
//
// MQBENCH_FAKE_FOR bounds how long it serves (default 60s).
func TestServeFakeBroker(t *testing.T) {
	addr := os.Getenv("MQBENCH_FAKE_ADDR")
	if addr == "" {
		t.Skip("set MQBENCH_FAKE_ADDR to serve the fake broker")
	}
	d, err := time.ParseDuration(os.Getenv("MQBENCH_FAKE_FOR"))
	if err != nil {
		d = time.Minute
	}
	b := newFakeBrokerAt(t, addr, 8)
	t.Logf("fake name server + broker on %s for %s", b.addr, d)
	time.Sleep(d)
	t.Logf("stored %d messages in %d send requests", b.stored.Load(), b.sendReq.Load())
}
