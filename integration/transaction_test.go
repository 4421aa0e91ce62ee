package integration

// Transactional messages with the official Go client's TransactionProducer, in classic mode, in a
// three-node DLedger group, and across kill -9 of the leader (TestChaosTransactionLeaderKill):
// committed transactions reach a consumer, rolled-back ones never do, and transactions left
// unknown are resolved by the broker's check-back (CHECK_TRANSACTION_STATE, answered by the
// producer's CheckLocalTransaction).

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"rocketraft/message"
	"rocketraft/remoting"
)

// txnProps make the check-back happen within about a second: halves unresolved for 1 s are
// checked every 500 ms.
var txnProps = []brokerOpt{withProp("transactionCheckInterval", "500"), withProp("transactionTimeOut", "1000")}

// Fates of transaction i (body "<label>-<i>"), by i % 4.
const (
	fateCommit         = 0 // ExecuteLocalTransaction commits
	fateRollback       = 1 // ExecuteLocalTransaction rolls back
	fateCheckCommit    = 2 // unknown, then the check-back commits
	fateCheckRollback  = 3 // unknown, then the check-back rolls back
	txnFates           = 4
	txnCheckPassesWait = 20 * time.Second
)

func txnFate(body string) int {
	i, _ := strconv.Atoi(body[strings.LastIndexByte(body, '-')+1:])
	return i % txnFates
}

func txnCommitted(body string) bool {
	f := txnFate(body)
	return f == fateCommit || f == fateCheckCommit
}

// txnListener is the application's local transaction state, shared by every producer instance
// of the group (as a database would be).
type txnListener struct {
	// allUnknown: ExecuteLocalTransaction answers unknown for every fate (the chaos test).
	allUnknown bool
	// answering: CheckLocalTransaction answers the fate; unknown while false.
	answering atomic.Bool
	mu        sync.Mutex
	checks    map[string]int // body -> check-backs received
}

func newTxnListener(allUnknown, answering bool) *txnListener {
	l := &txnListener{allUnknown: allUnknown, checks: map[string]int{}}
	l.answering.Store(answering)
	return l
}

func (l *txnListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	if l.allUnknown {
		return primitive.UnkonwnState
	}
	switch txnFate(string(m.Body)) {
	case fateCommit:
		return primitive.CommitMessageState
	case fateRollback:
		return primitive.RollbackMessageState
	default:
		return primitive.UnkonwnState
	}
}

func (l *txnListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	l.checks[string(m.Body)]++
	l.mu.Unlock()
	if !l.answering.Load() {
		return primitive.UnkonwnState
	}
	if txnCommitted(string(m.Body)) {
		return primitive.CommitMessageState
	}
	return primitive.RollbackMessageState
}

// checked returns how many of bodies were checked back at least once.
func (l *txnListener) checked(bodies []string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, b := range bodies {
		if l.checks[b] > 0 {
			n++
		}
	}
	return n
}

func (l *txnListener) totalChecks() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.checks {
		n += c
	}
	return n
}

// startTxnProducer starts a TransactionProducer of group (its own instance name) and shuts it
// down in t.Cleanup.
func startTxnProducer(t testing.TB, nsAddr, group string, l *txnListener) rocketmq.TransactionProducer {
	t.Helper()
	p, err := rocketmq.NewTransactionProducer(l,
		producer.WithNameServer(strings.Split(nsAddr, ";")), // several: proxies (proxy4_matrix_test.go)
		producer.WithGroupName(group),
		producer.WithInstanceName(uniq("txprod")),
		producer.WithRetry(2))
	if err != nil {
		t.Fatalf("new transaction producer: %v", err)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("start transaction producer: %v", err)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { _ = p.Shutdown() }) })
	return p
}

