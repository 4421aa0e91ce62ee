package integration

// The official 5.x Go client through mqproxy, scenario by scenario, against a classic broker and
// a three-node group, each through a proxy dialed in plaintext and through one dialed over TLS
// (the client's own TLS, the proxy's self-signed certificate): sync and async sends with tags,
// keys and properties, DELAY messages, tag expressions, SimpleConsumer receive/ack and
// ChangeInvisibleDuration with redelivery, two SimpleConsumers of one group sharing the load,
// and over TLS also FIFO (order, a group held while in flight) and transactions. One cluster per topology serves all its
// scenarios, each on its own topic and group, in parallel.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
)

// matrixTarget is one cluster behind one proxy, dialed one way.
type matrixTarget struct {
	ns    *namesrv
	c     *cluster  // for the Go 4.x clients (topic creation, the transactions' consumer)
	nodes []*broker // every broker of the cluster, for setupFifo
	px    *mqproxy
	p4    rocketmq.Producer
}

// TestProxyV5ClientMatrix runs every scenario against each topology through each transport:
// one cluster per topology with a plaintext and a TLS proxy, all scenarios in parallel.
func TestProxyV5ClientMatrix(t *testing.T) {
	t.Parallel()
	for _, topo := range []string{"classic", "raft"} {
		t.Run(topo, func(t *testing.T) {
			t.Parallel()
			ns := startNamesrv(t)
			base := matrixTarget{ns: ns}
			if topo == "classic" {
				b := startBroker(t, ns, proxyTxnProps...)
				base.c, base.nodes = &cluster{ns: ns, b: b}, []*broker{b}
			} else {
				g := startRaftGroup(t, ns, 3, proxyTxnProps...)
				base.c, base.nodes = g.asCluster(g.waitMaster(t, 20*time.Second, nil)), g.nodes
			}
			base.p4 = newProducer(t, base.c)
			plain, tls := base, base
			plain.px, tls.px = startProxy(t, ns), startProxy(t, ns)
			tlsTargets.Store(tls.px.addr, true) // clients of this proxy keep their own TLS dialing
			for _, tr := range []struct {
				name string
				tg   *matrixTarget
			}{{"plaintext", &plain}, {"tls", &tls}} {
				t.Run(tr.name, func(t *testing.T) {
					t.Parallel()
					tg := tr.tg
					scenarios := map[string]func(*testing.T, *matrixTarget){
						"SendSyncAsync":     matrixSend,
						"Delay":             matrixDelay,
						"TagExpression":     matrixTags,
						"InvisibleDuration": matrixInvisible,
						"TwoConsumers":      matrixTwoConsumers,
					}
					if tr.name == "tls" {
						if !logContains(&broker{proc: tg.px.proc}, "TLS and plaintext") {
							t.Fatal("the proxy's log does not say it serves TLS")
						}
						scenarios["Fifo"] = matrixFifo
						scenarios["Transaction"] = matrixTxn
					}
					for name, f := range scenarios {
						t.Run(name, func(t *testing.T) {
							t.Parallel()
							f(t, tg)
						})
					}
				})
			}
		})
	}
}

// topic creates a new topic (auto-created by a Go 4.x send, which the consumers of the
// scenarios never see: a new group starts at the queues' ends) and waits for its route.
func (tg *matrixTarget) topic(t *testing.T, prefix string) string {
	topic := uniq(prefix)
	sendFirst(t, tg.p4, topic, "create-topic")
	waitTopicRoute(t, tg.c, topic) // the proxy reads routes from the name server
	return topic
}

