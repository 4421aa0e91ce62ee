package integration

// A tiny remoting client for requests the Go client does not expose (QUERY_MESSAGE,
// VIEW_MESSAGE_BY_ID, GET_MAX_OFFSET, QUERY_CONSUMER_OFFSET, route checks) and for malformed
// input. It is deliberately independent of remoting/ and protocol/, which are written
// concurrently: these tests check the wire behaviour, not our codec.
//
// Frame (protocol notes §1.2-1.4), all big-endian:
//
//	| length int32 = 4 + headerLen + bodyLen | serializeType<<24 | headerLen | header | body |
//
// Requests always use a JSON header; responses are decoded from JSON (type 0) or ROCKETMQ
// binary (type 1).

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Request and response codes used by the tests (protocol notes §2, §3).
const (
	codeSendMessage         = 10
	codePullMessage         = 11
	codeQueryMessage        = 12
	codeQueryConsumerOffset = 14
	codeGetMaxOffset        = 30
	codeViewMessageByID     = 33
	codeGetRouteInfo        = 105

	respSuccess            = 0
	respSystemError        = 1
	respNotSupported       = 3
	respMessageIllegal     = 13
	respPullNotFound       = 19
	respPullRetryImmediate = 20
	respQueryNotFound      = 22
)

// remotingCmd is a decoded frame.
type remotingCmd struct {
	Code      int               `json:"code"`
	Language  string            `json:"language"`
	Version   int               `json:"version"`
	Opaque    int32             `json:"opaque"`
	Flag      int               `json:"flag"`
	Remark    string            `json:"remark"`
	ExtFields map[string]string `json:"extFields"`
	Body      []byte            `json:"-"`
	Serialize byte              `json:"-"` // the frame's header encoding: 0 JSON, 1 ROCKETMQ binary
}

var rawOpaque atomic.Int32

// encodeRequest builds a JSON-header request frame.
func encodeRequest(code int, opaque int32, ext map[string]string, body []byte) []byte {
	h := map[string]any{
		"code": code, "language": "GO", "version": 317, "opaque": opaque, "flag": 0, "remark": "",
	}
	if ext != nil {
		h["extFields"] = ext
	}
	header, _ := json.Marshal(h)
	return frame(0, header, body)
}

// frame assembles length, header word, header and body.
func frame(serializeType byte, header, body []byte) []byte {
	buf := make([]byte, 8, 8+len(header)+len(body))
	binary.BigEndian.PutUint32(buf[0:], uint32(4+len(header)+len(body)))
	binary.BigEndian.PutUint32(buf[4:], uint32(serializeType)<<24|uint32(len(header))&0xFFFFFF)
	buf = append(buf, header...)
	return append(buf, body...)
}

// readFrame reads and decodes one frame. Frames over 64 MiB are refused.
func readFrame(r io.Reader) (*remotingCmd, error) {
	var lenBuf [4]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(lenBuf[:])
	if n < 4 || n > 64<<20 {
		return nil, fmt.Errorf("response frame length %d out of range", n)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, fmt.Errorf("short response frame: %w", err)
	}
	word := binary.BigEndian.Uint32(data)
	hlen := int(word & 0xFFFFFF)
	if 4+hlen > len(data) {
		return nil, fmt.Errorf("response header length %d exceeds frame %d", hlen, n)
	}
	header := data[4 : 4+hlen]
	var cmd remotingCmd
	switch word >> 24 {
	case 0:
		if err := json.Unmarshal(header, &cmd); err != nil {
			return nil, fmt.Errorf("response JSON header %q: %w (extFields values must be strings)", header, err)
		}
	case 1:
		if err := decodeBinaryHeader(header, &cmd); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown serialize type %d", word>>24)
	}
	cmd.Body = data[4+hlen:]
	cmd.Serialize = byte(word >> 24)
	return &cmd, nil
}

