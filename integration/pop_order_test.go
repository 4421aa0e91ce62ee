package integration

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Orderly POP and BATCH_ACK_MESSAGE driven with raw remoting requests, as a Java 5.x client
// would send them.

const codeBatchAckMessage = 200151

func popOrderRaw(t *testing.T, addr, group, topic string, maxNums int, invisible time.Duration) *popResult {
	t.Helper()
	ext := map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": "0", "maxMsgNums": strconv.Itoa(maxNums),
		"invisibleTime": strconv.FormatInt(invisible.Milliseconds(), 10), "pollTime": "0",
		"bornTime": strconv.FormatInt(time.Now().UnixMilli(), 10), "initMode": "0", "expType": "TAG", "exp": "*", "order": "true",
	}
	resp, err := rawRequest(addr, codePopMessage, ext, nil, 10*time.Second)
	if err != nil {
		t.Fatalf("orderly pop: %v", err)
	}
	out := &popResult{code: resp.Code, remark: resp.Remark, ext: resp.ExtFields}
	if resp.Code == respSuccess {
		if out.records, err = parseRecords(resp.Body); err != nil {
			t.Fatalf("pop body: %v", err)
		}
	}
	return out
}

// batchAckBody is RocketMQ's BatchAckMessageRequestBody for offsets of one checkpoint, the bit
// set as java.util.BitSet.toByteArray in base64.
func batchAckBody(group, topic string, popTime, start int64, offsets ...int64) []byte {
	var bits []byte
	for _, off := range offsets {
		i := off - start
		for int64(len(bits)) <= i/8 {
			bits = append(bits, 0)
		}
		bits[i/8] |= 1 << (i % 8)
	}
	body, _ := json.Marshal(map[string]any{"brokerName": "b", "acks": []map[string]any{{
		"c": group, "t": topic, "r": "0", "so": start, "q": 0, "rq": 0, "pt": popTime, "it": 0, "b": base64.StdEncoding.EncodeToString(bits),
	}}})
	return body
}

// TestPopOrderlyAndBatchAck: an orderly POP takes a batch from the queue and the next gets
// nothing while it is in flight; a batch ack of part of it leaves the queue held; when the
// rest's invisible time is over exactly those offsets come back (the orderCountInfo
// header gives each reconsumeTimes 1); once they are acked the next POP continues after them.
func TestPopOrderlyAndBatchAck(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	topic, group := uniq("PopOrder"), uniq("CG_POPORDER")
	createTopic(t, c, topic, 1)
	for i := range 8 {
		if resp, err := sendRaw(c.b.addr, topic, 0, []byte(fmt.Sprintf("o%d", i)), props("TAGS", "T")); err != nil || resp.Code != respSuccess {
			t.Fatalf("send %d: %v %+v", i, err, resp)
		}
	}
	const invisible = 2 * time.Second
	first := popOrderRaw(t, c.b.addr, group, topic, 4, invisible)
	if first.code != respSuccess || !slices.Equal(popBodies(first.records), []string{"o0", "o1", "o2", "o3"}) {
		t.Fatalf("first orderly pop: %d %q %v", first.code, first.remark, popBodies(first.records))
	}
	if f := strings.Fields(first.records[0].Properties["POP_CK"]); len(f) != 8 || f[3] != "999999" {
		t.Fatalf("POP_CK %q: want the orderly reviveQid 999999", first.records[0].Properties["POP_CK"])
	}
	if held := popOrderRaw(t, c.b.addr, group, topic, 4, invisible); held.code != respPullNotFound {
		t.Fatalf("orderly pop while o0..o3 are in flight: code %d %v", held.code, popBodies(held.records))
	}
	popTime, _ := strconv.ParseInt(first.ext["popTime"], 10, 64)
	resp, err := rawRequest(c.b.addr, codeBatchAckMessage, nil, batchAckBody(group, topic, popTime, 0, 0, 2), 10*time.Second)
	if err != nil || resp.Code != respSuccess || resp.ExtFields["ackedNum"] != "2" {
		t.Fatalf("batch ack of o0 and o2: %v %+v", err, resp)
	}
	if held := popOrderRaw(t, c.b.addr, group, topic, 4, invisible); held.code != respPullNotFound {
		t.Fatalf("orderly pop while o1 and o3 are in flight: code %d %v", held.code, popBodies(held.records))
	}
	var again *popResult
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if again = popOrderRaw(t, c.b.addr, group, topic, 4, invisible); again.code == respSuccess {
			break
		}
	}
	if again.code != respSuccess || !slices.Equal(popBodies(again.records), []string{"o1", "o3"}) {
		t.Fatalf("after the invisible time: %d %v, want o1 and o3 again", again.code, popBodies(again.records))
	}
	if oc := again.ext["orderCountInfo"]; !strings.Contains(oc, "0 qo0%1 1") || !strings.Contains(oc, "0 qo0%3 1") {
		t.Fatalf("orderCountInfo %q", oc)
	}
	popTime, _ = strconv.ParseInt(again.ext["popTime"], 10, 64)
	resp, err = rawRequest(c.b.addr, codeBatchAckMessage, nil, batchAckBody(group, topic, popTime, 1, 1, 3), 10*time.Second)
	if err != nil || resp.Code != respSuccess || resp.ExtFields["ackedNum"] != "2" {
		t.Fatalf("batch ack of o1 and o3: %v %+v", err, resp)
	}
	next := popOrderRaw(t, c.b.addr, group, topic, 4, invisible)
	if next.code != respSuccess || !slices.Equal(popBodies(next.records), []string{"o4", "o5", "o6", "o7"}) {
		t.Fatalf("after acking all: %d %v, want o4..o7", next.code, popBodies(next.records))
	}
	// A stale batch ack (the old popTime) acks nothing. Two pops within one millisecond share a
	// popTime, so the stale one is made older when they do.
	stale := popTime
	if nextTime, _ := strconv.ParseInt(next.ext["popTime"], 10, 64); nextTime == stale {
		stale--
	}
	resp, err = rawRequest(c.b.addr, codeBatchAckMessage, nil, batchAckBody(group, topic, stale, 4, 4), 10*time.Second)
	if err != nil || resp.Code != respSuccess || resp.ExtFields["ackedNum"] != "0" || resp.ExtFields["skippedNum"] != "1" {
		t.Fatalf("stale batch ack: %v %+v", err, resp)
	}
	if resp, err := rawRequest(c.b.addr, codeBatchAckMessage, nil, []byte("{not json"), 10*time.Second); err != nil || resp.Code != 13 {
		t.Fatalf("bad batch ack body: %v %+v", err, resp)
	}
}
