package broker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"rocketraft/config"
	"rocketraft/dledger"
	"rocketraft/fsm"
	"rocketraft/internal/testport"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// freeAddr returns a loopback address for a server the test starts (testport: below the
// ephemeral range, so no outgoing connection can take it first).
func freeAddr(t *testing.T) string {
	t.Helper()
	return testport.Addr(t)
}

// dlegerConfig is a DLedger-mode broker configuration for node self of peers, in dir, with a
// name server address nobody listens on (registration failures are only logged).
func dlegerConfig(t *testing.T, dir, self, peers string) *config.Broker {
	t.Helper()
	cfg := config.NewBroker()
	cfg.BrokerName = "raft-unit"
	cfg.StorePathRootDir = dir
	cfg.ListenPort = 0
	cfg.NamesrvAddr = freeAddr(t)
	cfg.MappedFileSizeCommitLog = 1 << 20
	cfg.MapedFileSizeConsumeQueue = 1000 * 20
	cfg.EnableDLegerCommitLog = true
	cfg.DLegerGroup = "raft-unit"
	cfg.DLegerPeers = peers
	cfg.DLegerSelfID = self
	cfg.Normalize()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func startDLeger(t *testing.T, cfg *config.Broker) *Broker {
	t.Helper()
	b, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := b.Start(); err != nil {
		_ = b.Close()
		t.Fatalf("Start: %v", err)
	}
	return b
}

func testRecord(t *testing.T, topic, body string) []byte {
	t.Helper()
	rec, err := message.EncodeRecord(&message.Message{
		Topic: topic, Body: []byte(body), BornTimestamp: 1, StoreTimestamp: time.Now().UnixMilli(),
		BornHost: netip.MustParseAddrPort("127.0.0.1:1"), StoreHost: netip.MustParseAddrPort("127.0.0.1:2"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// A one-node group elects itself: the node becomes SYNC_MASTER with brokerId 0, appends go
// through Raft into the state machine's store, reads see them, and a restart replays to the
// same state.
func TestDLegerSingleNodeLeader(t *testing.T) {
	dir := t.TempDir()
	cfg := dlegerConfig(t, dir, "n0", "n0-"+freeAddr(t))
	b := startDLeger(t, cfg)
	waitRole(t, b, roleLeader)
	if b.brokerID() != 0 || b.roleName() != config.RoleSyncMaster {
		t.Fatalf("leader registers as %d/%s", b.brokerID(), b.roleName())
	}
	if ok, remark := b.writable(); !ok {
		t.Fatalf("leader not writable: %s", remark)
	}
	ctx := context.Background()
	res, err := b.commitLog.Append(ctx, [][]byte{testRecord(t, "T", "a"), testRecord(t, "T", "b")})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if len(res) != 2 || res[0].QueueOffset != 0 || res[1].QueueOffset != 1 || res[1].PhysicalOffset <= res[0].PhysicalOffset {
		t.Fatalf("append results %+v", res)
	}
	if got, _ := b.puller.reads.queueMaxOffset("T", 0); got != 2 {
		t.Fatalf("max offset %d after two appends", got)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	b = startDLeger(t, cfg)
	defer b.Close()
	if got, _ := b.puller.reads.queueMaxOffset("T", 0); got != 2 {
		t.Fatalf("max offset %d after restart", got)
	}
	waitRole(t, b, roleLeader)
	res, err = b.commitLog.Append(ctx, [][]byte{testRecord(t, "T", "c")})
	if err != nil || res[0].QueueOffset != 2 {
		t.Fatalf("append after restart: %+v %v", res, err)
	}
}

// A node whose peers never come up has no role: it registers nothing, refuses writes with a
// remark, and the append path's ErrNotLeader maps to SERVICE_NOT_AVAILABLE.
func TestDLegerNoLeaderRefusesWrites(t *testing.T) {
	dir := t.TempDir()
	cfg := dlegerConfig(t, dir, "n1", fmt.Sprintf("n0-%s;n1-%s;n2-%s", freeAddr(t), freeAddr(t), freeAddr(t)))
	b := startDLeger(t, cfg)
	defer b.Close()
	time.Sleep(300 * time.Millisecond)
	if raftOf(t, b).role.get() != roleUnknown {
		t.Fatalf("role %d without any leader", raftOf(t, b).role.get())
	}
	if b.brokerID() != 2 || b.roleName() != config.RoleSlave {
		t.Fatalf("non-leader n1 would register as %d/%s, want 2/SLAVE", b.brokerID(), b.roleName())
	}
	ok, remark := b.writable()
	if ok || !strings.Contains(remark, "no leader") {
		t.Fatalf("writable=%v remark %q", ok, remark)
	}
	_, err := b.commitLog.Append(context.Background(), [][]byte{testRecord(t, "T", "x")})
	if !errors.Is(err, dledger.ErrNotLeader) {
		t.Fatalf("append on a non-leader: %v", err)
	}
	if code, _ := errorCode(err); code != remoting.ServiceNotAvailable {
		t.Fatalf("ErrNotLeader maps to %d", code)
	}
}

func waitRole(t *testing.T, b *Broker, want int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for raftOf(t, b).role.get() != want {
		if time.Now().After(deadline) {
			t.Fatalf("role %d, want %d", raftOf(t, b).role.get(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Outcome-unknown failures must never look like success or like "not stored, retry elsewhere"
// only: they answer SYSTEM_ERROR.
func TestErrorCodeRaftOutcomes(t *testing.T) {
	cases := []struct {
		err  error
		want int32
	}{
		{fmt.Errorf("replicated append: %w", &dledger.NotLeaderError{LeaderID: "n0", LeaderAddr: "h:1"}), remoting.ServiceNotAvailable},
		{fmt.Errorf("replicated append: %w", dledger.ErrLeadershipLost), remoting.SystemError},
		{fmt.Errorf("replicated append: %w", context.DeadlineExceeded), remoting.SystemError},
		{fmt.Errorf("replicated append: %w", dledger.ErrShutdown), remoting.SystemError},
		{fmt.Errorf("replicated append: %w", storage.ErrMessageIllegal), remoting.MessageIllegal},
	}
	for _, c := range cases {
		if got, remark := errorCode(c.err); got != c.want || remark == "" {
			t.Errorf("%v: code %d (%q), want %d", c.err, got, remark, c.want)
		}
	}
}

func TestSplitApplyResult(t *testing.T) {
	r := &fsm.ApplyResult{Appends: []fsm.AppendOutcome{
		{Results: []storage.AppendResult{{QueueOffset: 7}}},
		{Err: storage.ErrMessageIllegal},
	}}
	out, err := splitApplyResult(r, 2)
	if err != nil || out[0].Value[0].QueueOffset != 7 || !errors.Is(out[1].Err, storage.ErrMessageIllegal) {
		t.Fatalf("split: %+v %v", out, err)
	}
	if _, err := splitApplyResult(r, 3); err == nil {
		t.Fatal("a count mismatch must fail the entry")
	}
	if _, err := splitApplyResult("x", 1); err == nil {
		t.Fatal("a foreign response must fail the entry")
	}
}

func TestLeaderAddrCache(t *testing.T) {
	var c leaderAddrCache
	now := time.Now()
	if _, ok := c.get("n0", now); ok {
		t.Fatal("empty cache hit")
	}
	c.put("n0", "127.0.0.1:1", now)
	if a, ok := c.get("n0", now.Add(time.Second)); !ok || a != "127.0.0.1:1" {
		t.Fatalf("get = %q %v", a, ok)
	}
	if _, ok := c.get("n1", now); ok {
		t.Fatal("a new leader id must not reuse the old leader's address")
	}
	if _, ok := c.get("n0", now.Add(leaderAddrTTL+time.Millisecond)); ok {
		t.Fatal("stale entry served")
	}
	c.forget()
	if _, ok := c.get("n0", now); ok {
		t.Fatal("forgotten entry served")
	}
}

// DLedger metadata goes through Raft: a topic, a group and offsets created on a one-node group
// survive a restart because Raft restores and replays them into fresh tables (fsm.New resets
// them), and the leader reads its own queued offsets back at once.
func TestDLegerMetadataReplayedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := dlegerConfig(t, dir, "n0", "n0-"+freeAddr(t))
	b := startDLeger(t, cfg)
	waitRole(t, b, roleLeader)
	if b.topics.Get(cfg.BrokerName) == nil || b.topics.Get("TBW102") == nil {
		t.Fatal("system topics missing in DLedger mode")
	}
	if _, created, err := b.tables.ensureTopic(topicCfg("MetaT", 6)); err != nil || !created {
		t.Fatalf("ensureTopic: %v %v", created, err)
	}
	if _, created, err := b.tables.ensureTopic(topicCfg("MetaT", 1)); err != nil || created {
		t.Fatalf("second ensureTopic must keep the first: %v %v", created, err)
	}
	if gc, err := b.tables.groupOrCreate("MetaG"); err != nil || gc == nil {
		t.Fatalf("groupOrCreate: %+v %v", gc, err)
	}
	b.tables.commitOffset("MetaG", "MetaT", 5, 42)
	if off, ok := b.tables.committedOffset("MetaG", "MetaT", 5); !ok || off != 42 {
		t.Fatalf("leader reads back %d %v", off, ok)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if off, ok := b.offsets.Query("MetaG", "MetaT", 5); ok && off == 42 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("offset never applied to the replicated table")
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.tables.commitOffset("MetaG", "MetaT", 5, 43) // queued at Close: flushed before shutdown
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b = startDLeger(t, cfg)
	defer b.Close()
	waitRole(t, b, roleLeader) // replay of the log is done by the time the leader is ready
	if tc := b.topics.Get("MetaT"); tc == nil || tc.WriteQueueNums != 6 {
		t.Fatalf("topic after restart: %+v", tc)
	}
	if b.groups.Get("MetaG") == nil {
		t.Fatal("group lost in restart")
	}
	if off, ok := b.tables.committedOffset("MetaG", "MetaT", 5); !ok || off != 43 {
		t.Fatalf("offset after restart %d %v, want 43", off, ok)
	}
}

// The group-commit keys reach the leader's batcher: with dLegerBatchMaxItems=1 concurrent sends
// each travel in an entry of their own (the default coalesces them).
func TestDLegerBatchKeysApplied(t *testing.T) {
	cfg := dlegerConfig(t, t.TempDir(), "n0", "n0-"+freeAddr(t))
	cfg.DLegerBatchMaxItems = 1
	cfg.DLegerBatchMaxInFlight = 2
	b := startDLeger(t, cfg)
	defer b.Close()
	waitRole(t, b, roleLeader)
	const n = 20
	errs := make(chan error, n)
	for i := range n {
		rec := testRecord(t, "T", fmt.Sprint(i)) // here: t.Fatal belongs to the test's goroutine
		go func() {
			_, err := b.commitLog.Append(context.Background(), [][]byte{rec})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("append: %v", err)
		}
	}
	if st := raftOf(t, b).batcher.Stats(); st.Items != n || st.Entries != n {
		t.Fatalf("batcher stats %+v, want %d entries of one item", st, n)
	}
}

// On a DLedger leader, sends to a topic it has are served on the connection's read goroutine
// and answered from the batcher's commit path (conn.Defer); everything that could wait is not
// served inline: a new topic (created through Raft), a retry topic, a follower, classic mode.
// Concurrent sends over one connection all get their own answers, and the shutdown drain's
// count of sends being served returns to zero (deferred answers reach the OnRequest hook).
func TestDLegerSendsServedInline(t *testing.T) {
	cfg := dlegerConfig(t, t.TempDir(), "n0", "n0-"+freeAddr(t))
	b := startDLeger(t, cfg)
	defer b.Close()
	waitRole(t, b, roleLeader)
	v2 := func(topic string) *remoting.Command {
		h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: topic, DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, QueueID: 0, BornTimestamp: 1}
		return remoting.NewRequest(remoting.SendMessageV2, h.ToExtV2(), []byte("hello"))
	}
	v1 := func(topic string) *remoting.Command {
		h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: topic, DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, QueueID: 0, BornTimestamp: 1}
		return remoting.NewRequest(remoting.SendMessage, h.ToExt(), []byte("hello"))
	}
	if b.sender.sendsInline(v2("Fresh")) || b.sender.sendsInline(v1("Fresh")) {
		t.Fatal("a send that creates its topic would be served inline")
	}

	c := remoting.NewClient(remoting.ClientConfig{DialTimeout: 3 * time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if resp, err := c.Invoke(ctx, b.server.Addr(), v2("Fresh")); err != nil || resp.Code != remoting.Success {
		t.Fatalf("first send (auto-creates the topic): %v %+v", err, resp)
	}
	if !b.sender.sendsInline(v2("Fresh")) || !b.sender.sendsInline(v1("Fresh")) {
		t.Fatal("a send to an existing topic on the leader is not served inline")
	}
	if b.sender.sendsInline(v2("%RETRY%pg")) {
		t.Fatal("a send to a retry topic would be served inline")
	}

	const n = 200
	offsets := make(chan int64, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := v2("Fresh")
			if i%2 == 1 {
				req = v1("Fresh")
			}
			resp, err := c.Invoke(ctx, b.server.Addr(), req)
			if err != nil || resp.Code != remoting.Success || resp.Ext("msgId") == "" {
				errs <- fmt.Errorf("send %d: %v %+v", i, err, resp)
				return
			}
			off, err := strconv.ParseInt(resp.Ext("queueOffset"), 10, 64)
			if err != nil {
				errs <- fmt.Errorf("send %d: queueOffset %q", i, resp.Ext("queueOffset"))
				return
			}
			offsets <- off
		}()
	}
	wg.Wait()
	close(errs)
	close(offsets)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for off := range offsets {
		if seen[off] || off < 1 || off > n {
			t.Fatalf("queue offset %d repeated or outside 1..%d", off, n)
		}
		seen[off] = true
	}
	if got := b.sd.inflight.Load(); got != 0 {
		t.Fatalf("%d sends still counted in flight after all were answered", got)
	}

	raftOf(t, b).role.set(roleFollower)
	if b.sender.sendsInline(v2("Fresh")) {
		t.Fatal("a follower (which forwards) would serve a send inline")
	}
	raftOf(t, b).role.set(roleLeader)
	classicPl := &classicPlace{cfg: cfg}
	classic := &sender{cfg: cfg, topics: b.topics, place: classicPl, commitLog: classicPl}
	if classic.sendsInline(v2("Fresh")) {
		t.Fatal("classic mode (appends wait for the store) would serve a send inline")
	}
}

// A send served inline whose entry Raft refuses (this node believed it led, but Raft says it is
// not the leader: leadership moved before the proposal) is answered off the commit path: while it
// waits to be forwarded, the connection keeps serving other requests, and with no leader to take
// it the answer is SERVICE_NOT_AVAILABLE (nothing was stored), which clients retry elsewhere.
func TestDLegerUnproposedSendAnsweredOffTheCommitPath(t *testing.T) {
	cfg := dlegerConfig(t, t.TempDir(), "n1", fmt.Sprintf("n0-%s;n1-%s;n2-%s", freeAddr(t), freeAddr(t), freeAddr(t)))
	b := startDLeger(t, cfg)
	defer b.Close()
	if err := b.topics.Put(&protocol.TopicConfig{TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: protocol.PermRead | protocol.PermWrite}); err != nil {
		t.Fatal(err)
	}
	raftOf(t, b).role.set(roleLeader) // what it believed; Raft has no leader
	h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "T", QueueID: 0, BornTimestamp: 1}
	send := remoting.NewRequest(remoting.SendMessageV2, h.ToExtV2(), []byte("hello"))
	if !b.sender.sendsInline(send) {
		t.Fatal("the send would not be served inline")
	}

	c := remoting.NewClient(remoting.ClientConfig{DialTimeout: 3 * time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	answered := make(chan *remoting.Command, 1)
	start := time.Now()
	go func() {
		resp, err := c.Invoke(ctx, b.server.Addr(), send)
		if err != nil {
			t.Error(err)
		}
		answered <- resp
	}()
	time.Sleep(200 * time.Millisecond) // the send is proposed, refused, and waits for a new leader
	raftOf(t, b).role.set(roleUnknown) // leadership is lost: it may now be forwarded, to nobody
	hb := remoting.NewRequest(remoting.HeartBeat, nil, []byte(`{"clientID":"c1"}`))
	if resp, err := c.Invoke(ctx, b.server.Addr(), hb); err != nil || resp.Code != remoting.Success {
		t.Fatalf("heartbeat on the same connection while the send waits: %v %+v", err, resp)
	}
	select {
	case resp := <-answered:
		t.Fatalf("the send was answered before its forwarding gave up: %+v", resp)
	default:
	}
	resp := <-answered
	if resp == nil || resp.Code != remoting.ServiceNotAvailable {
		t.Fatalf("unproposed send answered %+v, want SERVICE_NOT_AVAILABLE", resp)
	}
	if took := time.Since(start); took < forwardWait {
		t.Fatalf("answered after %v, before forwarding to a leader was given up (%v)", took, forwardWait)
	}
	if got := b.sd.inflight.Load(); got != 0 {
		t.Fatalf("%d sends still counted in flight", got)
	}
}

// With dLegerLogStore unset a node keeps the store its data directory holds (the commitlog store
// included, which leaves a mark) and a new node gets the commitlog store; a configured store is taken as
// given (dledger refuses a mismatch).
func TestRaftLogStoreChoice(t *testing.T) {
	fresh := t.TempDir()
	walNode := t.TempDir()
	if err := os.MkdirAll(filepath.Join(walNode, "raft-wal"), 0o755); err != nil {
		t.Fatal(err)
	}
	commitLogNode := t.TempDir()
	if err := os.WriteFile(filepath.Join(commitLogNode, "raft-log-in-commitlog"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		configured, dir, want string
	}{
		{"", fresh, dledger.LogStoreCommitLog},
		{"", walNode, dledger.LogStoreWAL},
		{"", commitLogNode, dledger.LogStoreCommitLog},
		{"wal", fresh, dledger.LogStoreWAL},
		{"commitlog", fresh, dledger.LogStoreCommitLog},
	} {
		if got, why := raftLogStore(c.configured, c.dir); got != c.want || why == "" {
			t.Errorf("raftLogStore(%q, %s) = %q (%s), want %q", c.configured, c.dir, got, why, c.want)
		}
	}
}