// simpleConsumer starts a 5.x SimpleConsumer of group on topic with expr and makes the group
// known on the topic's queues (a first receive), so that everything sent afterwards reaches it.
func (tg *matrixTarget) simpleConsumer(t *testing.T, group, topic string, expr *rmq.FilterExpression) rmq.SimpleConsumer {
	t.Helper()
	c, err := rmq.NewSimpleConsumer(&rmq.Config{Endpoint: tg.px.addr, ConsumerGroup: group, Credentials: &credentials.SessionCredentials{}},
		rmq.WithAwaitDuration(2*time.Second), rmq.WithSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: expr}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("5.x simple consumer start through %s: %v", tg.px.addr, err)
	}
	t.Cleanup(func() { _ = c.GracefulStop() })
	if _, err := matrixReceive(c, 16, 30*time.Second); err != nil && !notFound(err) {
		t.Fatalf("first receive: %v", err)
	}
	return c
}

// matrixReceive is one long-polled receive; MESSAGE_NOT_FOUND (nothing within the await time)
// is returned as an error the caller tests with notFound.
func matrixReceive(c rmq.SimpleConsumer, batch int32, invisible time.Duration) ([]*rmq.MessageView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Receive(ctx, batch, invisible)
}

// receiveUntil receives and hands each message to f until done reports true, failing the test
// after timeout.
func receiveUntil(t *testing.T, c rmq.SimpleConsumer, timeout time.Duration, what string, done func() bool, f func(*rmq.MessageView)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		mvs, err := matrixReceive(c, 16, 20*time.Second)
		if err != nil && !notFound(err) {
			t.Logf("receive: %v", err)
		}
		for _, mv := range mvs {
			f(mv)
		}
	}
}

// expectNothingMore: receives until one comes back empty (the broker had nothing for the group
// within the await time); any message is a failure.
func expectNothingMore(t *testing.T, c rmq.SimpleConsumer, why string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		mvs, err := matrixReceive(c, 16, 20*time.Second)
		for _, mv := range mvs {
			t.Fatalf("%s: received %q (attempt %d, tag %v)", why, mv.GetBody(), mv.GetDeliveryAttempt(), mv.GetTag())
		}
		if notFound(err) {
			return
		}
		if err != nil {
			t.Logf("receive: %v", err)
		}
	}
	t.Fatalf("%s: no receive came back empty in 20 s", why)
}

func ack(t *testing.T, c rmq.SimpleConsumer, mv *rmq.MessageView) {
	t.Helper()
	if err := c.Ack(context.Background(), mv); err != nil {
		t.Fatalf("ack %q: %v", mv.GetBody(), err)
	}
}

