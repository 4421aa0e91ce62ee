package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
)

// FIFO through the proxy: a topic whose message.type is FIFO and an orderly
// subscription group, both set with mqadmin; the official 5.x producer sends messages with
// message groups, the 5.x SimpleConsumer of the orderly group receives each group in send order,
// and a queue is held while one of its messages is in flight.

// Request codes the tests read configs with (remoting/code.go).
const (
	fifoCodeGetTopicConfig  = 351
	fifoCodeGetGroupConfig  = 352
	fifoCodeMessageNotFound = 40401 // rmqpb Code_MESSAGE_NOT_FOUND, as the client reports it
)

// setupFifo creates a FIFO topic of 4 queues and an orderly group on every master of the
// cluster through mqadmin, checks a bad attribute is refused, and waits until every node of nodes
// holds both configs (in a Raft group: replicated to the followers).
func setupFifo(t *testing.T, ns *namesrv, nodes []*broker) (topic, group string) {
	t.Helper()
	c := &cluster{ns: ns}
	topic, group = uniq("Fifo"), uniq("GFifo")
	out := runAdmin(t, c, "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "4", "-w", "4", "-a", "+message.type=FIFO")
	if !strings.Contains(out, "success") || !strings.Contains(out, "attributes: +message.type=FIFO") {
		t.Fatalf("updateTopic output:\n%s", out)
	}
	var errOut strings.Builder
	if _, code := runAdminCode(c, &errOut, "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "4", "-w", "4", "-a", "+message.type=FIFOX"); code != 1 ||
		!strings.Contains(errOut.String(), `value "FIFOX" is not one of`) {
		t.Fatalf("a bad message.type: exit %d, stderr %s", code, errOut.String())
	}
	runAdmin(t, c, "updateSubGroup", "-c", "DefaultCluster", "-g", group, "--consumeMessageOrderly", "true")
	eventually(t, 20*time.Second, "every node holds the FIFO topic and the orderly group", func() error {
		for _, b := range nodes {
			if !b.running() {
				continue
			}
			resp, err := rawRequest(b.addr, fifoCodeGetTopicConfig, map[string]string{"topic": topic}, nil, 3*time.Second)
			if err != nil {
				return err
			}
			var tc struct {
				Attributes map[string]string `json:"attributes"`
			}
			if err := json.Unmarshal(resp.Body, &tc); err != nil || tc.Attributes["message.type"] != "FIFO" {
				return fmt.Errorf("%s: topic config %s (code %d): %v", b.addr, resp.Body, resp.Code, err)
			}
			resp, err = rawRequest(b.addr, fifoCodeGetGroupConfig, map[string]string{"group": group}, nil, 3*time.Second)
			if err != nil {
				return err
			}
			if !strings.Contains(string(resp.Body), `"consumeMessageOrderly":true`) {
				return fmt.Errorf("%s: group config %s (code %d)", b.addr, resp.Body, resp.Code)
			}
		}
		if n, err := queueCount(ns.addr, topic); err != nil || n != 4 {
			return fmt.Errorf("route: %d queues, %v", n, err)
		}
		return nil
	})
	return topic, group
}

// fifoClients starts a 5.x producer and SimpleConsumer of the orderly group through px and
// makes the group known on every queue (it starts at the queues' ends, as with Apache's proxy).
func fifoClients(t *testing.T, px *mqproxy, topic, group string) (rmq.Producer, rmq.SimpleConsumer) {
	t.Helper()
	c, err := rmq.NewSimpleConsumer(&rmq.Config{Endpoint: px.addr, ConsumerGroup: group, Credentials: &credentials.SessionCredentials{}},
		rmq.WithAwaitDuration(3*time.Second), rmq.WithSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("5.x simple consumer start through %s: %v", px.addr, err)
	}
	t.Cleanup(func() { _ = c.GracefulStop() })
	if _, err := fifoReceive(c, 16); err != nil && !notFound(err) {
		t.Fatalf("first receive: %v", err)
	}
	return newV5Producer(t, px.addr, topic), c
}

func fifoReceive(c rmq.SimpleConsumer, batch int32) ([]*rmq.MessageView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return c.Receive(ctx, batch, 10*time.Second)
}

// notFound: the receive reached a broker and there was nothing to take.
func notFound(err error) bool {
	var st *rmq.ErrRpcStatus
	return errors.As(err, &st) && st.GetCode() == fifoCodeMessageNotFound
}

func sendFifo(t *testing.T, p rmq.Producer, topic, group, body string) {
	t.Helper()
	msg := &rmq.Message{Topic: topic, Body: []byte(body)}
	msg.SetMessageGroup(group)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := p.Send(ctx, msg); err != nil {
		t.Fatalf("send FIFO %s of group %s: %v", body, group, err)
	}
}

// checkFifoOrder sends 4 message groups of 8 messages interleaved and receives them all, acking
// each: every group arrives complete, once, in send order, as FIFO messages with their group.
// A NORMAL message to the FIFO topic is refused (the client checks the route's accepted types).
func checkFifoOrder(t *testing.T, p rmq.Producer, c rmq.SimpleConsumer, topic string) {
	t.Helper()
	const groups, per = 4, 8
	prefix := uniq("og")
	for i := 0; i < per; i++ {
		for g := 0; g < groups; g++ {
			sendFifo(t, p, topic, fmt.Sprintf("%s-%d", prefix, g), fmt.Sprintf("%d-%02d", g, i))
		}
	}
	if _, err := p.Send(context.Background(), &rmq.Message{Topic: topic, Body: []byte("normal")}); err == nil {
		t.Fatal("a NORMAL message was accepted by a FIFO topic")
	}
	next := make([]int, groups)
	total := 0
	deadline := time.Now().Add(90 * time.Second)
	for total < groups*per && time.Now().Before(deadline) {
		mvs, err := fifoReceive(c, 16)
		if err != nil && !notFound(err) {
			t.Logf("receive: %v", err)
		}
		for _, mv := range mvs {
			var g, i int
			if _, err := fmt.Sscanf(string(mv.GetBody()), "%d-%d", &g, &i); err != nil {
				t.Fatalf("unexpected message %q", mv.GetBody())
			}
			if mg := mv.GetMessageGroup(); mg == nil || *mg != fmt.Sprintf("%s-%d", prefix, g) {
				t.Fatalf("message %q has message group %v", mv.GetBody(), mg)
			}
			if i != next[g] {
				t.Fatalf("group %d: received message %d, expected %d (out of order or repeated)", g, i, next[g])
			}
			next[g]++
			total++
			if err := c.Ack(context.Background(), mv); err != nil {
				t.Fatalf("ack %q: %v", mv.GetBody(), err)
			}
		}
	}
	if total != groups*per {
		t.Fatalf("received %d of %d FIFO messages: next per group %v", total, groups*per, next)
	}
	t.Logf("fifo: %d message groups x %d messages received complete and in send order", groups, per)
}

// checkFifoHold: a message group's first message is received and not acked; while it is in
// flight (its invisibility extended with ChangeInvisibleDuration) nothing of its group comes, even
// across failover() when given (the leader killed); once its invisibility runs out the same
// message (same offset, same topic: not a retry copy) comes back with delivery attempt 2, and
// after its ack the group continues in order.
func checkFifoHold(t *testing.T, p rmq.Producer, c rmq.SimpleConsumer, topic string, failover func()) {
	t.Helper()
	group := uniq("hold")
	for i := 0; i < 3; i++ {
		sendFifo(t, p, topic, group, fmt.Sprintf("h-%d", i))
	}
	var first *rmq.MessageView
	for deadline := time.Now().Add(30 * time.Second); first == nil && time.Now().Before(deadline); {
		mvs, err := fifoReceive(c, 1)
		if err != nil && !notFound(err) {
			t.Logf("receive: %v", err)
		}
		if len(mvs) > 0 {
			first = mvs[0]
		}
	}
	if first == nil || string(first.GetBody()) != "h-0" || first.GetDeliveryAttempt() != 1 {
		t.Fatalf("first receive of the held group: %v", first)
	}
	offset := first.GetOffset()
	if err := c.ChangeInvisibleDuration(first, 30*time.Second); err != nil {
		t.Fatalf("extend the invisibility of h-0: %v", err)
	}
	if failover != nil {
		failover()
	}
	// Held: receives that reach a broker get nothing of the group.
	answered := 0
	for deadline := time.Now().Add(20 * time.Second); answered < 2 && time.Now().Before(deadline); {
		mvs, err := fifoReceive(c, 16)
		switch {
		case notFound(err):
			answered++
		case err != nil:
			t.Logf("receive while held: %v", err)
		}
		for _, mv := range mvs {
			t.Fatalf("received %q while h-0 of its group is in flight", mv.GetBody())
		}
	}
	if answered < 2 {
		t.Fatal("no receive reached a broker while the group was held")
	}
	// Let it expire soon: the same message comes back, attempt 2.
	if err := c.ChangeInvisibleDuration(first, time.Second); err != nil {
		t.Fatalf("shorten the invisibility of h-0: %v", err)
	}
	want := []struct {
		body    string
		attempt int32
	}{{"h-0", 2}, {"h-1", 1}, {"h-2", 1}}
	for _, w := range want {
		var mv *rmq.MessageView
		for deadline := time.Now().Add(30 * time.Second); mv == nil && time.Now().Before(deadline); {
			mvs, err := fifoReceive(c, 1)
			if err != nil && !notFound(err) {
				t.Logf("receive: %v", err)
			}
			if len(mvs) > 0 {
				mv = mvs[0]
			}
		}
		if mv == nil {
			t.Fatalf("%s never came", w.body)
		}
		if string(mv.GetBody()) != w.body || mv.GetDeliveryAttempt() != w.attempt || mv.GetTopic() != topic {
			t.Fatalf("got %q attempt %d topic %s, want %s attempt %d", mv.GetBody(), mv.GetDeliveryAttempt(), mv.GetTopic(), w.body, w.attempt)
		}
		if w.body == "h-0" && mv.GetOffset() != offset {
			t.Fatalf("h-0 came back at offset %d, first delivered at %d", mv.GetOffset(), offset)
		}
		if err := c.Ack(context.Background(), mv); err != nil {
			t.Fatalf("ack %s: %v", w.body, err)
		}
	}
	t.Logf("fifo: the group was held while h-0 was in flight; h-0 came back at offset %d with delivery attempt 2, then h-1 and h-2", offset)
}

// TestProxyV5FifoClassic: FIFO order and the in-flight hold with a classic broker.
func TestProxyV5FifoClassic(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	topic, group := setupFifo(t, c.ns, []*broker{c.b})
	px := startProxy(t, c.ns)
	p, sc := fifoClients(t, px, topic, group)
	checkFifoOrder(t, p, sc, topic)
	checkFifoHold(t, p, sc, topic, nil)
}

// TestProxyV5FifoRaftGroup: the same with a three-node group, the hold surviving a kill -9 of
// the leader (the orderly POP state is replicated through Raft).
func TestProxyV5FifoRaftGroup(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3)
	g.waitMaster(t, 20*time.Second, nil)
	topic, group := setupFifo(t, ns, g.nodes)
	px := startProxy(t, ns)
	p, sc := fifoClients(t, px, topic, group)
	checkFifoOrder(t, p, sc, topic)
	checkFifoHold(t, p, sc, topic, func() {
		leader := g.waitMaster(t, 20*time.Second, nil)
		leader.kill()
		next := g.waitMaster(t, 30*time.Second, leader)
		t.Logf("fifo: leader %s killed, %s leads", leader.addr, next.addr)
	})
}

// TestProxyV5FifoOrderAcrossLeaderKill: three message groups are sent continuously through the
// proxy to a three-node group while the 5.x SimpleConsumer of the orderly group receives and
// acks them; the leader is killed with kill -9 meanwhile. Per message group the consumer never
// steps back nor skips: each message comes after the one sent before it (a message seen again,
// a redelivery after a lost ack or a producer retry's copy, repeats the latest, never an older
// one), and every message sent arrives.
func TestProxyV5FifoOrderAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3)
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic, group := setupFifo(t, ns, g.nodes)
	px := startProxy(t, ns)
	p, sc := fifoClients(t, px, topic, group)
	const groups, per = 3, 100
	prefix := uniq("kg")

	var sent atomic.Int32
	sendDone := make(chan error, 1)
	go func() {
		for i := 0; i < per; i++ {
			for k := 0; k < groups; k++ {
				msg := &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("%d-%03d", k, i))}
				msg.SetMessageGroup(fmt.Sprintf("%s-%d", prefix, k))
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				var err error
				for {
					if _, err = p.Send(ctx, msg); err == nil || ctx.Err() != nil {
						break
					}
					time.Sleep(50 * time.Millisecond) // the same message again: stored after any copy of it
				}
				cancel()
				if err != nil {
					sendDone <- fmt.Errorf("send %s: %w", msg.Body, err)
					return
				}
				sent.Add(1)
			}
			time.Sleep(10 * time.Millisecond)
		}
		sendDone <- nil
	}()

	last := []int{-1, -1, -1}
	repeats, ackFailures, total := 0, 0, 0
	killed := false
	deadline := time.Now().Add(150 * time.Second)
	for total < groups*per && time.Now().Before(deadline) {
		if !killed && total >= groups*per/4 {
			leader.kill()
			killed = true
			t.Logf("fifo: leader %s killed after %d messages sent, %d received", leader.addr, sent.Load(), total)
		}
		mvs, err := fifoReceive(sc, 16)
		if err != nil && !notFound(err) {
			t.Logf("receive: %v", err)
		}
		for _, mv := range mvs {
			var k, i int
			if _, err := fmt.Sscanf(string(mv.GetBody()), "%d-%d", &k, &i); err != nil || k < 0 || k >= groups {
				t.Fatalf("unexpected message %q", mv.GetBody())
			}
			switch {
			case i == last[k]:
				repeats++
			case i == last[k]+1:
				last[k] = i
				total++
			default:
				t.Fatalf("group %d: received message %d after %d (out of order)", k, i, last[k])
			}
			if err := sc.Ack(context.Background(), mv); err != nil {
				ackFailures++ // redelivered after its invisible time, before anything after it
			}
		}
	}
	if err := <-sendDone; err != nil {
		t.Fatal(err)
	}
	if total != groups*per {
		t.Fatalf("received %d of %d messages in order: last per group %v", total, groups*per, last)
	}
	if !killed {
		t.Fatal("the leader was never killed")
	}
	t.Logf("fifo: %d messages of %d groups in order across the leader kill; %d seen again (redelivered or a retry's copy), %d acks failed", total, groups, repeats, ackFailures)
}
