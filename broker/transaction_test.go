package broker

import (
	"context"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"rocketraft/broker/meta"
	"rocketraft/config"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// ---- a classic broker in process ----

type txnHarness struct {
	t      *testing.T
	b      *Broker
	cfg    *config.Broker
	client *remoting.Client
	mu     sync.Mutex
	checks []*remoting.Command
}

// txnConfig is a classic broker's configuration in dir, or with raftAddr a one-node DLedger
// group's, checking transactions every 100 ms once they are 200 ms old.
func txnConfig(t *testing.T, dir, raftAddr string, checkMax int) *config.Broker {
	t.Helper()
	var cfg *config.Broker
	if raftAddr != "" {
		cfg = dlegerConfig(t, dir, "n0", "n0-"+raftAddr)
	} else {
		cfg = config.NewBroker()
		cfg.BrokerName = "txn-test"
		cfg.StorePathRootDir = dir
		cfg.ListenPort = 0
		cfg.NamesrvAddr = ""
		cfg.MappedFileSizeCommitLog = 1 << 20
		cfg.MapedFileSizeConsumeQueue = 1000 * 20
	}
	cfg.TransactionCheckInterval = 100
	cfg.TransactionTimeOut = 200
	cfg.TransactionCheckMax = checkMax
	cfg.Normalize()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func startTxnBroker(t *testing.T, cfg *config.Broker) *txnHarness {
	t.Helper()
	b, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		_ = b.Close()
		t.Fatal(err)
	}
	if cfg.EnableDLegerCommitLog {
		waitRole(t, b, roleLeader)
	}
	h := &txnHarness{t: t, b: b, cfg: cfg}
	h.client = remoting.NewClient(remoting.ClientConfig{Handlers: map[int32]remoting.Handler{
		remoting.CheckTransactionState: func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
			h.mu.Lock()
			h.checks = append(h.checks, req)
			h.mu.Unlock()
			return nil
		},
	}})
	t.Cleanup(h.close)
	return h
}

func (h *txnHarness) close() {
	_ = h.client.Close()
	_ = h.b.Close()
}

