package integration

// The official Node.js client through mqproxy with FIFO and transactional messages (scenarios
// of TestNodeClient in node_test.go): the Node producer sends message groups interleaved to a
// FIFO topic and the Node SimpleConsumer and PushConsumer, each of its own orderly group,
// receive every group in send order; the Node producer's transactions are committed, rolled
// back, or left unknown and resolved by its checker, and a Go consumer gets exactly the
// committed ones.

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	rmq "github.com/apache/rocketmq-clients/golang/v5"
)

// orderlyGroup creates one more orderly subscription group (as setupFifo does) and waits until
// every running node holds it.
func orderlyGroup(t *testing.T, c *cluster, nodes []*broker) string {
	t.Helper()
	group := uniq("GFifoNode")
	runAdmin(t, &cluster{ns: c.ns}, "updateSubGroup", "-c", "DefaultCluster", "-g", group, "--consumeMessageOrderly", "true")
	eventually(t, 20*time.Second, "every node holds the orderly group", func() error {
		for _, b := range nodes {
			if !b.running() {
				continue
			}
			resp, err := rawRequest(b.addr, fifoCodeGetGroupConfig, map[string]string{"group": group}, nil, 3*time.Second)
			if err != nil {
				return err
			}
			if !strings.Contains(string(resp.Body), `"consumeMessageOrderly":true`) {
				return fmt.Errorf("%s: group config %s (code %d)", b.addr, resp.Body, resp.Code)
			}
		}
		return nil
	})
	return group
}

// warmUpFifo sends FIFO warm-up messages (one per message group warm-0..3, so every queue gets
// some) through p until every Node consumer in rs has received one.
func warmUpFifo(t *testing.T, p rmq.Producer, topic string, rs ...*nodeRun) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		for g := 0; g < 4; g++ {
			sendFifo(t, p, topic, fmt.Sprintf("warm-%d", g), fmt.Sprintf("warmup-%d-%d", g, i))
		}
		ready := 0
		for _, r := range rs {
			for _, e := range receivedEvents(r.snapshot()) {
				if strings.HasPrefix(e.Body, "warmup-") {
					ready++
					break
				}
			}
		}
		if ready == len(rs) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d Node consumers received a warm-up message in 60 s", ready, len(rs))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// checkNodeFifo: the consumer received every message of every group exactly once, in send
// order within its group, with its message group.
func checkNodeFifo(t *testing.T, who, prefix, mgroup string, groups, per int, ev []nodeEvent) {
	t.Helper()
	next := make([]int, groups)
	for _, e := range receivedEvents(ev) {
		if !strings.HasPrefix(e.Body, prefix+"-") {
			continue
		}
		var g, i int
		if _, err := fmt.Sscanf(strings.TrimPrefix(e.Body, prefix+"-"), "%d-%d", &g, &i); err != nil || g < 0 || g >= groups {
			t.Fatalf("%s: unexpected message %q", who, e.Body)
		}
		if e.Group != fmt.Sprintf("%s-%d", mgroup, g) {
			t.Errorf("%s: %s has message group %q, want %s-%d", who, e.Body, e.Group, mgroup, g)
		}
		if i != next[g] {
			t.Fatalf("%s: group %d: received message %d, expected %d (out of order or repeated)", who, g, i, next[g])
		}
		next[g]++
	}
	for g, n := range next {
		if n != per {
			t.Errorf("%s: group %d: %d of %d messages received", who, g, n, per)
		}
	}
}

