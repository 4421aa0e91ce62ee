package integration

// Delay levels, retry and DLQ with the official Go client, on a classic broker and on a
// three-node DLedger group (broker/schedule.go, broker/sendback.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

const (
	scheduleTopic = "SCHEDULE_TOPIC_XXXX"
	// testDelayLevels: level 2 keeps RocketMQ's 5 s (the delay test), every other level is 1 s so
	// retries (levels 3 + reconsumeTimes) come back quickly.
	testDelayLevels         = "1s 5s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"
	codeGetAllDelayOffset   = 45
	codeConsumerSendMsgBack = 36
)

// TestDelayRetryDLQClassic: on a classic broker, a level-2 message is delivered 5-7 s after it
// was stored and never before; a consumer that always answers RECONSUME_LATER sees a message
// again with growing ReconsumeTimes and after maxReconsumeTimes it lands in %DLQ%<group>.
func TestDelayRetryDLQClassic(t *testing.T) {
	t.Parallel()
	c := startCluster(t, withProp("messageDelayLevel", testDelayLevels))
	t.Run("delay", func(t *testing.T) { t.Parallel(); checkDelayLevel(t, c) })
	t.Run("retry", func(t *testing.T) { t.Parallel(); checkRetryToDLQ(t, c, nil) })
	t.Run("timer", func(t *testing.T) { t.Parallel(); checkTimer(t, c) })
}

// TestDelayRetryDLQRaftGroup is TestDelayRetryDLQClassic on a three-node DLedger group, where
// deliveries and their progress are Raft entries.
func TestDelayRetryDLQRaftGroup(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, withProp("messageDelayLevel", testDelayLevels))
	leader := g.waitMaster(t, 20*time.Second, nil)
	c := g.asCluster(leader)
	t.Run("delay", func(t *testing.T) { t.Parallel(); checkDelayLevel(t, c) })
	t.Run("retry", func(t *testing.T) { t.Parallel(); checkRetryToDLQ(t, c, nil) })
	t.Run("forwarded", func(t *testing.T) { t.Parallel(); checkSendBackViaFollower(t, g, leader) })
	t.Run("timer", func(t *testing.T) { t.Parallel(); checkTimer(t, c) })
}

// checkDelayLevel sends one level-2 (5 s) message and checks when and how it arrives.
func checkDelayLevel(t *testing.T, c *cluster) {
	topic, group := uniq("Delay"), uniq("CG_DELAY")
	p := newProducer(t, c)
	sendSync(t, p, topic, "warm", 1, nil)
	type arrival struct {
		msg *primitive.MessageExt
		at  time.Time
	}
	var mu sync.Mutex
	var got []arrival
	pc := startPushConsumerWith(t, c, group, topic, all, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got = append(got, arrival{m, time.Now()})
		}
		return consumer.ConsumeSuccess, nil
	})
	eventually(t, 20*time.Second, "the consumer gets the warm-up message", func() error { return countErr("received", pc.got.count(), 1) })

	sentAt := time.Now()
	s := sendSync(t, p, topic, "delayed", 1, func(_ int, m *primitive.Message) {
		m.WithDelayTimeLevel(2)
		m.WithTag("TagD")
		m.WithKeys([]string{"key-delayed"})
	})[0]
	stored := viewByOffsetMsgID(t, c, s.offsetMsgID)
	if stored.Topic != scheduleTopic || stored.QueueID != 1 || stored.Properties["REAL_TOPIC"] != topic {
		t.Fatalf("stored delayed message: topic %s queue %d REAL_TOPIC %q; want %s queue 1 REAL_TOPIC %s",
			stored.Topic, stored.QueueID, stored.Properties["REAL_TOPIC"], scheduleTopic, topic)
	}

	var d arrival
	eventually(t, 15*time.Second, "the delayed message arrives", func() error {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range got {
			if string(a.msg.Body) == "delayed-0" {
				d = a
				return nil
			}
		}
		return fmt.Errorf("not yet (%v after the send)", time.Since(sentAt).Round(time.Millisecond))
	})
	waited := d.msg.StoreTimestamp - stored.StoreTimestamp
	t.Logf("level 2 (5 s): stored %d, delivered %d (+%d ms), received %v after the send",
		stored.StoreTimestamp, d.msg.StoreTimestamp, waited, d.at.Sub(sentAt).Round(time.Millisecond))
	if waited < 5000 || waited > 7000 {
		t.Errorf("delivered %d ms after it was stored, want 5000..7000", waited)
	}
	if early := d.at.Sub(sentAt); early < 5*time.Second-5*time.Millisecond { // store times are whole ms
		t.Errorf("received %v after the send, before its 5 s delay", early)
	}
	if d.msg.MsgId != s.msgID || d.msg.GetTags() != "TagD" || d.msg.GetKeys() != "key-delayed" || d.msg.GetProperty("DELAY") != "" {
		t.Errorf("delivered message: msgId %s tags %q keys %q DELAY %q; want msgId %s, the tag and key, no DELAY",
			d.msg.MsgId, d.msg.GetTags(), d.msg.GetKeys(), d.msg.GetProperty("DELAY"), s.msgID)
	}
	if d.msg.Topic != topic {
		t.Errorf("delivered to topic %s, want %s", d.msg.Topic, topic)
	}
	time.Sleep(1500 * time.Millisecond)
	mu.Lock()
	n := 0
	for _, a := range got {
		if string(a.msg.Body) == "delayed-0" {
			n++
		}
	}
	mu.Unlock()
	if n != 1 {
		t.Errorf("the delayed message arrived %d times, want once", n)
	}
}