func (h *txnHarness) invoke(code int32, ext map[string]string, body []byte) *remoting.Command {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h.client.Invoke(ctx, h.b.Addr(), remoting.NewRequest(code, ext, body))
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

func (h *txnHarness) heartbeat(group string) {
	h.t.Helper()
	hb := protocol.HeartbeatData{ClientID: "test-client", ProducerDataSet: []protocol.ProducerData{{GroupName: group}}}
	if resp := h.invoke(remoting.HeartBeat, nil, protocol.MustEncode(hb)); resp.Code != remoting.Success {
		h.t.Fatalf("heartbeat: %d %s", resp.Code, resp.Remark)
	}
}

// sendHalf sends a transactional message to T queue 1 and returns its half queue offset and
// commitlog offset.
func (h *txnHarness) sendHalf(body string) (int64, int64) {
	h.t.Helper()
	// The client's own TRAN_PREPARED_QUEUE_OFFSET and TRANSACTION_CHECK_TIMES are dropped (else
	// every transaction here would share origin 0 and be discarded unchecked).
	props := message.FormatProperties(map[string]string{message.PropertyTransactionPrepared: "true",
		message.PropertyProducerGroup: "PG", message.PropertyUniqClientMessageID: "U-" + body, message.PropertyTags: "tx",
		message.PropertyTranPreparedQueueOffset: "0", message.PropertyTransactionCheckTimes: "99"})
	sh := &protocol.SendMessageRequestHeader{ProducerGroup: "PG", Topic: "T", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
		QueueID: 1, SysFlag: message.TransactionPreparedType, BornTimestamp: time.Now().UnixMilli(), Properties: props}
	resp := h.invoke(remoting.SendMessage, sh.ToExt(), []byte(body))
	if resp.Code != remoting.Success {
		h.t.Fatalf("send %s: %d %s", body, resp.Code, resp.Remark)
	}
	if resp.Ext("queueId") != "1" {
		h.t.Fatalf("queueId %q, want the requested 1", resp.Ext("queueId"))
	}
	_, phys, err := message.ParseOffsetMsgID(resp.Ext("msgId"))
	if err != nil {
		h.t.Fatal(err)
	}
	off, _ := strconv.ParseInt(resp.Ext("queueOffset"), 10, 64)
	return off, phys
}

func (h *txnHarness) end(group string, halfOff, phys int64, state int32, fromCheck bool) *remoting.Command {
	h.t.Helper()
	return h.invoke(remoting.EndTransaction, map[string]string{"producerGroup": group,
		"tranStateTableOffset": strconv.FormatInt(halfOff, 10), "commitLogOffset": strconv.FormatInt(phys, 10),
		"commitOrRollback": strconv.Itoa(int(state)), "fromTransactionCheck": strconv.FormatBool(fromCheck), "msgId": "x"}, nil)
}

// records reads every record of queue qid of topic.
func (h *txnHarness) records(topic string, qid int32) []*message.Message {
	h.t.Helper()
	st, release, err := h.b.acquireStore()
	if err != nil {
		h.t.Fatal(err)
	}
	defer release()
	var out []*message.Message
	for off := int64(0); ; {
		r := st.GetMessages(topic, qid, off, 32, 0, nil)
		if len(r.Records) == 0 {
			return out
		}
		for _, rec := range r.Records {
			m, _, err := message.DecodeRecord(rec)
			if err != nil {
				h.t.Fatal(err)
			}
			out = append(out, m)
		}
		off = r.NextBeginOffset
	}
}

func (h *txnHarness) waitChecks(n int) []*remoting.Command {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.mu.Lock()
		got := append([]*remoting.Command(nil), h.checks...)
		h.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%d check-backs within 10s, want %d", len(got), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCheckFor waits for a check-back of the message whose UNIQ_KEY is uniq and returns it.
func (h *txnHarness) waitCheckFor(uniq string) *remoting.Command {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.mu.Lock()
		for _, c := range h.checks {
			if c.Ext("msgId") == uniq {
				h.mu.Unlock()
				return c
			}
		}
		h.mu.Unlock()
		if time.Now().After(deadline) {
			h.t.Fatalf("no check-back of %s within 10s", uniq)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func bodiesOf(ms []*message.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Body))
	}
	return out
}

// END_TRANSACTION on a classic broker: commit stores the real message once (a repeated commit is
// ignored), rollback stores nothing, wrong group or offsets are refused; unknown transactions
// are checked back (re-put with a check count, CHECK_TRANSACTION_STATE naming the copy), an
// answer from the check resolves them, and a transaction never answered is discarded after
// transactionCheckMax checks.
func TestTransactionClassic(t *testing.T) {
	testTransactionFlow(t, startTxnBroker(t, txnConfig(t, t.TempDir(), "", 2)))
}

// The same in a one-node DLedger group: every write (half, commit = real message + op record,
// re-put = copy + op record) goes through Raft.
func TestTransactionDLedgerSingleNode(t *testing.T) {
	testTransactionFlow(t, startTxnBroker(t, txnConfig(t, t.TempDir(), freeAddr(t), 2)))
}

func testTransactionFlow(t *testing.T, h *txnHarness) {
	// No producer is connected until the check-back part: nothing is checked before.
	o0, p0 := h.sendHalf("commit-me")
	o1, p1 := h.sendHalf("rollback-me")
	if o0 != 0 || o1 != 1 {
		t.Fatalf("half queue offsets %d %d, want 0 1", o0, o1)
	}
	if got := h.records("T", 1); len(got) != 0 {
		t.Fatalf("half messages visible in T: %v", bodiesOf(got))
	}
	if r := h.end("OTHER", o0, p0, message.TransactionCommitType, false); r.Code != remoting.SystemError {
		t.Fatalf("wrong group: %d %s", r.Code, r.Remark)
	}
	if r := h.end("PG", o0+5, p0, message.TransactionCommitType, false); r.Code != remoting.SystemError {
		t.Fatalf("wrong queue offset: %d %s", r.Code, r.Remark)
	}
	for _, bad := range []int64{p0 + 1, p0 + 7, 1 << 40, p1 + 100} {
		if r := h.end("PG", o0, bad, message.TransactionCommitType, false); r.Code != remoting.SystemError {
			t.Fatalf("wrong commitlog offset %d: %d %s", bad, r.Code, r.Remark)
		}
	}
	for range 2 {
		if r := h.end("PG", o0, p0, message.TransactionCommitType, false); r.Code != remoting.Success {
			t.Fatalf("commit: %d %s", r.Code, r.Remark)
		}
	}
	// Rollback sent as Java does, with the oneway bit: served, not answered.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.client.InvokeOneway(ctx, h.b.Addr(), remoting.NewRequest(remoting.EndTransaction, map[string]string{"producerGroup": "PG",
		"tranStateTableOffset": strconv.FormatInt(o1, 10), "commitLogOffset": strconv.FormatInt(p1, 10),
		"commitOrRollback": "12", "msgId": "x"}, nil)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); len(h.records(meta.TransOpHalfTopic, 0)) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("oneway rollback not applied")
		}
	}
	final := h.records("T", 1)
	if len(final) != 1 || string(final[0].Body) != "commit-me" {
		t.Fatalf("real topic holds %v, want [commit-me]", bodiesOf(final))
	}
	m := final[0]
	props := message.ParseProperties(m.Properties)
	if message.TransactionType(m.SysFlag) != message.TransactionCommitType || m.QueueID != 1 || m.PreparedTransactionOffset != p0 {
		t.Fatalf("committed message: sysFlag %#x queue %d prepared offset %d", m.SysFlag, m.QueueID, m.PreparedTransactionOffset)
	}
	for _, gone := range []string{message.PropertyRealTopic, message.PropertyRealQueueID, message.PropertyTransactionPrepared} {
		if _, ok := props[gone]; ok {
			t.Errorf("committed message keeps %s", gone)
		}
	}
	if props[message.PropertyTags] != "tx" || props[message.PropertyUniqClientMessageID] != "U-commit-me" || props[message.PropertyTranPreparedQueueOffset] != "0" {
		t.Errorf("committed message properties %q", m.Properties)
	}
	if ops := h.records(meta.TransOpHalfTopic, 0); !reflect.DeepEqual(bodiesOf(ops), []string{"0", "1"}) {
		t.Fatalf("op records %v, want [0 1]", bodiesOf(ops))
	}

	// Unknown: checked back; the answer names the copy.
	h.heartbeat("PG")
	o2, p2 := h.sendHalf("check-me")
	if r := h.end("PG", o2, p2, message.TransactionNotType, false); r.Code != remoting.Success {
		t.Fatalf("unknown: %d %s", r.Code, r.Remark)
	}
	chk := h.waitCheckFor("U-check-me")
	copyOff, _ := strconv.ParseInt(chk.Ext("tranStateTableOffset"), 10, 64)
	copyPhys, _ := strconv.ParseInt(chk.Ext("commitLogOffset"), 10, 64)
	if copyOff <= o2 || copyPhys <= p2 || chk.Ext("msgId") != "U-check-me" {
		t.Fatalf("check header %v (half %d at %d)", chk.ExtFields, o2, p2)
	}
	cm, _, err := message.DecodeRecord(chk.Body)
	if err != nil || cm.Topic != "T" || cm.QueueID != 1 || string(cm.Body) != "check-me" || cm.QueueOffset != copyOff || cm.PhysicalOffset != copyPhys {
		t.Fatalf("check body %+v %v", cm, err)
	}
	if got := message.ParseProperties(cm.Properties)[message.PropertyTransactionCheckTimes]; got != "1" {
		t.Fatalf("check times %q, want 1", got)
	}
	if r := h.end("PG", copyOff, copyPhys, message.TransactionCommitType, true); r.Code != remoting.Success {
		t.Fatalf("commit from check: %d %s", r.Code, r.Remark)
	}
	// The producer's own late answer for the original half is ignored.
	if r := h.end("PG", o2, p2, message.TransactionCommitType, false); r.Code != remoting.Success {
		t.Fatalf("late commit: %d %s", r.Code, r.Remark)
	}
	if got := bodiesOf(h.records("T", 1)); !reflect.DeepEqual(got, []string{"commit-me", "check-me"}) {
		t.Fatalf("real topic %v", got)
	}

	// The producer's own answer arrives after a check-back re-put the half: it names the
	// original half and commits the current copy; the check's answer then changes nothing.
	o3, p3 := h.sendHalf("late-answer")
	late := h.waitCheckFor("U-late-answer")
	if r := h.end("PG", o3, p3, message.TransactionCommitType, false); r.Code != remoting.Success {
		t.Fatalf("late own answer: %d %s", r.Code, r.Remark)
	}
	lo, _ := strconv.ParseInt(late.Ext("tranStateTableOffset"), 10, 64)
	lp, _ := strconv.ParseInt(late.Ext("commitLogOffset"), 10, 64)
	if r := h.end("PG", lo, lp, message.TransactionRollbackType, true); r.Code != remoting.Success {
		t.Fatalf("answer of a resolved check: %d %s", r.Code, r.Remark)
	}
	if got := bodiesOf(h.records("T", 1)); !reflect.DeepEqual(got, []string{"commit-me", "check-me", "late-answer"}) {
		t.Fatalf("real topic %v", got)
	}
	h.mu.Lock()
	h.checks = nil
	h.mu.Unlock()

	// Never answered: checked twice, then discarded.
	h.sendHalf("forget-me")
	deadline := time.Now().Add(10 * time.Second)
	for len(h.records(meta.TransCheckMaxTimeTopic, 0)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the unanswered half was not discarded")
		}
		time.Sleep(50 * time.Millisecond)
	}
	n := 0
	for _, c := range h.waitChecks(2) {
		if c.Ext("msgId") == "U-forget-me" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d check-backs of the unanswered half, want transactionCheckMax 2", n)
	}
	if got := bodiesOf(h.records("T", 1)); len(got) != 3 {
		t.Fatalf("real topic %v", got)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		left, err := h.b.txn.Unresolved()
		if err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d halves still unresolved", left)
		}
	}
}

