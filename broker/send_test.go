package broker

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/meta"
	"rocketraft/config"
	"rocketraft/dledger"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// sendTestLog is a CommitLog that keeps the records it is given and answers with consecutive
// physical and queue offsets, plus err (a flush timeout still stores the records).
type sendTestLog struct {
	mu      sync.Mutex
	records [][]byte
	next    int64
	err     error
}

func (c *sendTestLog) Append(_ context.Context, records [][]byte) ([]storage.AppendResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil && !errors.Is(c.err, storage.ErrFlushDiskTimeout) {
		return nil, c.err
	}
	res := make([]storage.AppendResult, len(records))
	for i, r := range records {
		res[i] = storage.AppendResult{PhysicalOffset: c.next, QueueOffset: int64(len(c.records))}
		c.next += int64(len(r))
		c.records = append(c.records, r)
	}
	return res, c.err
}

// stored decodes the records appended so far.
func (c *sendTestLog) stored(t *testing.T) []*message.Message {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*message.Message, 0, len(c.records))
	for _, r := range c.records {
		m, _, err := message.DecodeRecord(r)
		if err != nil {
			t.Fatalf("decode an appended record: %v", err)
		}
		out = append(out, m)
	}
	return out
}

// asyncSendTestLog adds AppendCall, which makes the sender take the DLedger path.
type asyncSendTestLog struct{ sendTestLog }

func (c *asyncSendTestLog) AppendCall(call *appendCall) {
	call.finish(c.Append(context.Background(), call.records))
}

// sendTestPlace is a node's place with the answers a test sets. The methods a test does not expect
// to be called are the nil embedded interface's: they panic.
type sendTestPlace struct {
	place
	writableOK bool
	remark     string
	forwards   bool
	decidesNow bool
	leader     string
	self       string
	part       haPart
	store      *storage.Store
	acquireErr error
}

func (p *sendTestPlace) writable() (bool, string) { return p.writableOK, p.remark }
func (p *sendTestPlace) forwardsWrites() bool     { return p.forwards }
func (p *sendTestPlace) decides() bool            { return p.decidesNow }
func (p *sendTestPlace) leaderID() (string, string) {
	return p.leader, p.self
}
func (p *sendTestPlace) haPart() haPart { return p.part }
func (p *sendTestPlace) acquire() (*storage.Store, func(), error) {
	if p.acquireErr != nil {
		return nil, nil, p.acquireErr
	}
	return p.store, noRelease, nil
}

var sendTestStoreHost = netip.MustParseAddrPort("127.0.0.1:10911")

// sendFixture is a sender on a writable classic-like place with a capturing commit log, a topic
// table holding T (4 queues) and RO (read-only), and recording fakes for the steps other parts
// own.
type sendFixture struct {
	s          *sender
	log        *sendTestLog
	pl         *sendTestPlace
	cfg        *config.Broker
	perm       int32
	groups     map[string]*protocol.SubscriptionGroupConfig
	ensured    []string
	registered int
	created    *protocol.TopicConfig // what createTopicFromDefault answers
	createErr  error
	replicas   int32 // waitReplicas' answer
}