// matrixSend: 10 sync and 10 async sends, each with a tag, two keys and two properties, are
// received once each with all of them and the message id of their receipt.
func matrixSend(t *testing.T, tg *matrixTarget) {
	topic := tg.topic(t, "MxSend")
	c := tg.simpleConsumer(t, uniq("GMxSend"), topic, rmq.SUB_ALL)
	p := newV5Producer(t, tg.px.addr, topic)
	const n = 20
	type want struct{ id, mode string }
	var mu sync.Mutex
	sent := map[string]want{}
	asyncDone := make(chan error, n)
	for i := 0; i < n; i++ {
		mode := "sync"
		if i%2 == 1 {
			mode = "async"
		}
		body := fmt.Sprintf("s-%02d", i)
		msg := &rmq.Message{Topic: topic, Body: []byte(body)}
		msg.SetTag("Tag" + mode)
		msg.SetKeys("k-"+strconv.Itoa(i), "kk-"+strconv.Itoa(i))
		msg.AddProperty("seq", strconv.Itoa(i))
		msg.AddProperty("mode", mode)
		if mode == "sync" {
			r, err := p.Send(context.Background(), msg)
			if err != nil || len(r) != 1 {
				t.Fatalf("send %s: %v %v", body, r, err)
			}
			mu.Lock() // the async callbacks write it too
			sent[body] = want{r[0].MessageID, mode}
			mu.Unlock()
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		p.SendAsync(ctx, msg, func(_ context.Context, r []*rmq.SendReceipt, err error) {
			defer cancel()
			if err == nil && len(r) != 1 {
				err = fmt.Errorf("%d receipts", len(r))
			}
			if err == nil {
				mu.Lock()
				sent[body] = want{r[0].MessageID, mode}
				mu.Unlock()
			}
			asyncDone <- err
		})
	}
	for i := 0; i < n/2; i++ {
		select {
		case err := <-asyncDone:
			if err != nil {
				t.Fatalf("async send: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d async sends answered in 30 s", i, n/2)
		}
	}
	got := map[string]int{}
	receiveUntil(t, c, 60*time.Second, "every message received", func() bool { return len(got) == n }, func(mv *rmq.MessageView) {
		body := string(mv.GetBody())
		got[body]++
		mu.Lock()
		w, ok := sent[body]
		mu.Unlock()
		seq := strings.TrimLeft(strings.TrimPrefix(body, "s-"), "0")
		if seq == "" {
			seq = "0"
		}
		props := mv.GetProperties()
		if !ok || got[body] > 1 || mv.GetMessageId() != w.id || mv.GetTag() == nil || *mv.GetTag() != "Tag"+w.mode ||
			strings.Join(mv.GetKeys(), ",") != "k-"+seq+",kk-"+seq || props["seq"] != seq || props["mode"] != w.mode ||
			mv.GetDeliveryAttempt() != 1 || mv.GetTopic() != topic {
			t.Fatalf("received %q (time %d) id %s tag %v keys %v properties %v attempt %d topic %s; sent as %+v",
				body, got[body], mv.GetMessageId(), mv.GetTag(), mv.GetKeys(), props, mv.GetDeliveryAttempt(), mv.GetTopic(), w)
		}
		ack(t, c, mv)
	})
	expectNothingMore(t, c, "after all were acked")
	t.Logf("%d sync and %d async sends received once each with tag, keys, properties and message id", n/2, n/2)
}

// matrixDelay: DELAY messages arrive not before their delivery time, at most 1 s after it, and
// carry it as their delivery timestamp.
func matrixDelay(t *testing.T, tg *matrixTarget) {
	topic := tg.topic(t, "MxDelay")
	c := tg.simpleConsumer(t, uniq("GMxDelay"), topic, rmq.SUB_ALL)
	p := newV5Producer(t, tg.px.addr, topic)
	due := map[string]time.Time{}
	now := time.Now()
	for i, d := range []time.Duration{2500 * time.Millisecond, 2950 * time.Millisecond, 4 * time.Second, 5500 * time.Millisecond} {
		body := fmt.Sprintf("d-%d", i)
		at := now.Add(d).Truncate(time.Millisecond)
		msg := &rmq.Message{Topic: topic, Body: []byte(body)}
		msg.SetDelayTimestamp(at)
		msg.SetTag("TagD")
		if _, err := p.Send(context.Background(), msg); err != nil {
			t.Fatalf("send DELAY %s: %v", body, err)
		}
		due[body] = at
	}
	late := map[string]time.Duration{}
	receiveUntil(t, c, 40*time.Second, "every DELAY message", func() bool { return len(late) == len(due) }, func(mv *rmq.MessageView) {
		arrived := time.Now()
		body := string(mv.GetBody())
		at, ok := due[body]
		if !ok {
			t.Fatalf("unexpected message %q", body)
		}
		if arrived.Before(at) {
			t.Fatalf("%s arrived %v before its delivery time", body, at.Sub(arrived))
		}
		if l := arrived.Sub(at); l > time.Second {
			t.Fatalf("%s arrived %v after its delivery time", body, l)
		}
		if ts := mv.GetDeliveryTimestamp(); ts == nil || !ts.Equal(at) {
			t.Fatalf("%s carries delivery timestamp %v, sent with %v", body, ts, at)
		}
		if mv.GetTag() == nil || *mv.GetTag() != "TagD" {
			t.Fatalf("%s has tag %v", body, mv.GetTag())
		}
		late[body] = arrived.Sub(at).Round(time.Millisecond)
		ack(t, c, mv)
	})
	t.Logf("DELAY messages arrived after their delivery time by %v, each with its delivery timestamp", late)
}

// matrixTags: a consumer subscribed with TagA||TagB receives exactly the messages with those
// tags, none with another tag or none.
func matrixTags(t *testing.T, tg *matrixTarget) {
	topic := tg.topic(t, "MxTags")
	c := tg.simpleConsumer(t, uniq("GMxTags"), topic, rmq.NewFilterExpression("TagA||TagB"))
	p := newV5Producer(t, tg.px.addr, topic)
	want := map[string]bool{}
	for i := 0; i < 24; i++ {
		tag := []string{"TagA", "TagB", "TagC", ""}[i%4]
		body := fmt.Sprintf("t-%02d-%s", i, tag)
		msg := &rmq.Message{Topic: topic, Body: []byte(body)}
		if tag != "" {
			msg.SetTag(tag)
		}
		if _, err := p.Send(context.Background(), msg); err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
		if tag == "TagA" || tag == "TagB" {
			want[body] = true
		}
	}
	got := map[string]bool{}
	receiveUntil(t, c, 60*time.Second, "every TagA and TagB message", func() bool { return len(got) == len(want) }, func(mv *rmq.MessageView) {
		body := string(mv.GetBody())
		if !want[body] || got[body] || mv.GetTag() == nil || !strings.HasSuffix(body, *mv.GetTag()) {
			t.Fatalf("TagA||TagB received %q with tag %v (before: %v)", body, mv.GetTag(), got[body])
		}
		got[body] = true
		ack(t, c, mv)
	})
	expectNothingMore(t, c, "TagA||TagB after its 12 messages")
	t.Logf("TagA||TagB received its %d messages of 24 and nothing else", len(got))
}

// matrixInvisible: a message whose invisibility is shortened with ChangeInvisibleDuration
// instead of an ack comes back, twice, with delivery attempts 2 and 3 and not before its new
// invisible time; the acked ones never come back.
func matrixInvisible(t *testing.T, tg *matrixTarget) {
	topic := tg.topic(t, "MxInv")
	c := tg.simpleConsumer(t, uniq("GMxInv"), topic, rmq.SUB_ALL)
	p := newV5Producer(t, tg.px.addr, topic)
	const n = 6
	for i := 0; i < n; i++ {
		msg := &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("i-%d", i))}
		msg.SetTag("TagI")
		if _, err := p.Send(context.Background(), msg); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	const retried = "i-0"
	var attempts []int32
	var lastChange time.Time
	seen := map[string]int{}
	receiveUntil(t, c, 60*time.Second, "i-0 three times and the others once", func() bool {
		return len(seen) == n && len(attempts) == 3
	}, func(mv *rmq.MessageView) {
		body := string(mv.GetBody())
		seen[body]++
		switch body {
		case retried:
			attempts = append(attempts, mv.GetDeliveryAttempt())
			// lastChange is taken before the call: the broker's 1 s starts later (ms precision).
			if len(attempts) > 1 && time.Since(lastChange) < 990*time.Millisecond {
				t.Fatalf("%s came back %v after the call setting its invisibility to 1 s", body, time.Since(lastChange))
			}
			if mv.GetDeliveryAttempt() != int32(len(attempts)) {
				t.Fatalf("%s delivery %d has delivery attempt %d", body, len(attempts), mv.GetDeliveryAttempt())
			}
			if len(attempts) == 3 {
				ack(t, c, mv)
				return
			}
			lastChange = time.Now()
			if err := c.ChangeInvisibleDuration(mv, time.Second); err != nil {
				t.Fatalf("ChangeInvisibleDuration: %v", err)
			}
		default:
			if seen[body] > 1 || mv.GetDeliveryAttempt() != 1 {
				t.Fatalf("acked %s came back (delivery %d, attempt %d)", body, seen[body], mv.GetDeliveryAttempt())
			}
			ack(t, c, mv)
		}
	})
	expectNothingMore(t, c, "after every message was acked")
	t.Logf("%s delivered with attempts %v after ChangeInvisibleDuration(1 s); the others acked once", retried, attempts)
}

// matrixTwoConsumers: two SimpleConsumers of one group receive concurrently and ack at once:
// each gets some of the messages, together all of them, none twice.
func matrixTwoConsumers(t *testing.T, tg *matrixTarget) {
	topic, group := tg.topic(t, "MxTwo"), uniq("GMxTwo")
	cs := []rmq.SimpleConsumer{tg.simpleConsumer(t, group, topic, rmq.SUB_ALL), tg.simpleConsumer(t, group, topic, rmq.SUB_ALL)}
	p := newV5Producer(t, tg.px.addr, topic)
	const n = 60
	var mu sync.Mutex
	by := map[string][]int{}
	per := make([]int, len(cs))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failure error
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				mvs, err := matrixReceive(c, 4, 30*time.Second)
				if err != nil && !notFound(err) {
					t.Logf("consumer %d receive: %v", i, err)
				}
				for _, mv := range mvs {
					ackErr := c.Ack(context.Background(), mv)
					mu.Lock()
					by[string(mv.GetBody())] = append(by[string(mv.GetBody())], i)
					per[i]++
					if ackErr != nil && failure == nil {
						failure = fmt.Errorf("consumer %d ack %q: %w", i, mv.GetBody(), ackErr)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		if _, err := p.Send(context.Background(), &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("two-%02d", i))}); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	eventually(t, 60*time.Second, "all messages received", func() error {
		mu.Lock()
		defer mu.Unlock()
		return countErr("messages", len(by), n)
	})
	// One await time more: a duplicate would show now.
	time.Sleep(2500 * time.Millisecond)
	close(stop)
	wg.Wait()
	if failure != nil {
		t.Fatal(failure)
	}
	for body, who := range by {
		if len(who) != 1 {
			t.Errorf("%s received %d times, by consumers %v", body, len(who), who)
		}
	}
	if len(by) != n || per[0] == 0 || per[1] == 0 {
		t.Fatalf("%d distinct of %d; consumer 0 got %d, consumer 1 got %d: want both some", len(by), n, per[0], per[1])
	}
	t.Logf("two consumers of one group: %d and %d of %d messages, none twice", per[0], per[1], n)
}

// matrixFifo: FIFO order per message group and a group held while one of its messages is in
// flight (setupFifo, checkFifoOrder, checkFifoHold of fifo_test.go).
func matrixFifo(t *testing.T, tg *matrixTarget) {
	topic, group := setupFifo(t, tg.ns, tg.nodes)
	p, sc := fifoClients(t, tg.px, topic, group)
	checkFifoOrder(t, p, sc, topic)
	checkFifoHold(t, p, sc, topic, nil)
}

// matrixTxn: commit, rollback and check-back resolved transactions (as runProxyTxns of
// proxytxn_test.go, through this target's proxy).
func matrixTxn(t *testing.T, tg *matrixTarget) {
	topic := tg.topic(t, "MxTxn")
	cons := startPushConsumer(t, tg.c, uniq("GMxTxn"), topic, all)
	l := newTxnListener(false, true)
	p := newV5TxnProducer(t, tg.px.addr, topic, l)
	bodies, _ := sendV5Txns(t, p, topic, "mxt", 0, 16, true)
	expectTxnDelivery(t, cons, l, bodies, []string{"create-topic"})
	expectNotChecked(t, l, bodies)
	if n := l.checked(bodies); n < 8 {
		t.Fatalf("only %d of the 8 transactions left unknown were checked back", n)
	}
	t.Logf("16 transactions (4 committed, 4 rolled back, 8 resolved by %d check-backs)", l.totalChecks())
}
