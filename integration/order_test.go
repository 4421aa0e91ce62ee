package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// Request codes of the queue-lock tests.
const (
	codeLockBatchMQ   = 41
	codeUnlockBatchMQ = 42
)

type lockMQ struct {
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
	Topic      string `json:"topic"`
}

// lockQueues sends LOCK_BATCH_MQ for clientID to addr and returns the queue ids granted.
func lockQueues(addr, group, clientID, broker, topic string, qids ...int) ([]int, error) {
	return lockRequest(addr, codeLockBatchMQ, group, clientID, broker, topic, qids...)
}

func lockRequest(addr string, code int, group, clientID, broker, topic string, qids ...int) ([]int, error) {
	body := struct {
		ConsumerGroup string   `json:"consumerGroup"`
		ClientID      string   `json:"clientId"`
		MqSet         []lockMQ `json:"mqSet"`
	}{group, clientID, nil}
	for _, q := range qids {
		body.MqSet = append(body.MqSet, lockMQ{broker, q, topic})
	}
	b, _ := json.Marshal(body)
	resp, err := rawRequest(addr, code, nil, b, 10*time.Second)
	if err != nil {
		return nil, err
	}
	if resp.Code != respSuccess {
		return nil, fmt.Errorf("code %d %q", resp.Code, resp.Remark)
	}
	if code == codeUnlockBatchMQ {
		return nil, nil
	}
	var out struct {
		LockOKMQSet []lockMQ `json:"lockOKMQSet"`
	}
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		return nil, fmt.Errorf("lock response %q: %w", resp.Body, err)
	}
	var ids []int
	for _, mq := range out.LockOKMQSet {
		ids = append(ids, mq.QueueID)
	}
	slices.Sort(ids)
	return ids, nil
}

// TestRaftQueueLocksSurviveLeaderKill: LOCK_BATCH_MQ grants are Raft entries, so a new leader
// refuses a queue to a second client while the first may still believe it holds it.
//
//  1. Client A locks queues 0 and 1 on the leader; client B, through a follower (which forwards
//     to the leader), asks for 0 and 2 and gets only 2.
//  2. kill -9 the leader; on the new master B still cannot take 0 or 1 (A's grants were
//     replicated, and a young leader never takes a queue over on expiry grounds), while A
//     renews both, through the new master and through the surviving follower.
//  3. A unlocks 1 through the follower; B then gets 1, and A can no longer take it back.
func TestRaftQueueLocksSurviveLeaderKill(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3)
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic, group := uniq("RaftLock"), uniq("GRaftLock")
	follower := g.followers(leader)[0]
	expect := func(what string, got []int, err error, want ...int) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: granted %v, want %v", what, got, want)
		}
	}
	got, err := lockQueues(leader.addr, group, "clientA", g.name, topic, 0, 1)
	expect("A locks 0,1 on the leader", got, err, 0, 1)
	got, err = lockQueues(follower.addr, group, "clientB", g.name, topic, 0, 2)
	expect("B locks 0,2 through a follower", got, err, 2)
	got, err = lockQueues(leader.addr, group, "clientA", "other-broker", topic, 5)
	expect("a queue of another broker name", got, err)

	leader.kill()
	next := g.waitMaster(t, 15*time.Second, leader)
	var survivor *broker
	for _, b := range g.followers(leader) {
		if b != next {
			survivor = b
		}
	}
	got, err = lockQueues(next.addr, group, "clientB", g.name, topic, 0, 1, 2)
	expect("B on the new master", got, err, 2)
	got, err = lockQueues(next.addr, group, "clientA", g.name, topic, 0, 1)
	expect("A renews on the new master", got, err, 0, 1)
	got, err = lockQueues(survivor.addr, group, "clientA", g.name, topic, 0, 1)
	expect("A renews through the surviving follower", got, err, 0, 1)

	if _, err := lockRequest(survivor.addr, codeUnlockBatchMQ, group, "clientA", g.name, topic, 1); err != nil {
		t.Fatalf("A unlocks 1 through the follower: %v", err)
	}
	got, err = lockQueues(next.addr, group, "clientB", g.name, topic, 0, 1)
	expect("B after A released 1", got, err, 1)
	got, err = lockQueues(next.addr, group, "clientA", g.name, topic, 0, 1)
	expect("A after B took 1", got, err, 0)

	// A bad body is an error answer, not a crash.
	resp, err := rawRequest(next.addr, codeLockBatchMQ, nil, []byte("{not json"), 5*time.Second)
	if err != nil || resp.Code == respSuccess {
		t.Fatalf("malformed LOCK_BATCH_MQ body: %v %+v; want an error code", err, resp)
	}
}