// sendTxns sends n transactional messages "<label>-<i>" and returns the send results.
func sendTxns(t testing.TB, p rocketmq.TransactionProducer, topic, label string, from, n int) []*primitive.TransactionSendResult {
	t.Helper()
	var out []*primitive.TransactionSendResult
	for i := from; i < from+n; i++ {
		body := fmt.Sprintf("%s-%d", label, i)
		var res *primitive.TransactionSendResult
		eventually(t, 15*time.Second, "transactional send of "+body, func() error {
			r, err := p.SendMessageInTransaction(context.Background(), primitive.NewMessage(topic, []byte(body)))
			if err != nil {
				return err
			}
			if r.Status != primitive.SendOK {
				return fmt.Errorf("status %d", r.Status)
			}
			res = r
			return nil
		})
		out = append(out, res)
	}
	return out
}

// expectTxnDelivery waits until the consumer has received every committed body of bodies and
// the producer was asked about every check-resolved rollback, then waits a little longer and
// checks that no rolled-back body arrived and nothing arrived twice. extra are non-transactional
// bodies the consumer may also receive.
func expectTxnDelivery(t testing.TB, c *pushConsumer, l *txnListener, bodies, extra []string) time.Time {
	t.Helper()
	var commits, checkRollbacks []string
	for _, b := range bodies {
		if txnCommitted(b) {
			commits = append(commits, b)
		} else if txnFate(b) == fateCheckRollback || l.allUnknown {
			checkRollbacks = append(checkRollbacks, b)
		}
	}
	eventually(t, txnCheckPassesWait, "committed transactions delivered, unknown ones checked back", func() error {
		got := map[string]bool{}
		for _, m := range c.got.snapshot() {
			got[string(m.Body)] = true
		}
		var missing []string
		for _, b := range commits {
			if !got[b] {
				missing = append(missing, b)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%d of %d committed not delivered: %s", len(missing), len(commits), firstFew(missing))
		}
		if n := l.checked(checkRollbacks); n < len(checkRollbacks) {
			return fmt.Errorf("%d of %d transactions to roll back by check-back not checked yet", len(checkRollbacks)-n, len(checkRollbacks))
		}
		return nil
	})
	done := time.Now()
	// Two more check passes: a rollback answered by the check must not turn into a delivery.
	time.Sleep(1500 * time.Millisecond)
	allowed := map[string]bool{}
	for _, b := range append(slices.Clone(commits), extra...) {
		allowed[b] = true
	}
	seen := map[string]int{}
	for _, m := range c.got.snapshot() {
		b := string(m.Body)
		seen[b]++
		if !allowed[b] {
			t.Errorf("delivered %q, which was rolled back (fate %d)", b, txnFate(b))
		}
		if seen[b] == 2 {
			t.Errorf("delivered %q twice", b)
		}
		if txnCommitted(b) && m.GetProperty(message.PropertyTransactionPrepared) != "" {
			t.Errorf("committed %q still carries %s", b, message.PropertyTransactionPrepared)
		}
	}
	return done
}

// TestTransactionClassic: a classic broker, 16 transactions of the four fates.
func TestTransactionClassic(t *testing.T) {
	t.Parallel()
	c := startCluster(t, txnProps...)
	topic := uniq("TxnClassic")
	first := createTopicBySend(t, c.ns.addr, newProducer(t, c), topic, "create-topic")
	cons := startPushConsumer(t, c, uniq("GTxn"), topic, all)
	l := newTxnListener(false, true)
	p := startTxnProducer(t, c.ns.addr, uniq("PGTxn"), l)
	res := sendTxns(t, p, topic, "txc", 0, 16)
	var bodies []string
	for i := range res {
		bodies = append(bodies, fmt.Sprintf("txc-%d", i))
	}
	expectTxnDelivery(t, cons, l, bodies, []string{first.body})
	t.Logf("classic: %d transactions, %d check-backs answered", len(bodies), l.totalChecks())
}

// TestTransactionDLedger: a three-node group; the same fates, plus an END_TRANSACTION sent by
// hand to a follower (which forwards it to the leader).
func TestTransactionDLedger(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, txnProps...)
	leader := g.waitMaster(t, 20*time.Second, nil)
	c := g.asCluster(leader)
	topic := uniq("TxnDLedger")
	first := createTopicBySend(t, c.ns.addr, newProducer(t, c), topic, "create-topic")
	cons := startPushConsumer(t, c, uniq("GTxn"), topic, all)
	l := newTxnListener(false, true)
	group := uniq("PGTxn")
	p := startTxnProducer(t, ns.addr, group, l)
	res := sendTxns(t, p, topic, "txd", 0, 16)
	// Transaction 2 (unknown for the producer) is committed by hand through a follower.
	var follower *broker
	for _, b := range g.nodes {
		if b != leader {
			follower = b
		}
	}
	endViaFollower(t, follower.addr, group, res[2])
	var bodies []string
	for i := range res {
		bodies = append(bodies, fmt.Sprintf("txd-%d", i))
	}
	expectTxnDelivery(t, cons, l, bodies, []string{first.body})
	n := stopAndCompare(t, g)
	t.Logf("dledger: %d transactions, %d check-backs answered; commitlogs identical over %d bytes", len(bodies), l.totalChecks(), n)
}

