package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

var all = consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}

// TestPushAndPullConsumersGetExactlySentSet (b): a clustering push consumer and a pull
// consumer (the Go client's Poll/ACK API, in its own group) each receive exactly the sent set
// (matched by body and keys): nothing lost, nothing unexpected, nothing twice.
func TestPushAndPullConsumersGetExactlySentSet(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	topic := uniq("Exact")
	p := newProducer(t, c)
	const n = 100
	s := sendSync(t, p, topic, "exact", n, func(i int, m *primitive.Message) {
		m.WithKeys([]string{fmt.Sprintf("key-%d", i)})
	})
	want := bodies(s)

	pc := startPushConsumer(t, c, uniq("GExact"), topic, all)
	eventually(t, 60*time.Second, "push consumer receives all", func() error {
		return countErr("push consumer", pc.got.count(), n)
	})
	pc.shutdown()
	got := pc.got.snapshot()
	if d := diffBodies(want, got); len(d.missing)+len(d.extra)+len(d.dups) > 0 {
		t.Errorf("push consumer: %s", d)
	}
	for _, m := range got {
		i, _ := strconv.Atoi(strings.TrimPrefix(string(m.Body), "exact-"))
		if k := m.GetKeys(); k != fmt.Sprintf("key-%d", i) {
			t.Errorf("push consumer: %q has KEYS %q", m.Body, k)
		}
	}

	polled := pollAll(t, c, uniq("GPull"), topic, n)
	if d := diffBodies(want, polled); len(d.missing)+len(d.extra)+len(d.dups) > 0 {
		t.Errorf("pull consumer: %s", d)
	}
}

// pollAll consumes topic with the Go client's pull consumer (Subscribe, Start, then Poll and
// ACK, from the first offset) until n messages arrived, and returns them.
func pollAll(t *testing.T, c *cluster, group, topic string, n int) []*primitive.MessageExt {
	t.Helper()
	waitTopicRoute(t, c, topic)
	pc, err := rocketmq.NewPullConsumer(
		consumer.WithNameServer(c.clientNameServers()),
		consumer.WithGroupName(group),
		consumer.WithInstance(uniq("pull")),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		t.Fatalf("new pull consumer: %v", err)
	}
	if err := pc.Subscribe(topic, all); err != nil {
		t.Fatalf("pull consumer subscribe: %v", err)
	}
	if err := pc.Start(); err != nil {
		t.Fatalf("start pull consumer: %v", err)
	}
	defer pc.Shutdown()
	var got []*primitive.MessageExt
	ctx := context.Background()
	eventually(t, 60*time.Second, "pull consumer polls all messages", func() error {
		for len(got) < n { // Poll hands out one pulled batch per call; drain what is there
			cr, err := pc.Poll(ctx, time.Second)
			if consumer.IsNoNewMsgError(err) {
				break
			}
			if err != nil {
				return permanent{fmt.Errorf("poll: %w", err)}
			}
			got = append(got, cr.GetMsgList()...)
			pc.ACK(ctx, cr, consumer.ConsumeSuccess)
		}
		return countErr("pull consumer", len(got), n)
	})
	return got
}