func newSendFixture(t *testing.T) *sendFixture {
	t.Helper()
	topics, err := meta.OpenTopics(filepath.Join(t.TempDir(), "topics.json"), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []*protocol.TopicConfig{
		{TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: protocol.PermRead | protocol.PermWrite},
		{TopicName: "RO", ReadQueueNums: 1, WriteQueueNums: 1, Perm: protocol.PermRead},
	} {
		if err := topics.Put(tc); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.NewBroker()
	cfg.BrokerName, cfg.BrokerClusterName, cfg.RegionID = "b1", "C1", "R1"
	f := &sendFixture{log: &sendTestLog{}, pl: &sendTestPlace{writableOK: true, decidesNow: true}, cfg: cfg, perm: protocol.PermRead | protocol.PermWrite,
		groups: map[string]*protocol.SubscriptionGroupConfig{}, replicas: remoting.Success}
	var zero Broker // applyDelay (schedule.go) reads nothing of the broker
	f.s = &sender{
		cfg: cfg, logger: hclog.NewNullLogger(), place: f.pl, commitLog: f.log, topics: topics, stats: newStats(),
		delayLevels: []time.Duration{time.Second, 5 * time.Second, 10 * time.Second},
		fwd:         &forwarder{place: f.pl, cfg: cfg, logger: hclog.NewNullLogger()},
		storeHost:   func() netip.AddrPort { return sendTestStoreHost },
		ensureTopic: func(tc *protocol.TopicConfig) (*protocol.TopicConfig, bool, error) {
			f.ensured = append(f.ensured, tc.TopicName)
			return tc, true, nil
		},
		createTopicFromDefault: func(string, string, int32, int32) (*protocol.TopicConfig, bool, error) {
			return f.created, f.created != nil, f.createErr
		},
		groupOrCreate:    func(name string) (*protocol.SubscriptionGroupConfig, error) { return f.groups[name], nil },
		brokerPermission: func() int32 { return f.perm },
		triggerRegister:  func() { f.registered++ },
		refuseBadNames:   func(*remoting.Command, ...nameCheck) *remoting.Command { return nil },
		applyDelay:       zero.applyDelay,
		waitReplicas: func(bool, []storage.AppendResult) (int32, string) {
			if f.replicas != remoting.Success {
				return f.replicas, "slave lagging"
			}
			return remoting.Success, ""
		},
	}
	return f
}

// invoke sends req to the fixture's sender over a loopback connection. The server starts here,
// after the test set the fixture up, so its goroutines see what the test wrote.
func (f *sendFixture) invoke(t *testing.T, req *remoting.Command) *remoting.Command {
	t.Helper()
	// The sends' fields are decoded flat, as the broker's server decodes them (handlers.go).
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0", FlatExtCodes: (&Broker{}).flatExtCodes()})
	for _, code := range []int32{remoting.SendMessage, remoting.SendMessageV2, remoting.SendBatchMessage} {
		srv.HandleInline(code, f.s.handleSend, f.s.sendsInline)
	}
	srv.Handle(remoting.ConsumerSendMsgBack, f.s.handleSendBack)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close() }()
	c := remoting.NewClient(remoting.ClientConfig{DialTimeout: 3 * time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, srv.Addr(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// send is SEND_MESSAGE of body to h's topic (V2 and batch codes use the short names).
func (f *sendFixture) send(t *testing.T, code int32, h protocol.SendMessageRequestHeader, body []byte) *remoting.Command {
	t.Helper()
	if h.ProducerGroup == "" {
		h.ProducerGroup = "pg"
	}
	ext := h.ToExt()
	if code != remoting.SendMessage {
		ext = h.ToExtV2()
	}
	return f.invoke(t, remoting.NewRequest(code, ext, body))
}

// A plain send is stored as sent in its topic and queue, with CLUSTER added and this broker's
// store host, and answered with the offset msgId, the queue and its offset.
func TestSenderStoresPlainSend(t *testing.T) {
	f := newSendFixture(t)
	resp := f.send(t, remoting.SendMessage, protocol.SendMessageRequestHeader{Topic: "T", QueueID: 2, Properties: "TAGS\x01a\x02", BornTimestamp: 7}, []byte("hello"))
	if resp.Code != remoting.Success {
		t.Fatalf("code %d %q", resp.Code, resp.Remark)
	}
	ms := f.log.stored(t)
	if len(ms) != 1 {
		t.Fatalf("%d records stored, want 1", len(ms))
	}
	m := ms[0]
	if m.Topic != "T" || m.QueueID != 2 || string(m.Body) != "hello" || m.BornTimestamp != 7 || m.StoreHost != sendTestStoreHost {
		t.Fatalf("stored %+v", m)
	}
	if !m.BornHost.Addr().IsLoopback() {
		t.Fatalf("born host %v, want the client's loopback address", m.BornHost)
	}
	props := message.ParseProperties(m.Properties)
	if props[message.PropertyCluster] != "C1" || props[message.PropertyTags] != "a" {
		t.Fatalf("properties %q", m.Properties)
	}
	want := map[string]string{"msgId": message.OffsetMsgID(sendTestStoreHost, 0), "queueId": "2", "queueOffset": "0", "MSG_REGION": "R1", "TRACE_ON": "true"}
	for k, v := range want {
		if resp.Ext(k) != v {
			t.Errorf("answer %s = %q, want %q", k, resp.Ext(k), v)
		}
	}
	// queueId -1: the broker picks one of the topic's write queues.
	resp = f.send(t, remoting.SendMessageV2, protocol.SendMessageRequestHeader{Topic: "T", QueueID: -1}, []byte("x"))
	if q, _ := strconv.Atoi(resp.Ext("queueId")); resp.Code != remoting.Success || q < 0 || q > 3 {
		t.Fatalf("picked queue: code %d queueId %q", resp.Code, resp.Ext("queueId"))
	}
}

// Sends the broker refuses are answered with RocketMQ's code and never reach the commit log.
func TestSenderRefusals(t *testing.T) {
	batchBody, err := message.EncodeBatch([]message.BatchEntry{{Body: []byte("a")}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		code   int32
		h      protocol.SendMessageRequestHeader
		body   []byte
		setup  func(f *sendFixture)
		want   int32
		remark string
	}{
		{"no topic", remoting.SendMessage, protocol.SendMessageRequestHeader{}, []byte("x"), nil, remoting.SystemError, "topic and producerGroup are required"},
		{"invalid topic", remoting.SendMessage, protocol.SendMessageRequestHeader{Topic: "bad topic"}, []byte("x"), nil, remoting.InvalidParameter, "invalid topic"},
		{"system topic", remoting.SendMessage, protocol.SendMessageRequestHeader{Topic: meta.ScheduleTopic}, []byte("x"), nil, remoting.NoPermission, "is forbidden"},
		{"batch to a retry topic", remoting.SendBatchMessage, protocol.SendMessageRequestHeader{Topic: "%RETRY%g"}, batchBody, nil, remoting.MessageIllegal, "batch messages cannot be sent"},
		{"empty body", remoting.SendMessage, protocol.SendMessageRequestHeader{Topic: "T"}, nil, nil, remoting.MessageIllegal, "body is empty"},
		{"body too large", remoting.SendMessage, protocol.SendMessageRequestHeader{Topic: "T"}, []byte("0123456789"),
			func(f *sendFixture) { f.cfg.MaxMessageSize = 4 }, remoting.MessageIllegal, "exceeds maxMessageSize 4"},
		{"broker read-only", remoting.SendMessage, protocol.SendMessageRequestHeader{Topic: "T"}, []byte("x"),
			func(f *sendFixture) { f.perm = protocol.PermRead }, remoting.NoPermission, "the broker[b1] sending message is forbidden"},
		{"topic read-only", remoting.SendMessage, protocol.SendMessageRequestHeader{Topic: "RO"}, []byte("x"), nil, remoting.NoPermission, "the topic[RO] sending message is forbidden"},
		{"queue out of range", remoting.SendMessage, protocol.SendMessageRequestHeader{Topic: "T", QueueID: 4}, []byte("x"), nil, remoting.InvalidParameter, "request queueId[4] is illegal"},
		{"transactional batch", remoting.SendBatchMessage, protocol.SendMessageRequestHeader{Topic: "T", Properties: "TRAN_MSG\x01true\x02"}, batchBody, nil, remoting.MessageIllegal, "cannot be transactional"},
		{"unknown topic, no auto-creation", remoting.SendMessage, protocol.SendMessageRequestHeader{Topic: "Nope"}, []byte("x"), nil, remoting.TopicNotExist, "topic[Nope] not exist"},
		{"topic creation failed", remoting.SendMessage, protocol.SendMessageRequestHeader{Topic: "Nope"}, []byte("x"),
			func(f *sendFixture) { f.createErr = dledger.ErrNotLeader }, remoting.ServiceNotAvailable, "create topic Nope: service not available"},
		{"retry of an unknown group", remoting.SendMessage, protocol.SendMessageRequestHeader{Topic: "%RETRY%g"}, []byte("x"), nil, remoting.SubscriptionGroupNotExist, "subscription group not exist, g"},
		{"bad DELAY", remoting.SendMessage, protocol.SendMessageRequestHeader{Topic: "T", Properties: "DELAY\x01x\x02"}, []byte("x"), nil, remoting.MessageIllegal, "not an integer"},
		{"not writable, nowhere to forward", remoting.SendMessage, protocol.SendMessageRequestHeader{Topic: "T"}, []byte("x"),
			func(f *sendFixture) { f.pl.writableOK, f.pl.remark = false, "the broker is a slave" }, remoting.ServiceNotAvailable, "the broker is a slave"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newSendFixture(t)
			if c.setup != nil {
				c.setup(f)
			}
			resp := f.send(t, c.code, c.h, c.body)
			if resp.Code != c.want || !strings.Contains(resp.Remark, c.remark) {
				t.Fatalf("code %d %q, want %d with %q", resp.Code, resp.Remark, c.want, c.remark)
			}
			if n := len(f.log.stored(t)); n != 0 {
				t.Fatalf("%d records appended for a refused send", n)
			}
		})
	}
}

// A batch is stored as one record per entry, answered with every msgId; an entry that asks for
// a delay refuses the whole batch.
func TestSenderBatch(t *testing.T) {
	f := newSendFixture(t)
	body, err := message.EncodeBatch([]message.BatchEntry{{Body: []byte("a")}, {Body: []byte("b"), Properties: "CLUSTER\x01X\x02"}, {Body: []byte("c")}})
	if err != nil {
		t.Fatal(err)
	}
	resp := f.send(t, remoting.SendBatchMessage, protocol.SendMessageRequestHeader{Topic: "T", QueueID: 1}, body)
	if resp.Code != remoting.Success {
		t.Fatalf("code %d %q", resp.Code, resp.Remark)
	}
	ms := f.log.stored(t)
	if len(ms) != 3 || len(strings.Split(resp.Ext("msgId"), ",")) != 3 {
		t.Fatalf("%d records, msgId %q", len(ms), resp.Ext("msgId"))
	}
	for i, want := range []string{"C1", "X", "C1"} {
		if got := message.ParseProperties(ms[i].Properties)[message.PropertyCluster]; got != want || ms[i].QueueID != 1 {
			t.Errorf("entry %d: CLUSTER %q queue %d, want %q queue 1", i, got, ms[i].QueueID, want)
		}
	}
	delayed, err := message.EncodeBatch([]message.BatchEntry{{Body: []byte("a"), Properties: "DELAY\x012\x02"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp := f.send(t, remoting.SendBatchMessage, protocol.SendMessageRequestHeader{Topic: "T"}, delayed); resp.Code != remoting.MessageIllegal {
		t.Fatalf("delayed batch entry: code %d %q", resp.Code, resp.Remark)
	}
}

// A transactional send is stored as a half message, a delayed one in the schedule topic; both
// are answered with the queue the client asked for.
func TestSenderHalfAndDelayedTargets(t *testing.T) {
	// Each send's properties, and where it is stored: topic/queue and REAL_TOPIC.
	targets := map[string][3]string{
		"TRAN_MSG\x01true\x02": {meta.TransHalfTopic, "0", "T"},
		"DELAY\x012\x02":       {meta.ScheduleTopic, "1", "T"},
		"DELAY\x010\x02":       {"T", "3", ""},
	}
	for props, want := range targets {
		f := newSendFixture(t)
		resp := f.send(t, remoting.SendMessage, protocol.SendMessageRequestHeader{Topic: "T", QueueID: 3, Properties: props}, []byte("x"))
		if resp.Code != remoting.Success || resp.Ext("queueId") != "3" {
			t.Fatalf("%q: code %d %q queueId %q", props, resp.Code, resp.Remark, resp.Ext("queueId"))
		}
		m := f.log.stored(t)[0]
		got := [3]string{m.Topic, strconv.Itoa(int(m.QueueID)), message.ParseProperties(m.Properties)[message.PropertyRealTopic]}
		if got != want {
			t.Errorf("%q: stored as %v, want %v", props, got, want)
		}
	}
}

// A send to %RETRY%<group> past the group's retry limit goes to %DLQ%<group> queue 0, created on
// demand (and registered); under the limit it stays a retry.
func TestSenderRetryPolicy(t *testing.T) {
	f := newSendFixture(t)
	f.groups["g"] = &protocol.SubscriptionGroupConfig{GroupName: "g", RetryMaxTimes: 2, RetryQueueNums: 1}
	if err := f.s.topics.Put(&protocol.TopicConfig{TopicName: "%RETRY%g", ReadQueueNums: 1, WriteQueueNums: 1, Perm: protocol.PermRead | protocol.PermWrite}); err != nil {
		t.Fatal(err)
	}
	for _, reconsume := range []int32{1, 2} {
		resp := f.send(t, remoting.SendMessage, protocol.SendMessageRequestHeader{Topic: "%RETRY%g", ReconsumeTimes: reconsume, Properties: "DELAY\x013\x02"}, []byte("x"))
		if resp.Code != remoting.Success {
			t.Fatalf("reconsume %d: code %d %q", reconsume, resp.Code, resp.Remark)
		}
	}
	ms := f.log.stored(t)
	if ms[0].Topic != meta.ScheduleTopic || message.ParseProperties(ms[0].Properties)[message.PropertyRealTopic] != "%RETRY%g" {
		t.Fatalf("under the limit: stored in %s %q", ms[0].Topic, ms[0].Properties)
	}
	if ms[1].Topic != "%DLQ%g" || ms[1].QueueID != 0 || strings.Contains(ms[1].Properties, "DELAY") {
		t.Fatalf("past the limit: stored in %s/%d %q", ms[1].Topic, ms[1].QueueID, ms[1].Properties)
	}
	if len(f.ensured) != 1 || f.ensured[0] != "%DLQ%g" || f.registered != 1 {
		t.Fatalf("ensured %v, registered %d", f.ensured, f.registered)
	}
}

// A topic created from the default topic is registered at once; the append's outcome decides
// the code: a flush timeout still answers the msgId, a full disk answers SERVICE_NOT_AVAILABLE,
// a lagging slave its code.
func TestSenderAppendOutcomes(t *testing.T) {
	f := newSendFixture(t)
	f.created = &protocol.TopicConfig{TopicName: "New", ReadQueueNums: 2, WriteQueueNums: 2, Perm: protocol.PermRead | protocol.PermWrite}
	if resp := f.send(t, remoting.SendMessage, protocol.SendMessageRequestHeader{Topic: "New", DefaultTopic: "TBW102"}, []byte("x")); resp.Code != remoting.Success || f.registered != 1 {
		t.Fatalf("auto-created topic: code %d %q, registered %d", resp.Code, resp.Remark, f.registered)
	}
	cases := []struct {
		err      error
		replicas int32
		want     int32
		msgID    bool
	}{
		{storage.ErrFlushDiskTimeout, remoting.Success, remoting.FlushDiskTimeout, true},
		{storage.ErrDiskFull, remoting.Success, remoting.ServiceNotAvailable, false},
		{nil, remoting.FlushSlaveTimeout, remoting.FlushSlaveTimeout, true},
	}
	for _, c := range cases {
		f.log.err, f.replicas = c.err, c.replicas
		resp := f.send(t, remoting.SendMessage, protocol.SendMessageRequestHeader{Topic: "T"}, []byte("x"))
		if resp.Code != c.want || (resp.Ext("msgId") != "") != c.msgID {
			t.Errorf("%v/%d: code %d %q msgId %q", c.err, c.replicas, resp.Code, resp.Remark, resp.Ext("msgId"))
		}
	}
}

// In DLedger mode (an asynchronous commit log) the answer comes from the append's callback.
func TestSenderAsyncAppend(t *testing.T) {
	f := newSendFixture(t)
	alog := &asyncSendTestLog{}
	f.s.commitLog = alog
	resp := f.send(t, remoting.SendMessageV2, protocol.SendMessageRequestHeader{Topic: "T", QueueID: 1}, []byte("x"))
	if resp.Code != remoting.Success || resp.Ext("queueId") != "1" || len(alog.stored(t)) != 1 {
		t.Fatalf("code %d %q queueId %q, %d stored", resp.Code, resp.Remark, resp.Ext("queueId"), len(alog.stored(t)))
	}
}

// sendsInline: only a plain send to an existing topic on a deciding node with an asynchronous
// commit log is served on the read goroutine.
func TestSenderSendsInline(t *testing.T) {
	f := newSendFixture(t)
	v1 := func(topic string) *remoting.Command {
		h := protocol.SendMessageRequestHeader{Topic: topic}
		return remoting.NewRequest(remoting.SendMessage, h.ToExt(), nil)
	}
	v2 := func(topic string) *remoting.Command {
		h := protocol.SendMessageRequestHeader{Topic: topic}
		return remoting.NewRequest(remoting.SendMessageV2, h.ToExtV2(), nil)
	}
	cases := []struct {
		name    string
		async   bool
		decides bool
		req     *remoting.Command
		want    bool
	}{
		{"leader, known topic", true, true, v2("T"), true},
		{"leader, known topic, long names", true, true, v1("T"), true},
		{"unknown topic", true, true, v2("Nope"), false},
		{"retry topic", true, true, v2("%RETRY%g"), false},
		{"follower", true, false, v2("T"), false},
		{"classic", false, true, v2("T"), false},
	}
	for _, c := range cases {
		f.s.commitLog = f.log
		if c.async {
			f.s.commitLog = &asyncSendTestLog{}
		}
		f.pl.decidesNow = c.decides
		if got := f.s.sendsInline(c.req); got != c.want {
			t.Errorf("%s: inline %v, want %v", c.name, got, c.want)
		}
	}
}

// In classic mode a send's topic is in topics.json before the message is stored, even when the
// creation's write was coalesced: a crash right after the answer must not forget the topic of
// an acknowledged message. If the table cannot be saved, the send is refused and nothing stored.
func TestSenderSavesTopicsBeforeStoring(t *testing.T) {
	f := newSendFixture(t)
	path := filepath.Join(t.TempDir(), "topics.json")
	topics, err := meta.OpenTopics(path, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := topics.Put(protocol.NewTopicConfig("Earlier")); err != nil { // written at once
		t.Fatal(err)
	}
	topics.SetFlushInterval(time.Hour) // later changes wait for a write only Sync makes
	f.s.topics, f.s.topicsSaved = topics, topics.Sync
	f.s.createTopicFromDefault = func(name, _ string, _, _ int32) (*protocol.TopicConfig, bool, error) {
		tc := &protocol.TopicConfig{TopicName: name, ReadQueueNums: 2, WriteQueueNums: 2, Perm: protocol.PermRead | protocol.PermWrite}
		return tc, true, topics.Put(tc)
	}
	resp := f.send(t, remoting.SendMessage, protocol.SendMessageRequestHeader{Topic: "Fresh", DefaultTopic: "TBW102"}, []byte("x"))
	if resp.Code != remoting.Success {
		t.Fatalf("send to a new topic: code %d %q", resp.Code, resp.Remark)
	}
	reread, err := meta.OpenTopics(path, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	if reread.Get("Fresh") == nil {
		t.Fatal("the send was answered while its auto-created topic was not yet in topics.json")
	}

	f.s.topicsSaved = func() error { return errors.New("disk gone") }
	resp = f.send(t, remoting.SendMessage, protocol.SendMessageRequestHeader{Topic: "Fresh"}, []byte("y"))
	if resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, "disk gone") {
		t.Fatalf("send with the topic table unsaved: code %d %q, want SYSTEM_ERROR", resp.Code, resp.Remark)
	}
	if n := len(f.log.stored(t)); n != 1 {
		t.Fatalf("%d messages stored, want only the first", n)
	}
}