// stopAndCompare stops the group's running nodes and checks that their commitlogs (halves, op
// records, committed messages: each commit one Raft entry) are byte-identical over the records
// every node holds: a node killed and not restarted holds a prefix of the others'.
func stopAndCompare(t testing.TB, g *raftGroup) int64 {
	t.Helper()
	for _, b := range g.nodes {
		if b.running() {
			if err := b.stop(); err != nil {
				t.Fatal(err)
			}
		}
	}
	files := map[string]map[string][]byte{} // file name -> node -> records
	for _, b := range g.nodes {
		dir := commitLogDir(b)
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("read %s: %v", dir, err)
		}
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if files[e.Name()] == nil {
				files[e.Name()] = map[string][]byte{}
			}
			files[e.Name()][b.proc.name] = data[:recordsEnd(data)]
		}
	}
	var compared int64
	for _, name := range slices.Sorted(maps.Keys(files)) {
		var ref []byte
		var refNode string
		n := -1
		for node, data := range files[name] {
			if n < 0 || len(data) < n {
				n = len(data)
			}
			if ref == nil {
				ref, refNode = data, node
			}
		}
		for node, data := range files[name] {
			if !bytes.Equal(ref[:n], data[:n]) {
				t.Fatalf("commitlog %s differs between %s and %s within the first %d bytes", name, refNode, node, n)
			}
		}
		compared += int64(n)
	}
	return compared
}

// recordsEnd is where the valid records of a commitlog file end (its blank marker, zeros, or a
// torn record).
func recordsEnd(b []byte) int {
	off := 0
	for off+8 <= len(b) && binary.BigEndian.Uint32(b[off+4:]) != message.BlankMagicCode {
		v, err := message.ParseView(b[off:])
		if err != nil {
			break
		}
		off += v.Size()
	}
	return off
}

// endViaFollower sends END_TRANSACTION commit for r to addr (a follower) and expects SUCCESS.
func endViaFollower(t testing.TB, addr, group string, r *primitive.TransactionSendResult) {
	t.Helper()
	_, phys, err := message.ParseOffsetMsgID(r.OffsetMsgID)
	if err != nil {
		t.Fatalf("offset msgId %q: %v", r.OffsetMsgID, err)
	}
	cl := remoting.NewClient(remoting.ClientConfig{})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := remoting.NewRequest(remoting.EndTransaction, map[string]string{"producerGroup": group,
		"tranStateTableOffset": strconv.FormatInt(r.QueueOffset, 10), "commitLogOffset": strconv.FormatInt(phys, 10),
		"commitOrRollback": "8", "fromTransactionCheck": "false", "msgId": r.MsgID}, nil)
	resp, err := cl.Invoke(ctx, addr, req)
	if err != nil {
		t.Fatalf("END_TRANSACTION to follower %s: %v", addr, err)
	}
	if resp.Code != remoting.Success {
		t.Fatalf("END_TRANSACTION to follower %s: code %d %s", addr, resp.Code, resp.Remark)
	}
}

