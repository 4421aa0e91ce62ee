package integration

// Transactional messages from the official 5.x Go producer through mqproxy: commit and rollback
// (EndTransaction to the half message's group), transactions left unknown resolved by the
// brokers' check-back, which reaches the proxy (registered as a producer of the topic) and goes
// to the producer's checker over its Telemetry stream; in classic mode, in a three-node group,
// and with the group's leader killed between the half messages and their commit.

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
)

// proxyTxnProps: halves unresolved for 3 s are checked every 500 ms. Longer than txnProps'
// timeout so that a commit or rollback sent right after its half is never overtaken by a
// check-back on a loaded machine (the tests assert those are not checked).
var proxyTxnProps = []brokerOpt{withProp("transactionCheckInterval", "500"), withProp("transactionTimeOut", "3000")}

// newV5TxnProducer starts an official 5.x producer of topic through the proxy at addr whose
// transaction checker asks l (the application's local transaction state).
func newV5TxnProducer(t testing.TB, addr, topic string, l *txnListener) rmq.Producer {
	t.Helper()
	checker := &rmq.TransactionChecker{Check: func(mv *rmq.MessageView) rmq.TransactionResolution {
		switch l.CheckLocalTransaction(&primitive.MessageExt{Message: primitive.Message{Topic: mv.GetTopic(), Body: mv.GetBody()}}) {
		case primitive.CommitMessageState:
			return rmq.COMMIT
		case primitive.RollbackMessageState:
			return rmq.ROLLBACK
		}
		return rmq.UNKNOWN
	}}
	p, err := rmq.NewProducer(&rmq.Config{Endpoint: addr, Credentials: &credentials.SessionCredentials{}},
		rmq.WithTopics(topic), rmq.WithTransactionChecker(checker))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("5.x transactional producer start through %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = p.GracefulStop() })
	return p
}

// sendV5Txns sends transactions "<label>-<i>" for i in [from, from+n) and returns the bodies
// and their open transactions (nil once ended). With end, fates commit and rollback are ended
// at once; otherwise every transaction is left open for the caller.
func sendV5Txns(t testing.TB, p rmq.Producer, topic, label string, from, n int, end bool) ([]string, []rmq.Transaction) {
	t.Helper()
	var bodies []string
	var open []rmq.Transaction
	for i := from; i < from+n; i++ {
		body := fmt.Sprintf("%s-%d", label, i)
		tx := p.BeginTransaction()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := p.SendWithTransaction(ctx, &rmq.Message{Topic: topic, Body: []byte(body)}, tx)
		cancel()
		if err != nil {
			t.Fatalf("transactional send of %s through the proxy: %v", body, err)
		}
		if len(r) != 1 || r[0].TransactionId == "" {
			t.Fatalf("transactional send of %s: receipts %+v, want one with a transaction id", body, r)
		}
		bodies = append(bodies, body)
		if end {
			endTxn(t, tx, body)
			tx = nil
		}
		open = append(open, tx)
	}
	return bodies, open
}

// endTxn commits or rolls back tx by its body's fate (nothing for the fates left unknown).
func endTxn(t testing.TB, tx rmq.Transaction, body string) {
	t.Helper()
	var err error
	switch txnFate(body) {
	case fateCommit:
		err = tx.Commit()
	case fateRollback:
		err = tx.RollBack()
	}
	if err != nil {
		t.Fatalf("end transaction %s: %v", body, err)
	}
}

// expectNotChecked fails if a transaction the producer ended itself was checked back (its
// EndTransaction did not reach the broker in time).
func expectNotChecked(t testing.TB, l *txnListener, bodies []string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range bodies {
		if f := txnFate(b); (f == fateCommit || f == fateRollback) && l.checks[b] > 0 {
			t.Errorf("%s (fate %d) was ended by the producer but checked back %d time(s)", b, f, l.checks[b])
		}
	}
}

// runProxyTxns sends 16 transactions of the four fates through a proxy of ns and checks that
// exactly the committed ones (by the producer, or by its checker) reach a consumer of c.
func runProxyTxns(t *testing.T, ns *namesrv, c *cluster, label string) {
	topic := uniq("PxTxn" + label)
	first := createTopicBySend(t, c.ns.addr, newProducer(t, c), topic, "create-topic")
	cons := startPushConsumer(t, c, uniq("GPxTxn"), topic, all)
	px := startProxy(t, ns)
	l := newTxnListener(false, true)
	p := newV5TxnProducer(t, px.addr, topic, l)
	start := time.Now()
	bodies, _ := sendV5Txns(t, p, topic, "pxt"+label, 0, 16, true)
	done := expectTxnDelivery(t, cons, l, bodies, []string{first.body})
	expectNotChecked(t, l, bodies)
	if n := l.checked(bodies); n < 8 {
		t.Fatalf("only %d of the 8 transactions left unknown were checked back", n)
	}
	t.Logf("proxy %s: 16 transactions through the proxy (4 committed, 4 rolled back, 8 resolved by %d check-backs) settled in %v",
		label, l.totalChecks(), done.Sub(start).Round(time.Millisecond))
}

// TestProxyV5TransactionClassic: a classic broker behind the proxy.
func TestProxyV5TransactionClassic(t *testing.T) {
	t.Parallel()
	c := startCluster(t, proxyTxnProps...)
	runProxyTxns(t, c.ns, c, "Classic")
}

// TestProxyV5TransactionDLedger: a three-node group behind the proxy; the check-backs come from
// its leader.
func TestProxyV5TransactionDLedger(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, proxyTxnProps...)
	leader := g.waitMaster(t, 20*time.Second, nil)
	runProxyTxns(t, ns, g.asCluster(leader), "DLedger")
}