// checkTimer sends a message with the Go client's WithDelayTimestamp (5.x TIMER_DELIVER_MS) 3.5 s
// ahead: it waits in the levels (1 s each here, and level 2's 5 s is never chosen for less time
// than that) and arrives at or after its time, within the shortest level's 1 s plus polling.
func checkTimer(t *testing.T, c *cluster) {
	topic, group := uniq("Timer"), uniq("CG_TIMER")
	p := newProducer(t, c)
	sendSync(t, p, topic, "warm", 1, nil)
	pc := startPushConsumer(t, c, group, topic, all)
	eventually(t, 20*time.Second, "the consumer gets the warm-up message", func() error { return countErr("received", pc.got.count(), 1) })
	due := time.UnixMilli(time.Now().Add(3500 * time.Millisecond).UnixMilli()) // the property has ms
	s := sendSync(t, p, topic, "timer", 1, func(_ int, m *primitive.Message) { m.WithDelayTimestamp(due) })[0]
	var got *primitive.MessageExt
	eventually(t, 15*time.Second, "the timer message arrives", func() error {
		for _, m := range pc.got.snapshot() {
			if string(m.Body) == "timer-0" {
				got = m
				return nil
			}
		}
		return fmt.Errorf("not yet")
	})
	late := time.UnixMilli(got.StoreTimestamp).Sub(due)
	t.Logf("timer: delivered %v after its due time", late.Round(time.Millisecond))
	if late < 0 || late > 2500*time.Millisecond {
		t.Errorf("delivered %v after its due time, want 0..2.5 s", late)
	}
	// The delivered copy keeps its due time (RocketMQ 5 clients show it as the delivery timestamp).
	if want := strconv.FormatInt(due.UnixMilli(), 10); got.MsgId != s.msgID || got.GetProperty("TIMER_DELIVER_MS") != want {
		t.Errorf("delivered msgId %s TIMER_DELIVER_MS %q, want %s and %s", got.MsgId, got.GetProperty("TIMER_DELIVER_MS"), s.msgID, want)
	}
}

