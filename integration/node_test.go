package integration

// The official RocketMQ 5 Node.js client (1.0.8) through mqproxy, on a classic broker and on a
// three-node DLedger group: SimpleConsumer and PushConsumer receive what Go 4.x and 5.x producers
// sent, a message whose listener fails is redelivered with a growing delivery attempt and lands in
// the group's DLQ after the group's max attempts, the Node producer's messages reach a Go
// consumer, and the offset and pull RPCs answer what the broker holds; FIFO and transactions are
// in node_fifotxn_test.go.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmq "github.com/apache/rocketmq-clients/golang/v5"
)

// Proxy RPC status codes the Node scripts report (apache.rocketmq.v2.Code).
const (
	grpcOK              = 20000
	grpcMessageNotFound = 40401
	grpcOffsetNotFound  = 40404
)

func TestNodeClient(t *testing.T) {
	for _, topo := range []string{"classic", "raft"} {
		t.Run(topo, func(t *testing.T) {
			t.Parallel()
			needNodeClient(t)
			ns := startNamesrv(t)
			var c *cluster
			var nodes []*broker
			if topo == "classic" {
				c = &cluster{ns: ns, b: startBroker(t, ns, proxyTxnProps...)}
				nodes = []*broker{c.b}
			} else {
				g := startRaftGroup(t, ns, 3, proxyTxnProps...)
				c, nodes = g.asCluster(g.waitMaster(t, 20*time.Second, nil)), g.nodes
			}
			px := startProxy(t, ns)
			p4 := newProducer(t, c)
			// One scenario after the other: each starts its own Node process.
			t.Run("SimpleConsumer", func(t *testing.T) { nodeSimpleConsumer(t, c, px, p4) })
			t.Run("PushConsumer", func(t *testing.T) { nodePushConsumer(t, c, px, p4) })
			t.Run("RetryThenDLQ", func(t *testing.T) { nodeRetryToDLQ(t, c, px, p4) })
			t.Run("ProducerAndOffsets", func(t *testing.T) { nodeProducerAndOffsets(t, c, px) })
			t.Run("Fifo", func(t *testing.T) { nodeFifo(t, c, nodes, px) })
			t.Run("Transaction", func(t *testing.T) { nodeTransaction(t, c, px, p4) })
		})
	}
}

// nodeMsg is what a test sent, to compare with what a Node consumer received.
type nodeMsg struct {
	body, id, tag, key, seq string
}

// send4x sends n messages "<label>-<i>" with a tag, a key and a property through the 4.x producer.
func send4x(t testing.TB, p rocketmq.Producer, topic, label string, n int) []nodeMsg {
	t.Helper()
	var out []nodeMsg
	for _, s := range sendSync(t, p, topic, label, n, func(i int, m *primitive.Message) {
		m.WithTag("TagN")
		m.WithKeys([]string{fmt.Sprintf("%s-k%d", label, i)})
		m.WithProperty("seq", strconv.Itoa(i))
	}) {
		i := s.body[strings.LastIndex(s.body, "-")+1:]
		out = append(out, nodeMsg{body: s.body, id: s.msgID, tag: "TagN", key: label + "-k" + i, seq: i})
	}
	return out
}

// send5x is send4x through the official 5.x Go producer (via the proxy).
func send5x(t testing.TB, p rmq.Producer, topic, label string, n int) []nodeMsg {
	t.Helper()
	var out []nodeMsg
	for i := range n {
		m := nodeMsg{body: fmt.Sprintf("%s-%d", label, i), tag: "TagN", key: fmt.Sprintf("%s-k%d", label, i), seq: strconv.Itoa(i)}
		msg := &rmq.Message{Topic: topic, Body: []byte(m.body)}
		msg.SetTag(m.tag)
		msg.SetKeys(m.key)
		msg.AddProperty("seq", m.seq)
		r, err := p.Send(context.Background(), msg)
		if err != nil || len(r) != 1 {
			t.Fatalf("5.x send %s: %v", m.body, err)
		}
		m.id = r[0].MessageID
		out = append(out, m)
	}
	return out
}