// decodeBinaryHeader decodes a ROCKETMQ-serialized header (§1.5).
func decodeBinaryHeader(h []byte, cmd *remotingCmd) error {
	if len(h) < 21 {
		return fmt.Errorf("binary header too short (%d)", len(h))
	}
	cmd.Code = int(int16(binary.BigEndian.Uint16(h[0:])))
	cmd.Version = int(int16(binary.BigEndian.Uint16(h[3:])))
	cmd.Opaque = int32(binary.BigEndian.Uint32(h[5:]))
	cmd.Flag = int(binary.BigEndian.Uint32(h[9:]))
	rl := int(binary.BigEndian.Uint32(h[13:]))
	p := 17
	if rl < 0 || p+rl+4 > len(h) {
		return fmt.Errorf("binary header remark length %d out of range", rl)
	}
	cmd.Remark = string(h[p : p+rl])
	p += rl
	el := int(binary.BigEndian.Uint32(h[p:]))
	p += 4
	if el < 0 || p+el > len(h) {
		return fmt.Errorf("binary header ext length %d out of range", el)
	}
	cmd.ExtFields = map[string]string{}
	end := p + el
	for p < end {
		if p+2 > end {
			return errors.New("binary header: truncated key length")
		}
		kl := int(binary.BigEndian.Uint16(h[p:]))
		p += 2
		if p+kl+4 > end {
			return errors.New("binary header: truncated key")
		}
		k := string(h[p : p+kl])
		p += kl
		vl := int(binary.BigEndian.Uint32(h[p:]))
		p += 4
		if vl < 0 || p+vl > end {
			return errors.New("binary header: truncated value")
		}
		cmd.ExtFields[k] = string(h[p : p+vl])
		p += vl
	}
	return nil
}

// rawRequest dials addr, sends one request and returns the response with the same opaque.
func rawRequest(addr string, code int, ext map[string]string, body []byte, timeout time.Duration) (*remotingCmd, error) {
	c, err := dialRemoting(addr, timeout) // TLS to ports started with it (tls_test.go)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	return roundTrip(c, code, ext, body)
}

// roundTrip sends one request on c and reads frames until the matching response.
func roundTrip(c net.Conn, code int, ext map[string]string, body []byte) (*remotingCmd, error) {
	opaque := rawOpaque.Add(1)
	if _, err := c.Write(encodeRequest(code, opaque, ext, body)); err != nil {
		return nil, err
	}
	for {
		resp, err := readFrame(c)
		if err != nil {
			return nil, fmt.Errorf("request code %d: %w", code, err)
		}
		if resp.Flag&1 == 1 && resp.Opaque == opaque {
			return resp, nil
		}
		// a broker-initiated request or a stale response: ignore it
	}
}

// routeHasBroker checks that the name server at nsAddr returns a route for topic naming
// brokerAddr. (The route JSON may use fastjson's unquoted integer keys, so it is searched,
// not parsed.)
func routeHasBroker(nsAddr, topic, brokerAddr string) error {
	resp, err := rawRequest(nsAddr, codeGetRouteInfo, map[string]string{"topic": topic}, nil, 3*time.Second)
	if err != nil {
		return fmt.Errorf("route query for %s at %s: %w", topic, nsAddr, err)
	}
	if resp.Code != respSuccess {
		return fmt.Errorf("route query for %s: code %d %q", topic, resp.Code, resp.Remark)
	}
	if !bytes.Contains(resp.Body, []byte(`"`+brokerAddr+`"`)) {
		return fmt.Errorf("route for %s does not name broker %s: %s", topic, brokerAddr, resp.Body)
	}
	return nil
}

// queueCount reads the topic's readQueueNums from the name server's route (searched, not
// parsed, like routeHasBroker).
func queueCount(nsAddr, topic string) (int, error) {
	resp, err := rawRequest(nsAddr, codeGetRouteInfo, map[string]string{"topic": topic}, nil, 3*time.Second)
	if err != nil {
		return 0, err
	}
	if resp.Code != respSuccess {
		return 0, fmt.Errorf("route query for %s: code %d %q", topic, resp.Code, resp.Remark)
	}
	n := 0
	for _, m := range readQueueNumsRE.FindAllSubmatch(resp.Body, -1) {
		v, _ := strconv.Atoi(string(m[1]))
		n = max(n, v)
	}
	if n == 0 {
		return 0, fmt.Errorf("route of %s has no readQueueNums: %s", topic, resp.Body)
	}
	return n, nil
}

// routedQueues is queueCount once the name server routes topic, waiting up to 20 s: a topic
// created by a send (from TBW102's route) is routed only after the broker's next registration,
// which is coalesced (metadataFlushIntervalMs).
func routedQueues(t testing.TB, nsAddr, topic string) int {
	t.Helper()
	var n int
	eventually(t, 20*time.Second, "route of "+topic+" with its queues", func() error {
		var err error
		n, err = queueCount(nsAddr, topic)
		return err
	})
	return n
}

