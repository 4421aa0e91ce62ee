package clients

import (
	"slices"
	"sync"
	"testing"
	"time"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

var t0 = time.Unix(1700000000, 0)

// The Go client's heartbeat (§4.6) with a codeSet that lies: codes as strings, and wrong.
const goHeartbeat = `{"clientID":"10.0.0.5@4321","producerDataSet":[{"groupName":"P"}],"consumerDataSet":[{"groupName":"G","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{"classFilterMode":false,"topic":"T","subString":"TagA || 标签","tagsSet":["TagA","标签"],"codeSet":["1","2"],"subVersion":1700000000000000000,"expressionType":"TAG"},{"classFilterMode":false,"topic":"%RETRY%G","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1700000000000000001,"expressionType":"TAG"}],"unitMode":false}]}`

func TestHeartbeatRegistersSubscriptions(t *testing.T) {
	p := newPeer(t)
	conn := p.dial(t)
	m, rec := newRecorded(t, Config{})
	var hb protocol.HeartbeatData
	if err := protocol.Decode([]byte(goHeartbeat), &hb); err != nil {
		t.Fatal(err)
	}
	groups := m.Heartbeat(conn, &hb, "GO", 317, t0)
	if !slices.Equal(groups, []string{"G"}) {
		t.Fatalf("groups = %v", groups)
	}
	rec.expect(t, "first heartbeat", key(conn, "G"))

	s, ok := m.Subscription("G", "T")
	if !ok || s.All || !slices.Equal(s.Tags, []string{"TagA", "标签"}) || len(s.Codes) != 2 {
		t.Fatalf("subscription = %+v", s)
	}
	// Java's String.hashCode("TagA") = 2598919; the non-ASCII tag must use UTF-16 units.
	if !s.Match(2598919) || !s.Match(message.TagsCode("标签")) {
		t.Fatal("recomputed codes do not match")
	}
	if s.Match(1) || s.Match(2) || s.Match(0) || s.Match(message.TagsCode("TagB")) {
		t.Fatal("matched a code the client lied about, no tag, or another tag")
	}
	if r, ok := m.Subscription("G", "%RETRY%G"); !ok || !r.All || !r.Match(0) {
		t.Fatalf("retry subscription = %+v", r)
	}
	if _, ok := m.Subscription("G", "other"); ok {
		t.Fatal("unknown topic has a subscription")
	}

	if ids := m.ConsumerIDs("G"); !slices.Equal(ids, []string{"10.0.0.5@4321"}) {
		t.Fatalf("ConsumerIDs = %v", ids)
	}
	info, ok := m.ConsumerGroup("G")
	if !ok || info.ConsumeType != protocol.ConsumePassively || info.MessageModel != protocol.Clustering ||
		info.ConsumeFromWhere != protocol.ConsumeFromLastOffset || !info.LastUpdate.Equal(t0) {
		t.Fatalf("ConsumerGroup = %+v", info)
	}
	want := protocol.Connection{ClientAddr: conn.RemoteAddr(), ClientID: "10.0.0.5@4321", Language: "GO", Version: 317}
	if len(info.Connections) != 1 || info.Connections[0] != want {
		t.Fatalf("connections = %+v", info.Connections)
	}
	if cs := info.Subscriptions["T"].CodeSet; !slices.Equal(cs, protocol.CodeSet{2598919, int32(message.TagsCode("标签"))}) {
		t.Fatalf("admin codeSet = %v", cs)
	}
	if b, err := protocol.Encode(info.ConsumerConnection()); err != nil || len(b) == 0 {
		t.Fatal(err)
	}
	if got := m.TopicsConsumedBy("G"); !slices.Equal(got, []string{"%RETRY%G", "T"}) {
		t.Fatalf("TopicsConsumedBy = %v", got)
	}
	if got := m.GroupsConsuming("T"); !slices.Equal(got, []string{"G"}) {
		t.Fatalf("GroupsConsuming = %v", got)
	}
	if got := m.ConsumerGroups(); !slices.Equal(got, []string{"G"}) {
		t.Fatalf("ConsumerGroups = %v", got)
	}
	if pc := m.ProducerConnections("P"); len(pc) != 1 || pc[0] != want {
		t.Fatalf("ProducerConnections = %+v", pc)
	}
	if m.ProducerConn("P") != conn || m.ProducerConn("nope") != nil {
		t.Fatal("ProducerConn")
	}
	if got := m.ProducerGroups(); !slices.Equal(got, []string{"P"}) {
		t.Fatalf("ProducerGroups = %v", got)
	}
	m.Heartbeat(conn, &hb, "GO", 317, t0.Add(time.Second))
	rec.expect(t, "unchanged heartbeat")
}

func TestSubscriptionVersionRule(t *testing.T) {
	p := newPeer(t)
	conn := p.dial(t)
	m, rec := newRecorded(t, Config{})
	hb := consumerHB("c1", "G")
	hb.ConsumerDataSet[0].SubscriptionDataSet[0] = protocol.SubscriptionData{Topic: "T", SubString: "A", TagsSet: []string{"A"}, SubVersion: 10}
	m.Heartbeat(conn, hb, "JAVA", 479, t0)
	rec.take()

	hb.ConsumerDataSet[0].SubscriptionDataSet[0] = protocol.SubscriptionData{Topic: "T", SubString: "B", TagsSet: []string{"B"}, SubVersion: 5}
	m.Heartbeat(conn, hb, "JAVA", 479, t0)
	if s, _ := m.Subscription("G", "T"); s.SubString != "A" {
		t.Fatalf("older subVersion replaced the subscription: %+v", s)
	}
	hb.ConsumerDataSet[0].SubscriptionDataSet[0].SubVersion = 11
	m.Heartbeat(conn, hb, "JAVA", 479, t0)
	if s, _ := m.Subscription("G", "T"); s.SubString != "B" || !s.Match(message.TagsCode("B")) || s.Match(message.TagsCode("A")) {
		t.Fatalf("newer subVersion did not replace the subscription: %+v", s)
	}
	rec.expect(t, "expression change on the same topics does not notify")

	hb.WithoutSub = true
	hb.ConsumerDataSet[0].SubscriptionDataSet = nil
	m.Heartbeat(conn, hb, "JAVA", 479, t0)
	if _, ok := m.Subscription("G", "T"); !ok {
		t.Fatal("withoutSub heartbeat dropped the subscriptions")
	}
	rec.expect(t, "withoutSub heartbeat")
}

func TestMembershipNotifiesEachMemberOnce(t *testing.T) {
	p := newPeer(t)
	a, b := p.dial(t), p.dial(t)
	notifyOn := true
	m, rec := newRecorded(t, Config{NotifyEnabled: func(g string) bool { return notifyOn }})

	m.Heartbeat(a, consumerHB("A", "G"), "JAVA", 479, t0)
	rec.expect(t, "A joins", key(a, "G"))
	m.Heartbeat(b, consumerHB("B", "G"), "JAVA", 479, t0)
	rec.expect(t, "B joins (two topics, still one notification each)", key(a, "G"), key(b, "G"))
	m.Heartbeat(a, consumerHB("A", "G"), "JAVA", 479, t0)
	rec.expect(t, "A refreshes")

	hb := consumerHB("A", "G")
	hb.ConsumerDataSet[0].SubscriptionDataSet = append(hb.ConsumerDataSet[0].SubscriptionDataSet,
		protocol.SubscriptionData{Topic: "T2", SubString: "*", SubVersion: 2})
	m.Heartbeat(a, hb, "JAVA", 479, t0)
	rec.expect(t, "A adds a topic", key(a, "G"), key(b, "G"))

	notifyOn = false
	m.Heartbeat(b, consumerHB("B", "G"), "JAVA", 479, t0) // removes T2 again
	rec.expect(t, "notifications disabled for the group")
	notifyOn = true

	m.Unregister(b, "B", "", "G")
	rec.expect(t, "B unregisters", key(a, "G"))
	if ids := m.ConsumerIDs("G"); !slices.Equal(ids, []string{"A"}) {
		t.Fatalf("ConsumerIDs = %v", ids)
	}
	m.Unregister(b, "A", "", "G") // A is registered on another connection: ignored
	if ids := m.ConsumerIDs("G"); !slices.Equal(ids, []string{"A"}) {
		t.Fatalf("unregister over the wrong connection removed A: %v", ids)
	}
	m.Unregister(a, "A", "", "G")
	rec.expect(t, "last member leaves")
	if _, ok := m.ConsumerGroup("G"); ok || m.ConsumerIDs("G") != nil {
		t.Fatal("empty group kept")
	}
	if _, ok := m.Subscription("G", "T"); ok {
		t.Fatal("empty group's subscriptions kept")
	}
}

func TestConnClosed(t *testing.T) {
	p := newPeer(t)
	a, b := p.dial(t), p.dial(t)
	m, rec := newRecorded(t, Config{})
	hbA := consumerHB("A", "G1", "G2")
	hbA.ProducerDataSet = []protocol.ProducerData{{GroupName: "P"}}
	m.Heartbeat(a, hbA, "JAVA", 479, t0)
	m.Heartbeat(b, consumerHB("B", "G1", "G2"), "JAVA", 479, t0)
	m.Heartbeat(b, &protocol.HeartbeatData{ClientID: "B", ProducerDataSet: []protocol.ProducerData{{GroupName: "P"}}}, "JAVA", 479, t0)
	rec.take()

	a.Close()
	m.ConnClosed(a)
	rec.expect(t, "A's connection closed", key(b, "G1"), key(b, "G2"))
	for _, g := range []string{"G1", "G2"} {
		if ids := m.ConsumerIDs(g); !slices.Equal(ids, []string{"B"}) {
			t.Fatalf("%s members = %v", g, ids)
		}
	}
	if pc := m.ProducerConnections("P"); len(pc) != 1 || pc[0].ClientID != "B" {
		t.Fatalf("producers = %+v", pc)
	}
	m.ConnClosed(a)
	rec.expect(t, "closing again")
	m.ConnClosed(b)
	rec.expect(t, "everyone gone")
	if len(m.ConsumerGroups()) != 0 || len(m.ProducerGroups()) != 0 || m.ProducerConn("P") != nil {
		t.Fatal("groups left after all connections closed")
	}
}

func TestReconnectReplacesConnection(t *testing.T) {
	p := newPeer(t)
	old, cur := p.dial(t), p.dial(t)
	m, rec := newRecorded(t, Config{})
	hb := consumerHB("A", "G")
	hb.ProducerDataSet = []protocol.ProducerData{{GroupName: "P"}}
	m.Heartbeat(old, hb, "JAVA", 479, t0)
	rec.take()
	m.Heartbeat(cur, hb, "JAVA", 479, t0.Add(time.Second))
	rec.expect(t, "same client on a new connection")
	info, _ := m.ConsumerGroup("G")
	if len(info.Connections) != 1 || info.Connections[0].ClientAddr != cur.RemoteAddr() {
		t.Fatalf("connections = %+v", info.Connections)
	}
	old.Close()
	m.ConnClosed(old)
	rec.expect(t, "old connection closes")
	if ids := m.ConsumerIDs("G"); !slices.Equal(ids, []string{"A"}) {
		t.Fatalf("closing the replaced connection removed the member: %v", ids)
	}
	if m.ProducerConn("P") != cur {
		t.Fatal("ProducerConn is not the new connection")
	}
	m.Heartbeat(old, hb, "JAVA", 479, t0) // a closed connection is never a producer's live conn
	if m.ProducerConn("P") != nil {
		t.Fatal("ProducerConn returned a closed connection")
	}
}

func TestScanExpired(t *testing.T) {
	p := newPeer(t)
	a, b := p.dial(t), p.dial(t)
	m, rec := newRecorded(t, Config{}) // default 120 s
	hbA := consumerHB("A", "G")
	hbA.ProducerDataSet = []protocol.ProducerData{{GroupName: "P"}}
	m.Heartbeat(a, hbA, "JAVA", 479, t0)
	m.Heartbeat(b, consumerHB("B", "G"), "JAVA", 479, t0.Add(100*time.Second))
	rec.take()

	m.ScanExpired(t0.Add(120 * time.Second))
	rec.expect(t, "nobody expired yet")
	m.ScanExpired(t0.Add(121 * time.Second))
	rec.expect(t, "A expired", key(b, "G"))
	if ids := m.ConsumerIDs("G"); !slices.Equal(ids, []string{"B"}) {
		t.Fatalf("members = %v", ids)
	}
	if m.ProducerConnections("P") != nil {
		t.Fatal("expired producer kept")
	}
	m.ScanExpired(t0.Add(221 * time.Second))
	rec.expect(t, "B expired, nobody left to notify")
	if len(m.ConsumerGroups()) != 0 {
		t.Fatal("group kept")
	}
}

func TestDefaultNotifySendsOneway(t *testing.T) {
	p := newPeer(t)
	a := p.dial(t)
	m := NewManager(Config{})
	m.Heartbeat(a, consumerHB("A", "G"), "GO", 317, t0)
	select {
	case <-p.got:
	case <-time.After(5 * time.Second):
		t.Fatal("no NOTIFY_CONSUMER_IDS_CHANGED received")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Equal(p.received, []string{"G"}) {
		t.Fatalf("received %v", p.received)
	}
}

func TestConcurrentUse(t *testing.T) {
	p := newPeer(t)
	conns := []*remoting.Conn{p.dial(t), p.dial(t), p.dial(t)}
	m := NewManager(Config{Notify: func(*remoting.Conn, string) {}})
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := string(rune('A' + i))
			for j := range 200 {
				now := t0.Add(time.Duration(j) * time.Second)
				m.Heartbeat(c, consumerHB(id, "G"), "GO", 317, now)
				m.Subscription("G", "T")
				m.ConsumerIDs("G")
				m.LockBatch("G", id, []protocol.MessageQueue{{Topic: "T", QueueID: int32(j % 4)}}, now)
				if j%50 == 0 {
					m.ConnClosed(c)
					m.ScanExpired(now)
				}
			}
		}()
	}
	wg.Wait()
}