// The check state is rebuilt from the queues after a restart: an unknown transaction left
// before the restart is checked back and resolved by the restarted broker, and a resolved one
// is not checked again.
func TestTransactionSurvivesRestart(t *testing.T) {
	t.Run("classic", func(t *testing.T) { testTransactionRestart(t, txnConfig(t, t.TempDir(), "", 15)) })
	t.Run("dledger", func(t *testing.T) { testTransactionRestart(t, txnConfig(t, t.TempDir(), freeAddr(t), 15)) })
}

func testTransactionRestart(t *testing.T, cfg *config.Broker) {
	h := startTxnBroker(t, cfg) // no producer heartbeats: nothing is checked before the restart
	o0, p0 := h.sendHalf("done")
	if r := h.end("PG", o0, p0, message.TransactionRollbackType, false); r.Code != remoting.Success {
		t.Fatalf("rollback: %d %s", r.Code, r.Remark)
	}
	h.sendHalf("pending")
	h.close()

	h = startTxnBroker(t, cfg)
	h.heartbeat("PG")
	checks := h.waitChecks(1)
	time.Sleep(300 * time.Millisecond) // a few more passes: nothing else is due
	checks = h.waitChecks(len(checks))
	for _, c := range checks {
		if c.Ext("msgId") != "U-pending" {
			t.Fatalf("check-back for %s after the restart", c.Ext("msgId"))
		}
	}
	c := checks[len(checks)-1]
	off, _ := strconv.ParseInt(c.Ext("tranStateTableOffset"), 10, 64)
	phys, _ := strconv.ParseInt(c.Ext("commitLogOffset"), 10, 64)
	if r := h.end("PG", off, phys, message.TransactionCommitType, true); r.Code != remoting.Success {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	if got := bodiesOf(h.records("T", 1)); !reflect.DeepEqual(got, []string{"pending"}) {
		t.Fatalf("real topic %v", got)
	}
}
