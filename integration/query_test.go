package integration

import (
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestQueryByKeyAndViewByID (h): a message can be found by one of its keys (QUERY_MESSAGE, 12),
// by its client message id (QUERY_MESSAGE with _UNIQUE_KEY_QUERY=true) and by its offset
// message id (VIEW_MESSAGE_BY_ID, 33). The Go client has no public API for either request
// (its admin package lacks them; the codes exist only in its internal package), so the
// requests are raw frames and the returned stored records are decoded by the test.
//
// The offset msgId returned by the send must be 32 hex characters naming the broker's
// brokerIP1:listenPort and the record's commitlog offset. The index is built asynchronously,
// so the queries are retried for a few seconds. A key that was never sent must give
// QUERY_NOT_FOUND (22).
func TestQueryByKeyAndViewByID(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	topic := uniq("Query")
	p := newProducer(t, c)
	// Some neighbours, so a lookup that ignores the key would be noticed.
	sendSync(t, p, topic, "noise", 10, func(i int, m *primitive.Message) {
		m.WithKeys([]string{fmt.Sprintf("noise-key-%d", i)})
	})
	target := sendSync(t, p, topic, "target", 1, func(_ int, m *primitive.Message) {
		m.WithKeys([]string{"order-4711", "customer-42"})
		m.WithTag("Q")
	})[0]
	t.Logf("sent %q: msgId %s, offsetMsgId %s, queue %d offset %d", target.body, target.msgID, target.offsetMsgID, target.queue, target.offset)

	// View by offset msgId.
	if len(target.offsetMsgID) != 32 {
		t.Fatalf("offset msgId %q: want 32 hex characters (IPv4 store host)", target.offsetMsgID)
	}
	id, err := primitive.UnmarshalMsgID([]byte(target.offsetMsgID))
	if err != nil {
		t.Fatalf("decode offset msgId %q: %v", target.offsetMsgID, err)
	}
	if got := net.JoinHostPort(id.Addr, strconv.Itoa(id.Port)); got != c.b.addr {
		t.Errorf("offset msgId names store host %s, want the broker %s", got, c.b.addr)
	}
	view := func(off int64) (*remotingCmd, error) {
		return rawRequest(c.b.addr, codeViewMessageByID, map[string]string{"offset": strconv.FormatInt(off, 10)}, nil, 5*time.Second)
	}
	resp, err := view(id.Offset)
	if err != nil {
		t.Fatalf("VIEW_MESSAGE_BY_ID: %v", err)
	}
	if resp.Code != respSuccess {
		t.Fatalf("VIEW_MESSAGE_BY_ID offset %d: code %d %q", id.Offset, resp.Code, resp.Remark)
	}
	recs, err := parseRecords(resp.Body)
	if err != nil || len(recs) != 1 {
		t.Fatalf("VIEW_MESSAGE_BY_ID body: %d records, %v", len(recs), err)
	}
	checkTarget(t, "view", recs[0], target, topic, id.Offset)

	if resp, err := view(id.Offset + 1<<30); err != nil || resp.Code == respSuccess {
		t.Errorf("VIEW_MESSAGE_BY_ID of an offset past the end: err %v, response %+v; want an error code", err, resp)
	}

	// Query by each user key, and by the client message id.
	queries := []struct {
		key  string
		uniq bool
	}{{"order-4711", false}, {"customer-42", false}, {target.msgID, true}}
	for _, q := range queries {
		var found *record
		eventually(t, 15*time.Second, fmt.Sprintf("QUERY_MESSAGE %q finds the message", q.key), func() error {
			recs, code, err := queryMessage(c.b.addr, topic, q.key, q.uniq)
			if err != nil {
				return err
			}
			if code != respSuccess {
				return fmt.Errorf("code %d", code)
			}
			for _, r := range recs {
				if bytes.Equal(r.Body, []byte(target.body)) {
					found = r
					return nil
				}
			}
			return fmt.Errorf("%d records returned, none is %q", len(recs), target.body)
		})
		checkTarget(t, "query "+q.key, found, target, topic, id.Offset)
	}

	if recs, code, err := queryMessage(c.b.addr, topic, "never-sent-key", false); err != nil || code != respQueryNotFound {
		t.Errorf("QUERY_MESSAGE of an unknown key: code %d, %d records, err %v; want %d QUERY_NOT_FOUND", code, len(recs), err, respQueryNotFound)
	}
}

// queryMessage sends QUERY_MESSAGE over the last hour and decodes the returned records.
func queryMessage(addr, topic, key string, uniqKey bool) ([]*record, int, error) {
	now := time.Now()
	resp, err := rawRequest(addr, codeQueryMessage, map[string]string{
		"topic":             topic,
		"key":               key,
		"maxNum":            "32",
		"beginTimestamp":    strconv.FormatInt(now.Add(-time.Hour).UnixMilli(), 10),
		"endTimestamp":      strconv.FormatInt(now.Add(time.Hour).UnixMilli(), 10),
		"_UNIQUE_KEY_QUERY": strconv.FormatBool(uniqKey),
	}, nil, 5*time.Second)
	if err != nil {
		return nil, 0, err
	}
	if resp.Code != respSuccess {
		return nil, resp.Code, nil
	}
	recs, err := parseRecords(resp.Body)
	return recs, resp.Code, err
}

// checkTarget compares a returned stored record with what was sent.
func checkTarget(t *testing.T, how string, r *record, s sent, topic string, phyOffset int64) {
	t.Helper()
	if r == nil {
		t.Errorf("%s: no record", how)
		return
	}
	if string(r.Body) != s.body || r.Topic != topic {
		t.Errorf("%s: got %q in %q, want %q in %q", how, r.Body, r.Topic, s.body, topic)
	}
	if r.PhysicalOffset != phyOffset {
		t.Errorf("%s: record says commitlog offset %d, msgId says %d", how, r.PhysicalOffset, phyOffset)
	}
	if int(r.QueueID) != s.queue || r.QueueOffset != s.offset {
		t.Errorf("%s: record at queue %d offset %d, send reported queue %d offset %d", how, r.QueueID, r.QueueOffset, s.queue, s.offset)
	}
	if keys := strings.Fields(r.Properties["KEYS"]); len(keys) != 2 || keys[0] != "order-4711" || keys[1] != "customer-42" {
		t.Errorf("%s: KEYS property %q", how, r.Properties["KEYS"])
	}
	if r.Properties["UNIQ_KEY"] != s.msgID {
		t.Errorf("%s: UNIQ_KEY %q, send reported msgId %q", how, r.Properties["UNIQ_KEY"], s.msgID)
	}
	if r.BodyCRC != bodyCRC(r.Body) {
		t.Errorf("%s: BODYCRC %d, want %d", how, r.BodyCRC, bodyCRC(r.Body))
	}
	if r.StoreHost != s.storeHost() {
		t.Errorf("%s: store host %s, want %s", how, r.StoreHost, s.storeHost())
	}
}

// storeHost decodes the store host from the offset msgId.
func (s sent) storeHost() string {
	id, err := primitive.UnmarshalMsgID([]byte(s.offsetMsgID))
	if err != nil {
		return "?"
	}
	return net.JoinHostPort(id.Addr, strconv.Itoa(id.Port))
}