// TestTwoPushConsumersSplitQueues (c): two clustering consumers in one group share the topic's
// queues: both receive some messages, the group settles into a split where every queue is
// served by exactly one member and both members serve some, together they receive every
// message sent, and nothing unexpected. Sending continues until both have received something
// (bounded), and the split is checked on rounds of probe messages until one shows it, so the
// test does not depend on how fast the group rebalances (the broker's
// NOTIFY_CONSUMER_IDS_CHANGED makes it quick; the client's own period is 20 s). Duplicates are
// tolerated (a queue moving between members during the rebalance may be redelivered:
// at-least-once), but logged.
func TestTwoPushConsumersSplitQueues(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	topic := uniq("Split")
	p := newProducer(t, c)
	want := bodies(sendSync(t, p, topic, "first", 8, nil)) // creates the topic

	group := uniq("GSplit")
	c1 := startPushConsumer(t, c, group, topic, all)
	c2 := startPushConsumer(t, c, group, topic, all)

	deadline := time.Now().Add(60 * time.Second)
	for i := 0; c1.got.count() == 0 || c2.got.count() == 0; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("after 60s of sending, consumer 1 has %d and consumer 2 has %d messages; both should get a share of the queues",
				c1.got.count(), c2.got.count())
		}
		want = append(want, bodies(sendSync(t, p, topic, fmt.Sprintf("more%d", i), 4, nil))...)
		time.Sleep(50 * time.Millisecond) // pacing of the producer, not a correctness wait
	}
	// The group must settle into a split: a round of messages (two per queue) where every
	// queue is served by exactly one member and both members serve some queue.
	union := func() []*primitive.MessageExt { return append(c1.got.snapshot(), c2.got.snapshot()...) }
	round := 0
	var split map[int]int
	eventually(t, 60*time.Second, "the group splits the queues between its two members", func() error {
		round++
		probe := bodies(sendSync(t, p, topic, fmt.Sprintf("probe%d", round), 8, nil))
		want = append(want, probe...)
		if err := poll(10*time.Second, func() error {
			if d := diffBodies(probe, union()); len(d.missing) > 0 {
				return fmt.Errorf("round %d not fully delivered: %s", round, d)
			}
			return nil
		}); err != nil {
			return err
		}
		inRound := map[string]bool{}
		for _, b := range probe {
			inRound[b] = true
		}
		split = map[int]int{} // queue -> member
		for member, pc := range []*pushConsumer{c1, c2} {
			for _, m := range pc.got.snapshot() {
				if !inRound[string(m.Body)] || m.Queue == nil {
					continue
				}
				if prev, ok := split[m.Queue.QueueId]; ok && prev != member+1 {
					return fmt.Errorf("round %d: queue %d delivered to both members", round, m.Queue.QueueId)
				}
				split[m.Queue.QueueId] = member + 1
			}
		}
		members := map[int]bool{}
		for _, m := range split {
			members[m] = true
		}
		if len(members) != 2 {
			return fmt.Errorf("round %d: queue owners %v; both members should own queues", round, split)
		}
		return nil
	})
	t.Logf("settled after %d probe round(s): queue -> member %v", round, split)

	eventually(t, 60*time.Second, "the group receives every message", func() error {
		if d := diffBodies(want, union()); len(d.missing) > 0 {
			return fmt.Errorf("%s", d)
		}
		return nil
	})
	c1.shutdown()
	c2.shutdown()
	d := diffBodies(want, union())
	if len(d.missing)+len(d.extra) > 0 {
		t.Errorf("group: %s", d)
	}
	if len(d.dups) > 0 {
		t.Logf("group: %d message(s) delivered twice around the rebalance (allowed): %s", len(d.dups), firstFew(d.dups))
	}
	t.Logf("consumer 1: %d messages from queues %v; consumer 2: %d messages from queues %v",
		c1.got.count(), queuesOf(c1.got.snapshot()), c2.got.count(), queuesOf(c2.got.snapshot()))
}

func queuesOf(msgs []*primitive.MessageExt) []int {
	seen := map[int]bool{}
	var out []int
	for _, m := range msgs {
		if m.Queue != nil && !seen[m.Queue.QueueId] {
			seen[m.Queue.QueueId] = true
			out = append(out, m.Queue.QueueId)
		}
	}
	return out
}

// TestBroadcastingConsumersEachGetAll (d): two broadcasting consumers of one group each
// receive every message exactly once.
func TestBroadcastingConsumersEachGetAll(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	topic := uniq("Bcast")
	p := newProducer(t, c)
	const n = 60
	want := bodies(sendSync(t, p, topic, "bcast", n, nil))

	group := uniq("GBcast")
	bc := consumer.WithConsumerModel(consumer.BroadCasting)
	c1 := startPushConsumer(t, c, group, topic, all, bc)
	c2 := startPushConsumer(t, c, group, topic, all, bc)
	for i, pc := range []*pushConsumer{c1, c2} {
		eventually(t, 60*time.Second, fmt.Sprintf("broadcasting consumer %d receives all", i+1), func() error {
			return countErr(fmt.Sprintf("consumer %d", i+1), pc.got.count(), n)
		})
	}
	c1.shutdown()
	c2.shutdown()
	for i, pc := range []*pushConsumer{c1, c2} {
		if d := diffBodies(want, pc.got.snapshot()); len(d.missing)+len(d.extra)+len(d.dups) > 0 {
			t.Errorf("broadcasting consumer %d: %s", i+1, d)
		}
	}
}