var readQueueNumsRE = regexp.MustCompile(`"readQueueNums"\s*:\s*(\d+)`)

// readAll reads every stored message of topic with raw PULL_MESSAGE requests (subscription
// "*", no long polling), queue by queue from offset 0 up to the queue's GET_MAX_OFFSET. The
// result maps queue id to records in offset order.
func readAll(t testing.TB, c *cluster, topic string) map[int][]*record {
	t.Helper()
	waitTopicRoute(t, c, topic)
	n := routedQueues(t, c.ns.addr, topic)
	group := uniq("READALL")
	out := map[int][]*record{}
	deadline := time.Now().Add(60 * time.Second)
	for q := range n {
		max, err := maxOffset(c.b.addr, topic, q)
		if err != nil {
			t.Fatalf("max offset of %s/%d: %v", topic, q, err)
		}
		for off := int64(0); off < max; {
			if time.Now().After(deadline) {
				t.Fatalf("reading %s/%d: still at offset %d of %d after 60s", topic, q, off, max)
			}
			recs, next, err := rawPull(c.b.addr, group, topic, q, off, "*")
			if err != nil {
				t.Fatalf("raw pull %s/%d@%d: %v", topic, q, off, err)
			}
			if next <= off {
				t.Fatalf("raw pull %s/%d@%d (max %d): nextBeginOffset %d does not advance", topic, q, off, max, next)
			}
			out[q] = append(out[q], recs...)
			off = next
		}
	}
	return out
}

// flatten lists the records of all queues.
func flatten(m map[int][]*record) []*record {
	var out []*record
	for _, q := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[q]...)
	}
	return out
}

// maxOffset asks the broker for GET_MAX_OFFSET of one queue (next offset to be written).
func maxOffset(brokerAddr, topic string, queueID int) (int64, error) {
	resp, err := rawRequest(brokerAddr, codeGetMaxOffset,
		map[string]string{"topic": topic, "queueId": strconv.Itoa(queueID)}, nil, 5*time.Second)
	if err != nil {
		return 0, err
	}
	if resp.Code != respSuccess {
		return 0, fmt.Errorf("GET_MAX_OFFSET %s/%d: code %d %q", topic, queueID, resp.Code, resp.Remark)
	}
	return strconv.ParseInt(resp.ExtFields["offset"], 10, 64)
}

// consumerOffset asks the broker for the committed offset of a group on one queue; found is
// false for QUERY_NOT_FOUND.
func consumerOffset(brokerAddr, group, topic string, queueID int) (off int64, found bool, err error) {
	resp, err := rawRequest(brokerAddr, codeQueryConsumerOffset, map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(queueID),
	}, nil, 5*time.Second)
	if err != nil {
		return 0, false, err
	}
	switch resp.Code {
	case respSuccess:
		off, err := strconv.ParseInt(resp.ExtFields["offset"], 10, 64)
		return off, true, err
	case respQueryNotFound:
		return 0, false, nil
	}
	return 0, false, fmt.Errorf("QUERY_CONSUMER_OFFSET: code %d %q", resp.Code, resp.Remark)
}

// sendRaw sends a SEND_MESSAGE (10, long header names) request and returns the response.
func sendRaw(addr, topic string, queueID int, body []byte, properties string) (*remotingCmd, error) {
	ext := map[string]string{
		"producerGroup":         "RAW_TEST_PRODUCER",
		"topic":                 topic,
		"defaultTopic":          "TBW102",
		"defaultTopicQueueNums": "4",
		"queueId":               strconv.Itoa(queueID),
		"sysFlag":               "0",
		"bornTimestamp":         strconv.FormatInt(time.Now().UnixMilli(), 10),
		"flag":                  "0",
		"properties":            properties,
		"reconsumeTimes":        "0",
		"unitMode":              "false",
		"batch":                 "false",
	}
	return rawRequest(addr, codeSendMessage, ext, body, 10*time.Second)
}

// props renders a properties string (§5.1): name \x01 value \x02 for each pair.
func props(kv ...string) string {
	var sb strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		sb.WriteString(kv[i] + "\x01" + kv[i+1] + "\x02")
	}
	return sb.String()
}

// ---- stored message records (§5.4) ----