// nodeFifo: a FIFO topic and two orderly groups; the Node SimpleConsumer (one group) and
// PushConsumer (the other, FIFO consumption from the group's settings) both receive the four
// message groups the Node producer sent interleaved, each in send order.
func nodeFifo(t *testing.T, c *cluster, nodes []*broker, px *mqproxy) {
	topic, sg := setupFifo(t, c.ns, nodes)
	pg := orderlyGroup(t, c, nodes)
	const groups, per = 4, 8
	mgroup := uniq("nmg")
	common := map[string]string{"endpoint": px.addr, "topic": topic, "prefix": "nf", "count": strconv.Itoa(groups * per), "linger": "2000"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range common {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	sc := startNode(t, "simple-consume", 90*time.Second, with("group", sg))
	pc := startNode(t, "push-consume", 90*time.Second, with("group", pg))
	for _, r := range []*nodeRun{sc, pc} {
		r.waitFor(t, 30*time.Second, "ready", func(e nodeEvent) bool { return e.Event == "ready" })
	}
	warmUpFifo(t, newV5Producer(t, px.addr, topic), topic, sc, pc)
	pr := startNode(t, "fifo-produce", 60*time.Second, map[string]string{
		"endpoint": px.addr, "topic": topic, "groups": strconv.Itoa(groups), "count": strconv.Itoa(per), "prefix": "nf", "mgroup": mgroup})
	sent := 0
	for _, e := range pr.wait(t, 90*time.Second) {
		if e.Event == "sent" {
			sent++
		}
	}
	if sent != groups*per {
		t.Fatalf("the Node producer sent %d of %d FIFO messages", sent, groups*per)
	}
	checkNodeFifo(t, "Node SimpleConsumer", "nf", mgroup, groups, per, sc.wait(t, 120*time.Second))
	checkNodeFifo(t, "Node PushConsumer", "nf", mgroup, groups, per, pc.wait(t, 120*time.Second))
	t.Logf("Node FIFO: %d message groups x %d messages from the Node producer received in send order by the SimpleConsumer and the PushConsumer", groups, per)
}

// nodeTransaction: 16 transactions from the Node producer (4 committed, 4 rolled back, 8 left
// unknown and resolved by its checker): a Go 4.x consumer receives exactly the 8 committed ones,
// once each; only the unknown ones were checked back.
func nodeTransaction(t *testing.T, c *cluster, px *mqproxy, p4 rocketmq.Producer) {
	topic := uniq("NodeTxn")
	createTopicBySend(t, c.ns.addr, p4, topic, "create-topic")
	cons := startPushConsumer(t, c, uniq("GNodeTxn"), topic, all)
	const n = 16
	r := startNode(t, "txn-produce", 60*time.Second, map[string]string{"endpoint": px.addr, "topic": topic, "count": strconv.Itoa(n), "prefix": "ntx", "linger": "2000"})
	ev := r.wait(t, 90*time.Second)
	sent, checks := map[string]string{}, map[string]int{}
	var done nodeEvent
	for _, e := range ev {
		switch e.Event {
		case "sent":
			if e.TxID == "" {
				t.Errorf("%s sent without a transaction id", e.Body)
			}
			sent[e.Body] = e.ID
		case "check":
			checks[e.Body]++
		case "done":
			done = e
		}
	}
	if len(sent) != n || done.Unknown != n/2 || done.Checked != n/2 {
		t.Fatalf("the Node producer sent %d of %d transactions; %d of %d unknown ones checked back\n%s", len(sent), n, done.Checked, done.Unknown, r.tail())
	}
	var commits []string
	for body := range sent {
		if f := txnFate(body); f == fateCommit || f == fateCheckCommit {
			commits = append(commits, body)
		}
		if f := txnFate(body); (f == fateCommit || f == fateRollback) && checks[body] > 0 {
			t.Errorf("%s was ended by the producer but checked back %d time(s)", body, checks[body])
		}
	}
	eventually(t, txnCheckPassesWait, "the committed transactions reach the Go consumer", func() error {
		got := map[string]bool{}
		for _, m := range cons.got.snapshot() {
			got[string(m.Body)] = true
		}
		for _, b := range commits {
			if !got[b] {
				return fmt.Errorf("%s not delivered yet", b)
			}
		}
		return nil
	})
	// A rolled-back one or a second copy would show by now: the broker's checks run every 500 ms.
	time.Sleep(2 * time.Second)
	seen := map[string]int{}
	for _, m := range cons.got.snapshot() {
		body := string(m.Body)
		seen[body]++
		if body == "create-topic" {
			continue
		}
		if id, ok := sent[body]; !ok || !txnCommitted(body) || seen[body] > 1 || m.GetTags() != "TxnTag" || m.MsgId != id {
			t.Errorf("the Go consumer received %q (copy %d, tag %q, id %s); sent %v with id %s, committed %v",
				body, seen[body], m.GetTags(), m.MsgId, ok, id, txnCommitted(body))
		}
	}
	t.Logf("Node transactions: %d committed reached the Go consumer once each; %d check-backs answered for the %d unknown ones", len(commits), len(checks), n/2)
}