// TestRaftOrderlyConsumerAcrossLeaderKill: an orderly push consumer (official Go client) keeps
// every sharding key's order across a kill -9 of the leader in the middle of consumption, and
// loses nothing.
//
// A producer sends rounds of 8 keys (hash queue selector on the sharding key, each send
// acknowledged before the key's next step) while the consumer consumes; the leader is killed
// once a third of the 8x45 messages is consumed, so both sides must go on with the new leader:
// a failed send is retried with the same body by a new producer instance (the client refreshes
// routes only every 30 s), and the consumer's LOCK_BATCH_MQ and pulls reach the new master
// after its route refresh. The new leader already holds the consumer's replicated lock grant.
//
// Meanwhile a second client keeps asking every node for the consumer's queues and must never
// get one. Per key the consumed steps must be 0..44 in order, where a repetition is allowed only as a
// rewind: the sequence may jump back to an earlier step and then go on step by step. Two causes
// are possible and both are at-least-once delivery, not disorder: a send whose answer died with
// the leader was stored and then stored again by its retry (the same step twice in a row), or a
// queue re-created by a rebalance restarted from its last committed offset. Rewinds are logged;
// a step skipped or consumed out of order fails the test.
func TestRaftOrderlyConsumerAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3)
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic := uniq("RaftOrderly")
	resp, err := rawRequest(leader.addr, metaCodeUpdateAndCreateTopic, map[string]string{
		"topic": topic, "readQueueNums": "4", "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG",
	}, nil, 10*time.Second)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("UPDATE_AND_CREATE_TOPIC: %v %+v", err, resp)
	}
	c := g.asCluster(leader)
	waitTopicRoute(t, c, topic)
	const keys, steps = 8, 45

	var (
		mu      sync.Mutex
		seq     = map[string][]int{}
		n       int
		kill    = make(chan struct{})
		retries int
	)
	group := uniq("GRaftOrderly")
	pc := startOrderlyConsumer(t, c, group, topic, func(m *primitive.MessageExt) {
		key, step, _ := strings.Cut(string(m.Body), ":")
		i, _ := strconv.Atoi(step)
		mu.Lock()
		seq[key] = append(seq[key], i)
		n++
		if n == keys*steps/3 {
			close(kill)
		}
		mu.Unlock()
	})

	sendDone := make(chan error, 1)
	go func() {
		var p interface {
			SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
			Shutdown() error
		}
		defer func() {
			if p != nil {
				_ = p.Shutdown()
			}
		}()
		for step := range steps {
			for k := range keys {
				body := fmt.Sprintf("key-%d:%d", k, step)
				deadline := time.Now().Add(60 * time.Second)
				for {
					if p == nil {
						np, err := newOrderProducer(ns.addr)
						if err != nil {
							sendDone <- err
							return
						}
						p = np
					}
					m := primitive.NewMessage(topic, []byte(body))
					m.WithShardingKey(fmt.Sprintf("key-%d", k))
					r, err := p.SendSync(context.Background(), m)
					if err == nil && r.Status == primitive.SendOK {
						break
					}
					if time.Now().After(deadline) {
						sendDone <- fmt.Errorf("send %s: not acknowledged within 60 s: %v %v", body, err, r)
						return
					}
					mu.Lock()
					retries++
					mu.Unlock()
					_ = p.Shutdown() // a fresh instance reads the current route
					p = nil
					time.Sleep(200 * time.Millisecond)
				}
			}
			time.Sleep(30 * time.Millisecond)
		}
		sendDone <- nil
	}()

	select {
	case <-kill:
	case <-time.After(60 * time.Second):
		t.Fatal("the orderly consumer did not consume a third of the messages within 60 s")
	}
	// From now on a second client asks every node, every 100 ms, for all four queues the
	// consumer holds (it owns them all and renews them every 20 s, with at most ~50 s between
	// successful renewals across the failover, inside the 60 s lock lifetime): it must never get
	// one, before, during or after the failover.
	intruderStop, intruderDone := make(chan struct{}), make(chan []string, 1)
	go func() {
		var granted []string
		for i := 0; ; i++ {
			select {
			case <-intruderStop:
				intruderDone <- granted
				return
			case <-time.After(100 * time.Millisecond):
			}
			b := g.nodes[i%len(g.nodes)]
			if got, err := lockQueues(b.addr, group, "intruder@test", g.name, topic, 0, 1, 2, 3); err == nil && len(got) > 0 {
				granted = append(granted, fmt.Sprintf("%v through %s at %s", got, b.proc.name, time.Now().Format("15:04:05.000")))
			}
		}
	}()
	leader.kill()
	killedAt := time.Now()
	next := g.waitMaster(t, 15*time.Second, leader)
	t.Logf("leader %s killed after %d messages consumed; new master %s", leader.proc.name, keys*steps/3, next.proc.name)
	select {
	case err := <-sendDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(120 * time.Second):
		t.Fatal("the producer did not finish within 120 s")
	}
	t.Logf("producer finished %v after the kill (%d failed attempts retried)", time.Since(killedAt).Round(time.Second), retries)

	done := func() error {
		mu.Lock()
		defer mu.Unlock()
		for k := range keys {
			key := fmt.Sprintf("key-%d", k)
			s := seq[key]
			if len(s) == 0 || s[len(s)-1] != steps-1 {
				return fmt.Errorf("%s: consumed %d messages, last step %v", key, len(s), s[max(len(s)-1, 0):])
			}
		}
		return nil
	}
	consumed := poll(90*time.Second, done)
	close(intruderStop)
	if granted := <-intruderDone; len(granted) > 0 {
		t.Errorf("a second client was granted queues the orderly consumer held: %v", granted)
	}
	if consumed != nil {
		t.Fatalf("every key consumed to its last step after the leader kill: not done within 90 s: %v", consumed)
	}
	t.Logf("consumption finished %v after the kill", time.Since(killedAt).Round(time.Second))
	pc.shutdown()

	mu.Lock()
	defer mu.Unlock()
	rewinds, dups := 0, 0
	for k := range keys {
		key := fmt.Sprintf("key-%d", k)
		s := seq[key]
		if s[0] != 0 {
			t.Errorf("%s starts at step %d", key, s[0])
		}
		for i := 1; i < len(s); i++ {
			switch {
			case s[i] == s[i-1]+1:
			case s[i] <= s[i-1]:
				rewinds++
				dups += s[i-1] - s[i] + 1
			default:
				t.Errorf("%s: step %d follows step %d (skipped or out of order): %v", key, s[i], s[i-1], s)
			}
		}
	}
	t.Logf("%d messages consumed, %d rewinds re-delivering %d messages (at-least-once: retried sends or a re-created queue)", n, rewinds, dups)
}

// newOrderProducer starts a producer with the hash queue selector on its own instance name.
func newOrderProducer(nsAddr string) (rocketmq.Producer, error) {
	p, err := rocketmq.NewProducer(
		producer.WithNameServer([]string{nsAddr}),
		producer.WithGroupName(uniq("PGOrder")),
		producer.WithInstanceName(uniq("orderprod")),
		producer.WithQueueSelector(producer.NewHashQueueSelector()),
		producer.WithRetry(0),
		producer.WithSendMsgTimeout(3*time.Second),
	)
	if err != nil {
		return nil, fmt.Errorf("new producer: %w", err)
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("start producer: %w", err)
	}
	return p, nil
}