const (
	magicV1    = 0xDAA320A7
	magicV2    = 0xDAA320AB
	magicBlank = 0xCBD43194
)

// record is a decoded commitlog record (also the pull/query/view body format).
type record struct {
	TotalSize      int32
	Magic          uint32
	BodyCRC        int32
	QueueID        int32
	Flag           int32
	QueueOffset    int64
	PhysicalOffset int64
	SysFlag        int32
	BornTimestamp  int64
	StoreTimestamp int64
	StoreHost      string
	Body           []byte
	Topic          string
	Properties     map[string]string
}

// parseRecord decodes the record at the start of b. It never reads past b.
func parseRecord(b []byte) (*record, error) {
	rd := &reader{b: b}
	r := &record{}
	r.TotalSize = rd.i32()
	r.Magic = uint32(rd.i32())
	if rd.err == nil && r.Magic != magicV1 && r.Magic != magicV2 {
		return r, fmt.Errorf("bad magic %#x", r.Magic)
	}
	if rd.err == nil && (r.TotalSize < 0 || int(r.TotalSize) > len(b)) {
		return r, fmt.Errorf("total size %d exceeds the %d bytes available", r.TotalSize, len(b))
	}
	r.BodyCRC = rd.i32()
	r.QueueID = rd.i32()
	r.Flag = rd.i32()
	r.QueueOffset = rd.i64()
	r.PhysicalOffset = rd.i64()
	r.SysFlag = rd.i32()
	r.BornTimestamp = rd.i64()
	rd.host(r.SysFlag&0x10 != 0)
	r.StoreTimestamp = rd.i64()
	r.StoreHost = rd.host(r.SysFlag&0x20 != 0)
	rd.i32() // reconsume times
	rd.i64() // prepared transaction offset
	r.Body = rd.bytes(int(rd.i32()))
	var tl int
	if r.Magic == magicV2 {
		tl = int(uint16(rd.i16()))
	} else {
		tl = int(rd.u8())
	}
	r.Topic = string(rd.bytes(tl))
	r.Properties = parseProps(string(rd.bytes(int(uint16(rd.i16())))))
	if rd.err != nil {
		return r, rd.err
	}
	if rd.p != int(r.TotalSize) {
		return r, fmt.Errorf("total size %d but fields add up to %d", r.TotalSize, rd.p)
	}
	return r, nil
}

// parseRecords decodes back-to-back records (a pull, query or view body).
func parseRecords(b []byte) ([]*record, error) {
	var out []*record
	for len(b) > 0 {
		r, err := parseRecord(b)
		if err != nil {
			return out, fmt.Errorf("record %d: %w", len(out), err)
		}
		out = append(out, r)
		b = b[r.TotalSize:]
	}
	return out, nil
}

// bodyCRC is RocketMQ's CRC: CRC-32 (IEEE) masked to 31 bits (§5.7).
func bodyCRC(b []byte) int32 { return int32(crc32.ChecksumIEEE(b) & 0x7FFFFFFF) }

// javaHash is Java's String.hashCode over UTF-16 code units (tags codes, §6.3).
func javaHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

func parseProps(s string) map[string]string {
	m := map[string]string{}
	for _, pair := range strings.Split(s, "\x02") {
		if k, v, ok := strings.Cut(pair, "\x01"); ok && k != "" {
			m[k] = v
		}
	}
	return m
}

// reader is a bounds-checked big-endian cursor; the first overrun sets err.
type reader struct {
	b   []byte
	p   int
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || r.p+n > len(r.b) {
		r.err = fmt.Errorf("field of %d bytes at %d overruns %d bytes", n, r.p, len(r.b))
		return nil
	}
	v := r.b[r.p : r.p+n]
	r.p += n
	return v
}

func (r *reader) u8() byte {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) i16() int16 {
	if b := r.take(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *reader) i32() int32 {
	if b := r.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *reader) i64() int64 {
	if b := r.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (r *reader) bytes(n int) []byte { return r.take(n) }

// host reads an address: 4-byte IPv4 (or 16-byte IPv6) followed by a 4-byte port.
func (r *reader) host(v6 bool) string {
	n := 4
	if v6 {
		n = 16
	}
	ip := net.IP(append([]byte(nil), r.take(n)...))
	port := r.i32()
	return net.JoinHostPort(ip.String(), strconv.Itoa(int(port)))
}