// warmUp sends warm-up messages until the Node consumer r has received one. A new group starts
// each queue where it ends at the group's first POP, so only what is sent after that is certain
// to reach it.
func warmUp(t testing.TB, p rocketmq.Producer, topic string, r *nodeRun) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("warmup-%d", i)))); err != nil {
			t.Fatalf("warm-up send: %v", err)
		}
		for _, e := range receivedEvents(r.snapshot()) {
			if strings.HasPrefix(e.Body, "warmup-") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Node consumer received no warm-up message in 60 s\n%s", r.tail())
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// checkReceivedOnce: every message in want was received exactly once with its id, tag, key and
// property, intact and on its first delivery attempt.
func checkReceivedOnce(t testing.TB, who string, want []nodeMsg, ev []nodeEvent) {
	t.Helper()
	got := map[string][]nodeEvent{}
	for _, e := range receivedEvents(ev) {
		got[e.Body] = append(got[e.Body], e)
	}
	for _, m := range want {
		es := got[m.body]
		if len(es) != 1 {
			t.Errorf("%s: %s received %d times, want once", who, m.body, len(es))
			continue
		}
		e := es[0]
		if e.ID != m.id || e.Tag != m.tag || !slices.Equal(e.Keys, []string{m.key}) || e.Props["seq"] != m.seq || e.Attempt != 1 || e.Corrupt {
			t.Errorf("%s: %s arrived as id %s tag %q keys %v props %v attempt %d corrupted %v; want id %s tag %s key %s seq %s, attempt 1",
				who, m.body, e.ID, e.Tag, e.Keys, e.Props, e.Attempt, e.Corrupt, m.id, m.tag, m.key, m.seq)
		}
	}
}

// nodeSimpleConsumer: the Node SimpleConsumer, which receives through the queues with id 0 of the
// route only, receives and acks what Go 4.x and 5.x producers sent to all four queues, each
// message once; a message it hands to ForwardMessageToDeadLetterQueue is found in the group's DLQ.
func nodeSimpleConsumer(t *testing.T, c *cluster, px *mqproxy, p4 rocketmq.Producer) {
	topic, group := uniq("NodeSC"), uniq("GNodeSC")
	createTopicBySend(t, c.ns.addr, p4, topic, "create-topic")
	r := startNode(t, "simple-consume", 90*time.Second, map[string]string{
		"endpoint": px.addr, "topic": topic, "group": group, "count": "21", "prefix": "sc", "dlq": "scdlq", "linger": "3000"})
	r.waitFor(t, 30*time.Second, "ready", func(e nodeEvent) bool { return e.Event == "ready" })
	warmUp(t, p4, topic, r)
	want := append(send4x(t, p4, topic, "sc4", 10), send5x(t, newV5Producer(t, px.addr, topic), topic, "sc5", 10)...)
	dead := send4x(t, p4, topic, "scdlq", 1)[0]
	ev := r.wait(t, 120*time.Second)
	checkReceivedOnce(t, "Node SimpleConsumer", append(want, dead), ev)
	var fw []nodeEvent
	for _, e := range ev {
		if e.Event == "result" && e.RPC == "ForwardMessageToDeadLetterQueue" {
			fw = append(fw, e)
		}
	}
	if len(fw) != 1 || fw[0].Code != grpcOK {
		t.Fatalf("ForwardMessageToDeadLetterQueue: %+v, want one OK", fw)
	}
	dlq := "%DLQ%" + group
	eventually(t, 30*time.Second, dead.body+" in "+dlq, func() error {
		recs, _, err := rawPull(c.b.addr, uniq("READ_DLQ"), dlq, 0, 0, "*")
		if err != nil {
			return err
		}
		if len(recs) != 1 || string(recs[0].Body) != dead.body || recs[0].Properties["UNIQ_KEY"] != dead.id {
			return fmt.Errorf("%s holds %v, want %s alone", dlq, recBodies(recs), dead.body)
		}
		return nil
	})
	t.Logf("Node SimpleConsumer: %d messages from Go 4.x and 5.x producers received once each and acked (%d receptions in all); %s forwarded to %s",
		len(want), len(receivedEvents(ev)), dead.body, dlq)
}

// nodePushConsumer: the Node PushConsumer, whose queues come from QueryAssignment, consumes what
// the Go 4.x producer sent, each message once.
func nodePushConsumer(t *testing.T, c *cluster, px *mqproxy, p4 rocketmq.Producer) {
	topic, group := uniq("NodePC"), uniq("GNodePC")
	createTopicBySend(t, c.ns.addr, p4, topic, "create-topic")
	r := startNode(t, "push-consume", 90*time.Second, map[string]string{
		"endpoint": px.addr, "topic": topic, "group": group, "count": "30", "prefix": "pc", "linger": "3000"})
	r.waitFor(t, 30*time.Second, "ready", func(e nodeEvent) bool { return e.Event == "ready" })
	warmUp(t, p4, topic, r)
	want := send4x(t, p4, topic, "pc", 30)
	ev := r.wait(t, 120*time.Second)
	checkReceivedOnce(t, "Node PushConsumer", want, ev)
	t.Logf("Node PushConsumer: %d messages consumed once each", len(want))
}

// nodeRetryToDLQ: in a group with retryMaxTimes 2, a message the Node PushConsumer's listener
// always fails is delivered with attempts 1, 2, 3, then lands in %DLQ%<group> once and is not
// delivered again; the other messages are consumed once.
func nodeRetryToDLQ(t *testing.T, c *cluster, px *mqproxy, p4 rocketmq.Producer) {
	topic, group := uniq("NodeDLQ"), uniq("GNodeDLQ")
	createTopicBySend(t, c.ns.addr, p4, topic, "create-topic")
	runAdmin(t, c, "updateSubGroup", "-g", group, "-b", c.b.addr, "-r", "2")
	r := startNode(t, "push-consume", 90*time.Second, map[string]string{
		"endpoint": px.addr, "topic": topic, "group": group, "count": "2", "prefix": "ok", "fail": "fail", "linger": "8000"})
	r.waitFor(t, 30*time.Second, "ready", func(e nodeEvent) bool { return e.Event == "ready" })
	warmUp(t, p4, topic, r)
	want := send4x(t, p4, topic, "ok", 2)
	failed := send4x(t, p4, topic, "fail", 1)[0]
	dlq := "%DLQ%" + group
	var recs []*record
	eventually(t, 60*time.Second, "the failed message in "+dlq, func() error {
		var err error
		if recs, _, err = rawPull(c.b.addr, uniq("READ_DLQ"), dlq, 0, 0, "*"); err != nil {
			return err
		}
		return countErr("DLQ records", len(recs), 1)
	})
	ev := r.wait(t, 120*time.Second) // lingers 8 s: a delivery after the DLQ would show
	checkReceivedOnce(t, "Node PushConsumer", want, ev)
	var attempts []int32
	for _, e := range receivedEvents(ev) {
		if e.Body == failed.body {
			attempts = append(attempts, e.Attempt)
			if e.ID != failed.id {
				t.Errorf("redelivery of %s has id %s, want %s", failed.body, e.ID, failed.id)
			}
		}
	}
	if !slices.Equal(attempts, []int32{1, 2, 3}) {
		t.Errorf("%s delivered with attempts %v, want [1 2 3] (max attempts 3) and then no more", failed.body, attempts)
	}
	if recs, _, err := rawPull(c.b.addr, uniq("READ_DLQ"), dlq, 0, 0, "*"); err != nil || len(recs) != 1 {
		t.Fatalf("%s after the consumer stopped: %d records, %v; want exactly 1", dlq, len(recs), err)
	}
	d := recs[0]
	if string(d.Body) != failed.body || d.Properties["RETRY_TOPIC"] != topic || d.Properties["UNIQ_KEY"] != failed.id || d.Properties["TAGS"] != "TagN" {
		t.Errorf("DLQ record: body %q props %v; want %s, RETRY_TOPIC %s, UNIQ_KEY %s, TAGS TagN", d.Body, d.Properties, failed.body, topic, failed.id)
	}
	t.Logf("Node PushConsumer: %s failed with delivery attempts %v, then was found in %s; the others consumed once", failed.body, attempts, dlq)
}

// nodeProducerAndOffsets: the Node producer's messages reach a Go 4.x push consumer with tag,
// keys, property and message id; then the offset RPCs and PullMessage, driven raw from Node,
// answer what the broker holds for queue 0.
func nodeProducerAndOffsets(t *testing.T, c *cluster, px *mqproxy) {
	topic, group := uniq("NodeP"), uniq("GNodeP")
	createTopicBySend(t, c.ns.addr, newProducer(t, c), topic, "create-topic")
	const n = 12
	pr := startNode(t, "produce", 60*time.Second, map[string]string{"endpoint": px.addr, "topic": topic, "count": strconv.Itoa(n), "prefix": "np", "tag": "NodeTag"})
	var sentEv []nodeEvent
	for _, e := range pr.wait(t, 90*time.Second) {
		if e.Event == "sent" {
			sentEv = append(sentEv, e)
		}
	}
	if len(sentEv) != n {
		t.Fatalf("the Node producer sent %d of %d messages", len(sentEv), n)
	}
	pc := startPushConsumer(t, c, group, topic, all)
	eventually(t, 60*time.Second, "the Go consumer has every Node message", func() error {
		return countErr("messages", pc.got.count(), n+1) // and create-topic
	})
	byBody := map[string]*primitive.MessageExt{}
	for _, m := range pc.got.snapshot() {
		byBody[string(m.Body)] = m
	}
	for i, s := range sentEv {
		m := byBody[s.Body]
		if m == nil {
			t.Errorf("the Go consumer lacks %s", s.Body)
			continue
		}
		if m.GetTags() != "NodeTag" || m.GetKeys() != fmt.Sprintf("nk-%d", i) || m.GetProperty("seq") != strconv.Itoa(i) || m.MsgId != s.ID {
			t.Errorf("%s arrived with tag %q keys %q seq %q id %s; want NodeTag, nk-%d, %d, %s", s.Body, m.GetTags(), m.GetKeys(), m.GetProperty("seq"), m.MsgId, i, i, s.ID)
		}
	}
	t.Logf("Node producer: %d messages received by a Go 4.x consumer intact", n)

	// Offsets and pull of queue 0, as the broker holds it.
	want, _, err := rawPull(c.b.addr, uniq("READ_Q0"), topic, 0, 0, "*")
	if err != nil {
		t.Fatal(err)
	}
	end, err := maxOffset(c.b.addr, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	og := uniq("GNodeOff")
	r := startNode(t, "offsets", 60*time.Second, map[string]string{"endpoint": px.addr, "topic": topic, "group": og, "count": "100", "queue": "0"})
	ev := r.wait(t, 90*time.Second)
	var pulled []string
	var lastPull nodeEvent
	results := map[string]nodeEvent{}
	for _, e := range ev {
		switch {
		case e.Event == "recv":
			pulled = append(pulled, e.Body)
		case e.Event == "result" && e.RPC == "PullMessage":
			lastPull = e
		case e.Event == "result":
			results[e.RPC+" "+e.Policy+e.When] = e
		}
	}
	check := func(key string, code int, offset int64) {
		t.Helper()
		if e, ok := results[key]; !ok || e.Code != code || e.Offset != offset {
			t.Errorf("%s: %+v, want code %d offset %d", key, e, code, offset)
		}
	}
	check("QueryOffset BEGINNING", grpcOK, 0)
	check("QueryOffset END", grpcOK, end)
	if e := results["QueryOffset TIMESTAMP"]; e.Code != grpcOK || e.Offset < 0 || e.Offset > end {
		t.Errorf("QueryOffset TIMESTAMP (an hour ahead): %+v, want OK and an offset in 0..%d", e, end)
	}
	if e := results["GetOffset before"]; e.Code != grpcOffsetNotFound && (e.Code != grpcOK || e.Offset != 0) {
		t.Errorf("GetOffset of a new group: %+v, want OFFSET_NOT_FOUND or 0", e)
	}
	if !slices.Equal(pulled, recBodies(want)) {
		t.Errorf("PullMessage from 0 returned %v, the broker holds %v", pulled, recBodies(want))
	}
	if lastPull.Code != grpcMessageNotFound || lastPull.Next != end {
		t.Errorf("the last PullMessage (at the end of the queue): %+v, want MESSAGE_NOT_FOUND and next offset %d", lastPull, end)
	}
	check("UpdateOffset ", grpcOK, end)
	check("GetOffset after", grpcOK, end)
	t.Logf("Node raw RPCs: queue 0 holds offsets 0..%d; PullMessage returned its %d messages; UpdateOffset/GetOffset round-trip %d", end, len(pulled), end)
}