// checkRetryToDLQ: a consumer with maxReconsumeTimes 2 that never succeeds sees the message with
// ReconsumeTimes 0, 1, 2, then it is in %DLQ%<group> and not delivered again. midway, if not nil,
// runs once the consumer has seen ReconsumeTimes 1 (a leader kill) and returns the broker to
// read the DLQ from.
func checkRetryToDLQ(t *testing.T, c *cluster, midway func() *broker) {
	topic, group := uniq("Retry"), uniq("CG_RETRY")
	p := newProducer(t, c)
	s := sendSync(t, p, topic, "retry-me", 1, func(_ int, m *primitive.Message) { m.WithTag("TagR") })[0]
	// The broker creates %RETRY%<group> at the consumer's first heartbeat, but the client only
	// learns its route at its next 30 s route poll: create it first, as an operator would.
	createTopic(t, c, "%RETRY%"+group, 1)
	started := time.Now()
	var mu sync.Mutex
	var seen []int32
	var ids []string
	pc := startPushConsumerWith(t, c, group, topic, all, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			seen = append(seen, m.ReconsumeTimes)
			ids = append(ids, m.MsgId)
			t.Logf("consumed %s topic %s reconsumeTimes %d after %v", m.Body, m.Topic, m.ReconsumeTimes, time.Since(started).Round(time.Millisecond))
		}
		return consumer.ConsumeRetryLater, nil
	}, consumer.WithMaxReconsumeTimes(2))
	_ = pc
	reached := func(n int32) func() error {
		return func() error {
			mu.Lock()
			defer mu.Unlock()
			if slices.Contains(seen, n) {
				return nil
			}
			return fmt.Errorf("reconsume times seen so far: %v", seen)
		}
	}
	dlqFrom := c.b
	if midway != nil {
		eventually(t, 30*time.Second, "first redelivery", reached(1))
		dlqFrom = midway()
	}
	eventually(t, 60*time.Second, "redelivery with reconsumeTimes 2", reached(2))

	dlq := "%DLQ%" + group
	var recs []*record
	eventually(t, 30*time.Second, "the message in "+dlq, func() error {
		var err error
		recs, _, err = rawPull(dlqFrom.addr, uniq("READ_DLQ"), dlq, 0, 0, "*")
		if err != nil {
			return err
		}
		return countErr("DLQ records", len(recs), 1)
	})
	r := recs[0]
	if string(r.Body) != "retry-me-0" || r.Topic != dlq || r.Properties["RETRY_TOPIC"] != topic || r.Properties["UNIQ_KEY"] != s.msgID || r.Properties["TAGS"] != "TagR" {
		t.Errorf("DLQ record: body %q topic %s props %v; want the original body, RETRY_TOPIC %s, UNIQ_KEY %s, TAGS TagR", r.Body, r.Topic, r.Properties, topic, s.msgID)
	}
	if r.Properties["ORIGIN_MESSAGE_ID"] == "" || r.Properties["DELAY"] != "" {
		t.Errorf("DLQ record: ORIGIN_MESSAGE_ID %q DELAY %q; want an origin id and no delay", r.Properties["ORIGIN_MESSAGE_ID"], r.Properties["DELAY"])
	}
	time.Sleep(3 * time.Second) // a 4th delivery would come 1 s after the 3rd
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, []int32{0, 1, 2}) {
		t.Errorf("reconsume times seen %v, want [0 1 2]", seen)
	}
	for _, id := range ids {
		if id != s.msgID {
			t.Errorf("a redelivery has msgId %s, want %s", id, s.msgID)
		}
	}
	t.Logf("retry: reconsume times %v, then %s after %v", seen, dlq, time.Since(started).Round(time.Millisecond))
}

// viewByOffsetMsgID reads a stored record with VIEW_MESSAGE_BY_ID.
func viewByOffsetMsgID(t testing.TB, c *cluster, offsetMsgID string) *record {
	t.Helper()
	id, err := primitive.UnmarshalMsgID([]byte(offsetMsgID))
	if err != nil {
		t.Fatalf("decode offset msgId %q: %v", offsetMsgID, err)
	}
	addr := net.JoinHostPort(id.Addr, strconv.Itoa(id.Port))
	resp, err := rawRequest(addr, codeViewMessageByID, map[string]string{"offset": strconv.FormatInt(id.Offset, 10)}, nil, 5*time.Second)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("VIEW_MESSAGE_BY_ID %s at %s: %v %+v", offsetMsgID, addr, err, resp)
	}
	r, err := parseRecord(resp.Body)
	if err != nil {
		t.Fatalf("VIEW_MESSAGE_BY_ID body: %v", err)
	}
	return r
}