// txnChaosRounds is RR_CHAOS_TXN_ROUNDS (default 1; make chaos: 5): leader kills, each with its
// own batch of transactions left unknown.
func txnChaosRounds(t testing.TB) int {
	t.Helper()
	n := 1
	if v := os.Getenv("RR_CHAOS_TXN_ROUNDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("RR_CHAOS_TXN_ROUNDS=%q: want a positive integer", v)
		}
	}
	return n
}

// TestChaosTransactionLeaderKill: each round sends 12 transactions the producer leaves unknown;
// once the leader has checked every one back (and got "unknown", so each half was re-put), the
// leader is killed with SIGKILL. A producer instance of the same group that now answers (an
// application restarted after the crash) gets the new leader's check-backs: the committed ones
// reach a consumer started on the new master, the rolled-back ones never do. The killed node is
// restarted before the next round. make test runs one round (about 7 s).
func TestChaosTransactionLeaderKill(t *testing.T) {
	t.Parallel()
	rounds := txnChaosRounds(t)
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, append(chaosProps(nil), txnProps...)...)
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic := uniq("TxnChaos")
	first := createTopicBySend(t, ns.addr, newProducer(t, &cluster{ns: ns, b: leader}), topic, "create-topic")
	waitTopicRoute(t, &cluster{ns: ns, b: leader}, topic)
	group := uniq("PGTxnChaos")
	var bodies []string
	const perRound = 12
	l := newTxnListener(true, false)
	next := 0
	for round := 0; round < rounds; round++ {
		l.answering.Store(false)
		p := startTxnProducer(t, ns.addr, group, l)
		sendTxns(t, p, topic, "txk", next, perRound)
		var batch []string
		for range perRound {
			batch = append(batch, fmt.Sprintf("txk-%d", next))
			next++
		}
		bodies = append(bodies, batch...)
		eventually(t, txnCheckPassesWait, "the leader checks back every transaction of the round", func() error {
			if n := l.checked(batch); n < len(batch) {
				return fmt.Errorf("%d of %d checked", n, len(batch))
			}
			return nil
		})
		leader = g.waitMaster(t, 20*time.Second, nil)
		killed := time.Now()
		leader.kill()
		master := g.waitMaster(t, 20*time.Second, leader)
		newMaster := time.Now()
		l.answering.Store(true)
		// The restarted application: a producer-only Go client heartbeats only the masters of
		// topics it has routes for, so it goes on with its work (one more transaction) and is
		// registered with the new master a second after its start.
		p = startTxnProducer(t, ns.addr, group, l)
		sendTxns(t, p, topic, "txk", next, 1)
		bodies = append(bodies, fmt.Sprintf("txk-%d", next))
		next++
		cons := startPushConsumer(t, g.asCluster(master), uniq("GTxnChaos"), topic, all)
		done := expectTxnDelivery(t, cons, l, bodies, []string{first.body})
		cons.shutdown()
		t.Logf("CHAOS transactions round %d/%d: kill -9 of leader %s, new master %s after %v; %d transactions unknown at the kill resolved by its check-back and delivered %v after the kill (%d check-backs in all)",
			round+1, rounds, leader.proc.name, master.proc.name, newMaster.Sub(killed).Round(10*time.Millisecond), len(batch),
			done.Sub(killed).Round(10*time.Millisecond), l.totalChecks())
		if round < rounds-1 {
			leader.restart() // the next round's kill needs a majority left
		}
	}
	t.Logf("CHAOS transactions: commitlogs of the 3 nodes identical over %d bytes", stopAndCompare(t, g))
}