// TestTagFilter (e): a subscription "TagA || TagB" receives exactly the TagA and TagB messages
// of a TagA/TagB/TagC mix. Because the Go client filters again by tag string, the broker's
// own filtering (by tag hash code in the consume queue) is checked separately with a raw
// PULL_MESSAGE carrying the same subscription: it must return no TagC message.
func TestTagFilter(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	topic := uniq("Tags")
	p := newProducer(t, c)
	tags := []string{"TagA", "TagB", "TagC"}
	s := sendSync(t, p, topic, "tag", 90, func(i int, m *primitive.Message) { m.WithTag(tags[i%3]) })
	var want []string
	for i, x := range s {
		if i%3 != 2 {
			want = append(want, x.body)
		}
	}

	pc := startPushConsumer(t, c, uniq("GTags"), topic,
		consumer.MessageSelector{Type: consumer.TAG, Expression: "TagA || TagB"})
	eventually(t, 60*time.Second, "tag consumer receives all TagA/TagB", func() error {
		return countErr("consumer", pc.got.count(), len(want))
	})
	pc.shutdown()
	got := pc.got.snapshot()
	if d := diffBodies(want, got); len(d.missing)+len(d.extra)+len(d.dups) > 0 {
		t.Errorf("consumer of TagA || TagB: %s", d)
	}
	for _, m := range got {
		if tg := m.GetTags(); tg != "TagA" && tg != "TagB" {
			t.Errorf("consumer of TagA || TagB got %q with tag %q", m.Body, tg)
		}
	}

	// Broker-side filter: raw pulls with the subscription in the request.
	group := uniq("GRawTags")
	var gotA, gotB int
	for q := range 4 {
		max, err := maxOffset(c.b.addr, topic, q)
		if err != nil {
			t.Fatalf("max offset: %v", err)
		}
		for off := int64(0); off < max; {
			recs, next, err := rawPull(c.b.addr, group, topic, q, off, "TagA || TagB")
			if err != nil {
				t.Fatalf("raw pull %s/%d@%d: %v", topic, q, off, err)
			}
			for _, r := range recs {
				switch r.Properties["TAGS"] {
				case "TagA":
					gotA++
				case "TagB":
					gotB++
				default:
					t.Errorf("broker returned %q (tag %q) to a TagA || TagB pull", r.Body, r.Properties["TAGS"])
				}
			}
			if next <= off {
				t.Fatalf("raw pull %s/%d@%d: nextBeginOffset %d does not advance", topic, q, off, next)
			}
			off = next
		}
	}
	if gotA != 30 || gotB != 30 {
		t.Errorf("raw pulls returned %d TagA and %d TagB messages, want 30 and 30", gotA, gotB)
	}
}

// rawPull sends one non-suspending PULL_MESSAGE with a TAG subscription and returns the
// decoded records and nextBeginOffset.
func rawPull(addr, group, topic string, q int, off int64, sub string) ([]*record, int64, error) {
	return rawPullExpr(addr, group, topic, q, off, sub, "TAG")
}

// rawPullExpr is rawPull with an expression type (TAG or SQL92).
func rawPullExpr(addr, group, topic string, q int, off int64, sub, exprType string) ([]*record, int64, error) {
	return pullVia(func(ext map[string]string) (*remotingCmd, error) {
		return rawRequest(addr, codePullMessage, ext, nil, 10*time.Second)
	}, group, topic, q, off, sub, exprType)
}