// readQueue reads one queue from offset 0 to its max offset with raw pulls.
func readQueue(addr, topic string, q int) ([]*record, error) {
	max, err := maxOffset(addr, topic, q)
	if err != nil {
		return nil, err
	}
	group := uniq("READQ")
	var out []*record
	deadline := time.Now().Add(60 * time.Second)
	for off := int64(0); off < max; {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("reading %s/%d: at %d of %d after 60 s", topic, q, off, max)
		}
		recs, next, err := rawPull(addr, group, topic, q, off, "*")
		if err != nil {
			return nil, fmt.Errorf("raw pull %s/%d@%d: %w", topic, q, off, err)
		}
		if next <= off {
			return nil, fmt.Errorf("raw pull %s/%d@%d: next %d does not advance", topic, q, off, next)
		}
		out = append(out, recs...)
		off = next
	}
	return out, nil
}

// delayOffsets reads GET_ALL_DELAY_OFFSET as level -> offset.
func delayOffsets(addr string) (map[int]int64, error) {
	resp, err := rawRequest(addr, codeGetAllDelayOffset, nil, nil, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if resp.Code != respSuccess {
		return nil, fmt.Errorf("GET_ALL_DELAY_OFFSET: code %d %q", resp.Code, resp.Remark)
	}
	var w struct {
		OffsetTable map[int]int64 `json:"offsetTable"`
	}
	if err := json.Unmarshal(resp.Body, &w); err != nil {
		return nil, fmt.Errorf("GET_ALL_DELAY_OFFSET body %q: %w", resp.Body, err)
	}
	return w.OffsetTable, nil
}

// createTopic creates topic with UPDATE_AND_CREATE_TOPIC on the cluster's broker (a DLedger
// follower forwards it) and waits for its route.
func createTopic(t testing.TB, c *cluster, topic string, queues int) {
	t.Helper()
	n := strconv.Itoa(queues)
	resp, err := rawRequest(c.b.addr, metaCodeUpdateAndCreateTopic, map[string]string{
		"topic": topic, "readQueueNums": n, "writeQueueNums": n, "perm": "6", "topicFilterType": "SINGLE_TAG",
	}, nil, 10*time.Second)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("create topic %s: %v %+v", topic, err, resp)
	}
	waitTopicRoute(t, c, topic)
}

// checkSendBackViaFollower: CONSUMER_SEND_MSG_BACK sent to a follower is forwarded to the leader
// (delayLevel -1: straight to the DLQ); bad offsets are answered SYSTEM_ERROR, nothing crashes.
func checkSendBackViaFollower(t *testing.T, g *raftGroup, leader *broker) {
	topic, group := uniq("Back"), uniq("CG_BACK")
	s := sendRawOK(t, leader.addr, topic, "back-me")
	id, err := primitive.UnmarshalMsgID([]byte(s.offsetMsgID))
	if err != nil {
		t.Fatal(err)
	}
	follower := g.followers(leader)[0]
	back := func(offset int64, delayLevel string) (*remotingCmd, error) {
		return rawRequest(follower.addr, codeConsumerSendMsgBack, map[string]string{
			"offset": strconv.FormatInt(offset, 10), "group": group, "delayLevel": delayLevel,
			"originTopic": topic, "maxReconsumeTimes": "16", "unitMode": "false",
		}, nil, 10*time.Second)
	}
	for _, off := range []int64{id.Offset + 1, 1 << 40} {
		resp, err := back(off, "0")
		if err != nil || resp.Code != respSystemError {
			t.Errorf("send-back of offset %d: %v %+v, want SYSTEM_ERROR", off, err, resp)
		}
	}
	resp, err := rawRequest(follower.addr, codeConsumerSendMsgBack, map[string]string{"offset": "x", "group": group}, nil, 10*time.Second)
	if err != nil || resp.Code == respSuccess {
		t.Errorf("send-back with a bad header: %v %+v, want an error", err, resp)
	}
	resp, err = back(id.Offset, "-1")
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("send-back through the follower: %v %+v", err, resp)
	}
	dlq := "%DLQ%" + group
	recs, err := readQueue(leader.addr, dlq, 0)
	if err != nil || len(recs) != 1 || string(recs[0].Body) != "back-me" || recs[0].Properties["RETRY_TOPIC"] != topic {
		t.Fatalf("%s on the leader: %v %+v", dlq, err, recs)
	}
}