// TestProxyV5TransactionLeaderKill: half messages are stored by a three-node group's leader, the
// leader is killed with kill -9, and the producer's commits and rollbacks (EndTransaction through
// the proxy, which finds the new master) decide them after the new master has checked each back
// once: the committed ones reach a consumer, the rolled-back ones never do. The checker answers
// unknown throughout, so only EndTransaction can have resolved them.
func TestProxyV5TransactionLeaderKill(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, append(chaosProps(nil), proxyTxnProps...)...)
	leader := g.waitMaster(t, 20*time.Second, nil)
	c := g.asCluster(leader)
	topic := uniq("PxTxnKill")
	first := createTopicBySend(t, c.ns.addr, newProducer(t, c), topic, "create-topic")
	waitTopicRoute(t, c, topic)
	px := startProxy(t, ns)
	l := newTxnListener(false, false) // the checker answers unknown
	p := newV5TxnProducer(t, px.addr, topic, l)
	var bodies []string
	var open []rmq.Transaction
	for i := 0; i < 16; i++ {
		if f := i % txnFates; f == fateCommit || f == fateRollback {
			b, o := sendV5Txns(t, p, topic, "pxk", i, 1, false)
			bodies, open = append(bodies, b...), append(open, o...)
		}
	}
	leader.kill()
	killed := time.Now()
	master := g.waitMaster(t, 20*time.Second, leader)
	t.Logf("new master %s %v after the kill", master.proc.name, time.Since(killed).Round(time.Millisecond))
	// The new master checks them back through the proxy (so it knows the proxy as their
	// producer), and each unknown answer re-puts the half: the commits below name the first
	// copies, which the broker applies to the current ones.
	eventually(t, txnCheckPassesWait, "the new master checks back every open transaction", func() error {
		if n := l.checked(bodies); n < len(bodies) {
			return fmt.Errorf("%d of %d checked", n, len(bodies))
		}
		return nil
	})
	for i, tx := range open {
		endTxn(t, tx, bodies[i])
	}
	cons := startPushConsumer(t, g.asCluster(master), uniq("GPxTxnKill"), topic, all)
	expectTxnDelivery(t, cons, l, bodies, []string{first.body})
	t.Logf("proxy: %d transactions stored before the leader's kill -9, ended after it through the proxy (%d check-backs answered unknown meanwhile)",
		len(bodies), l.totalChecks())
}

// TestProxyV5TransactionProxyRestart: the proxy is killed with kill -9 right after a producer
// left two transactions unknown, and started again on the same port. The new proxy knows
// nothing of the producer, which sends its settings only every 5 minutes: the proxy asks for
// them in answer to the producer's next heartbeat (UNRECOGNIZED_CLIENT_TYPE, every 10 s),
// registers at the broker as the topic's producer once they come on a new Telemetry stream, and
// the broker's check-backs reach the producer's checker again.
func TestProxyV5TransactionProxyRestart(t *testing.T) {
	t.Parallel()
	c := startCluster(t, proxyTxnProps...)
	topic := uniq("PxTxnRestart")
	first := createTopicBySend(t, c.ns.addr, newProducer(t, c), topic, "create-topic")
	cons := startPushConsumer(t, c, uniq("GPxTxnRestart"), topic, all)
	px := startProxy(t, c.ns)
	l := newTxnListener(false, true)
	p := newV5TxnProducer(t, px.addr, topic, l)
	started := time.Now()
	bodies, _ := sendV5Txns(t, p, topic, "pxr", 0, 4, true)
	// The Go client sends its settings once more 1 s after its start, then every 5 minutes:
	// the kill comes after that extra sync, which would otherwise hide what is tested here.
	time.Sleep(time.Until(started.Add(1500 * time.Millisecond)))
	px.kill()
	killed := time.Now()
	px.start(t)
	eventually(t, 15*time.Second, "the proxy accepts again", func() error {
		if err := px.exited(); err != nil {
			t.Fatal(err)
		}
		conn, err := net.DialTimeout("tcp", px.addr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err
	})
	var unknown []string
	for _, b := range bodies {
		if f := txnFate(b); f == fateCheckCommit || f == fateCheckRollback {
			unknown = append(unknown, b)
		}
	}
	// The Go client heartbeats every 10 s and drops a broken Telemetry stream after 5 s.
	eventually(t, 60*time.Second, "check-backs through the restarted proxy", func() error {
		if n := l.checked(unknown); n < len(unknown) {
			return fmt.Errorf("%d of %d checked", n, len(unknown))
		}
		return nil
	})
	t.Logf("proxy restart: the check-backs reached the producer %v after the proxy's kill -9", time.Since(killed).Round(time.Millisecond))
	expectTxnDelivery(t, cons, l, bodies, []string{first.body})
	expectNotChecked(t, l, bodies)
}