// pullVia sends one raw pull through send (a connection of its own, or one the caller reuses)
// and parses the answer: the records and nextBeginOffset.
func pullVia(send func(ext map[string]string) (*remotingCmd, error), group, topic string, q int, off int64, sub, exprType string) ([]*record, int64, error) {
	resp, err := send(map[string]string{
		"consumerGroup":        group,
		"topic":                topic,
		"queueId":              strconv.Itoa(q),
		"queueOffset":          strconv.FormatInt(off, 10),
		"maxMsgNums":           "32",
		"sysFlag":              "4", // subscription in the request; no suspend, no commit
		"commitOffset":         "0",
		"suspendTimeoutMillis": "0",
		"subscription":         sub,
		"subVersion":           "0",
		"expressionType":       exprType,
	})
	if err != nil {
		return nil, 0, err
	}
	next, perr := strconv.ParseInt(resp.ExtFields["nextBeginOffset"], 10, 64)
	switch resp.Code {
	case respSuccess:
		recs, err := parseRecords(resp.Body)
		if err != nil {
			return nil, 0, fmt.Errorf("pull body: %w", err)
		}
		return recs, next, perr
	case respPullNotFound, respPullRetryImmediate:
		return nil, next, perr
	}
	return nil, 0, fmt.Errorf("code %d %q", resp.Code, resp.Remark)
}

// TestOrderlyConsumptionPerKey (f): messages sent with a queue selector keyed by order id
// (the Go client's hash selector on the sharding key) are consumed by an orderly push
// consumer in send order for every order id. Each order's messages must also share one queue
// with increasing queue offsets.
func TestOrderlyConsumptionPerKey(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	topic := uniq("Orderly")
	p := newProducer(t, c, producer.WithQueueSelector(producer.NewHashQueueSelector()))
	const orders, steps = 10, 20
	queueOf := map[string]int{}
	lastOff := map[string]int64{}
	for step := range steps {
		for o := range orders {
			key := fmt.Sprintf("order-%d", o)
			body := fmt.Sprintf("%s:%d", key, step)
			m := primitive.NewMessage(topic, []byte(body))
			m.WithShardingKey(key)
			r, err := p.SendSync(context.Background(), m)
			if err != nil || r.Status != primitive.SendOK {
				t.Fatalf("send %s: %v %v", body, err, r)
			}
			if q, ok := queueOf[key]; ok && (q != r.MessageQueue.QueueId || r.QueueOffset <= lastOff[key]) {
				t.Fatalf("%s went to queue %d offset %d; earlier messages of the order went to queue %d up to offset %d",
					body, r.MessageQueue.QueueId, r.QueueOffset, q, lastOff[key])
			}
			queueOf[key], lastOff[key] = r.MessageQueue.QueueId, r.QueueOffset
		}
	}

	waitTopicRoute(t, c, topic)
	consumeOrdersInOrder(t, c, uniq("GOrderly"), topic, orders, steps)
}

// consumeOrdersInOrder consumes topic with an orderly push consumer of group until all
// orders*steps messages ("order-<o>:<step>", each order's steps sent in order) have arrived, and
// fails the test unless every order's steps arrived once each, in order.
func consumeOrdersInOrder(t *testing.T, c *cluster, group, topic string, orders, steps int) {
	t.Helper()
	var (
		mu  sync.Mutex
		seq = map[string][]int{}
		n   atomic.Int64
	)
	pc := startOrderlyConsumer(t, c, group, topic, func(m *primitive.MessageExt) {
		key, step, _ := strings.Cut(string(m.Body), ":")
		i, _ := strconv.Atoi(step)
		mu.Lock()
		seq[key] = append(seq[key], i)
		mu.Unlock()
		n.Add(1)
	})
	eventually(t, 60*time.Second, "orderly consumer receives all", func() error {
		return countErr("orderly consumer", int(n.Load()), orders*steps)
	})
	pc.shutdown()
	mu.Lock()
	defer mu.Unlock()
	for o := range orders {
		key := fmt.Sprintf("order-%d", o)
		got := seq[key]
		ok := len(got) == steps
		for i := 0; ok && i < steps; i++ {
			ok = got[i] == i
		}
		if !ok {
			t.Errorf("%s consumed in order %v, want 0..%d once each in order", key, got, steps-1)
		}
	}
}

// startOrderlyConsumer starts a clustering push consumer with WithConsumerOrder(true); f is
// called for every message in delivery order.
func startOrderlyConsumer(t testing.TB, c *cluster, group, topic string, f func(*primitive.MessageExt)) *pushConsumer {
	t.Helper()
	pc := startPushConsumerWith(t, c, group, topic, all, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			f(m)
		}
		return consumer.ConsumeSuccess, nil
	}, consumer.WithConsumerOrder(true))
	return pc
}
