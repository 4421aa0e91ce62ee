package broker

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/clients"
	"rocketraft/config"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// rolePlace is a place that answers only what the client handlers ask: whether this node
// decides metadata and whether it forwards writes (any other method panics on the nil place).
type rolePlace struct {
	place
	decide, forwards bool
}

func (p rolePlace) decides() bool        { return p.decide }
func (p rolePlace) forwardsWrites() bool { return p.forwards }

// clientFixture is a clientHandlers whose group and topic creation are recorded fakes.
type clientFixture struct {
	h                  *clientHandlers
	tb                 adminTables
	reg                *counter
	created            []string // groups then retry topics, in creation order
	groupErr, topicErr error
}

func newClientFixture(t *testing.T, p rolePlace) *clientFixture {
	tb := openAdminTables(t)
	f := &clientFixture{tb: tb, reg: &counter{}}
	f.h = &clientHandlers{cfg: &config.Broker{BrokerName: "b1"}, groups: tb.groups,
		clients: clients.NewManager(clients.Config{Notify: func(*remoting.Conn, string) {}}), place: p, logger: hclog.NewNullLogger(),
		groupOrCreate: f.groupOrCreate, ensureTopic: f.ensureTopic, triggerRegister: f.reg.inc,
		refuseBadName: nameGuard{hclog.NewNullLogger()}.refuseBadName}
	return f
}

func (f *clientFixture) groupOrCreate(name string) (*protocol.SubscriptionGroupConfig, error) {
	if f.groupErr != nil {
		return nil, f.groupErr
	}
	if gc := f.tb.groups.Get(name); gc != nil {
		return gc, nil
	}
	gc := protocol.NewSubscriptionGroupConfig(name)
	f.created = append(f.created, name)
	return gc, f.tb.groups.Put(gc)
}

func (f *clientFixture) ensureTopic(tc *protocol.TopicConfig) (*protocol.TopicConfig, bool, error) {
	if f.topicErr != nil {
		return nil, false, f.topicErr
	}
	f.created = append(f.created, tc.TopicName)
	return tc, true, nil
}

func heartbeatReq(hb *protocol.HeartbeatData) *remoting.Command {
	return remoting.NewRequest(remoting.HeartBeat, nil, protocol.MustEncode(hb))
}

// A heartbeat creates each consumer's group and, for clustering consumers, its %RETRY% topic,
// then records the client.
func TestClientHandlersHeartbeatCreates(t *testing.T) {
	f := newClientFixture(t, rolePlace{decide: true})
	hb := consumerHeartbeat("c1", "G1", "T1")
	bc := consumerHeartbeat("c1", "B1", "T1").ConsumerDataSet[0]
	bc.MessageModel = protocol.Broadcasting
	hb.ConsumerDataSet = append(hb.ConsumerDataSet, bc)
	wantCode(t, "heartbeat", f.h.handleHeartbeat(loopConn(t), heartbeatReq(hb)), remoting.Success, "")
	if want := []string{"G1", message.RetryTopicPrefix + "G1", "B1"}; !slices.Equal(f.created, want) || f.reg.n != 1 {
		t.Fatalf("created %v (want %v), registrations %d", f.created, want, f.reg.n)
	}
	if ids := f.h.clients.ConsumerIDs("G1"); !slices.Equal(ids, []string{"c1"}) {
		t.Fatalf("consumers of G1: %v", ids)
	}
}

// A heartbeat's refusals: a bad body, a bad name; a classic node answers a failed creation, a
// node that forwards writes records the client anyway (the leader creates).
func TestClientHandlersHeartbeatFailures(t *testing.T) {
	f := newClientFixture(t, rolePlace{decide: true})
	wantCode(t, "bad body", f.h.handleHeartbeat(nil, remoting.NewRequest(remoting.HeartBeat, nil, []byte("["))), remoting.SystemError, "bad heartbeat body")
	wantCode(t, "bad name", f.h.handleHeartbeat(nil, heartbeatReq(consumerHeartbeat("c1", "bad group"))), remoting.InvalidParameter, "invalid ")
	f.groupErr = errors.New("disk gone")
	wantCode(t, "group fails", f.h.handleHeartbeat(nil, heartbeatReq(consumerHeartbeat("c1", "G1"))), remoting.SystemError, "subscription group G1: disk gone")
	f.groupErr, f.topicErr = nil, errors.New("disk gone")
	wantCode(t, "retry topic fails", f.h.handleHeartbeat(nil, heartbeatReq(consumerHeartbeat("c1", "G1"))), remoting.SystemError, "create retry topic %RETRY%G1: disk gone")

	f = newClientFixture(t, rolePlace{decide: true, forwards: true})
	f.groupErr = errNotLeaderMeta
	wantCode(t, "leader moved", f.h.handleHeartbeat(loopConn(t), heartbeatReq(consumerHeartbeat("c1", "G1"))), remoting.Success, "")
	f.groupErr, f.topicErr = nil, errNotLeaderMeta
	wantCode(t, "leader moved before the retry topic", f.h.handleHeartbeat(loopConn(t), heartbeatReq(consumerHeartbeat("c2", "G2"))), remoting.Success, "")
	if ids := f.h.clients.ConsumerIDs("G1"); len(ids) != 1 || f.reg.n != 0 {
		t.Fatalf("consumers %v, registrations %d", ids, f.reg.n)
	}
}

// A follower creates nothing; a heartbeat naming more new groups than the limit creates only the
// limit's worth.
func TestClientHandlersHeartbeatLimits(t *testing.T) {
	f := newClientFixture(t, rolePlace{forwards: true})
	wantCode(t, "follower", f.h.handleHeartbeat(loopConn(t), heartbeatReq(consumerHeartbeat("c1", "G1"))), remoting.Success, "")
	if len(f.created) != 0 || len(f.h.clients.ConsumerIDs("G1")) != 1 {
		t.Fatalf("follower created %v", f.created)
	}
	f = newClientFixture(t, rolePlace{decide: true})
	hb := &protocol.HeartbeatData{ClientID: "c1"}
	for i := range maxGroupsCreatedPerHeartbeat + 3 {
		cd := consumerHeartbeat("c1", fmt.Sprintf("G%d", i)).ConsumerDataSet[0]
		cd.MessageModel = protocol.Broadcasting
		hb.ConsumerDataSet = append(hb.ConsumerDataSet, cd)
	}
	wantCode(t, "many groups", f.h.handleHeartbeat(loopConn(t), heartbeatReq(hb)), remoting.Success, "")
	if len(f.created) != maxGroupsCreatedPerHeartbeat {
		t.Fatalf("created %d groups, want %d", len(f.created), maxGroupsCreatedPerHeartbeat)
	}
}

// The client lists: consumer ids, consumer and producer connections, and unregistration.
func TestClientHandlersLists(t *testing.T) {
	f := newClientFixture(t, rolePlace{decide: true})
	ext := map[string]string{"consumerGroup": "G1", "producerGroup": "P1"}
	wantCode(t, "no consumers", f.h.handleGetConsumerList(nil, remoting.NewRequest(remoting.GetConsumerListByGroup, ext, nil)), remoting.SystemError, "no consumer for this group, G1")
	wantCode(t, "offline group", f.h.handleConsumerConnections(nil, remoting.NewRequest(remoting.GetConsumerConnectionList, ext, nil)), remoting.ConsumerNotOnline, "the consumer group[G1] not online")
	wantCode(t, "no producers", f.h.handleProducerConnections(nil, remoting.NewRequest(remoting.GetProducerConnectionList, ext, nil)), remoting.SystemError, "the producer group[P1] not exist")

	conn := loopConn(t)
	hb := consumerHeartbeat("c1", "G1", "T1")
	hb.ProducerDataSet = []protocol.ProducerData{{GroupName: "P1"}}
	f.h.clients.Heartbeat(conn, hb, "GO", 1, time.Now())
	var ids protocol.ConsumerListBody
	decode(t, f.h.handleGetConsumerList(nil, remoting.NewRequest(remoting.GetConsumerListByGroup, ext, nil)), &ids)
	if !slices.Equal(ids.ConsumerIDList, []string{"c1"}) {
		t.Fatalf("consumer ids %v", ids.ConsumerIDList)
	}
	var cc protocol.ConsumerConnection
	decode(t, f.h.handleConsumerConnections(nil, remoting.NewRequest(remoting.GetConsumerConnectionList, ext, nil)), &cc)
	if len(cc.ConnectionSet) != 1 || cc.ConnectionSet[0].ClientID != "c1" || cc.SubscriptionTable["T1"].Topic != "T1" {
		t.Fatalf("consumer connection %+v", cc)
	}
	var pc protocol.ProducerConnection
	decode(t, f.h.handleProducerConnections(nil, remoting.NewRequest(remoting.GetProducerConnectionList, ext, nil)), &pc)
	if len(pc.ConnectionSet) != 1 || pc.ConnectionSet[0].ClientID != "c1" {
		t.Fatalf("producer connection %+v", pc)
	}
	unreg := remoting.NewRequest(remoting.UnregisterClient, map[string]string{"clientID": "c1", "consumerGroup": "G1", "producerGroup": "P1"}, nil)
	wantCode(t, "unregister", f.h.handleUnregisterClient(conn, unreg), remoting.Success, "")
	if ids := f.h.clients.ConsumerIDs("G1"); len(ids) != 0 {
		t.Fatalf("consumers after unregister: %v", ids)
	}
}

// CHECK_CLIENT_CONFIG: tags always, SQL92 only with enablePropertyFilter and only if it parses.
func TestClientHandlersCheckClientConfig(t *testing.T) {
	cases := []struct {
		typ, expr string
		filter    bool
		code      int32
		remark    string
	}{
		{"", "*", false, remoting.Success, ""},
		{protocol.ExpressionTag, "a||b", false, remoting.Success, ""},
		{protocol.ExpressionSQL92, "a > 1", true, remoting.Success, ""},
		{protocol.ExpressionSQL92, "a >", true, remoting.SubscriptionParseFailed, "parse the SQL92 subscription failed"},
		{protocol.ExpressionSQL92, "a > 1", false, remoting.SystemError, "does not support consumer to filter message by SQL92"},
		{"CLASS", "x", true, remoting.SystemError, "by CLASS"},
	}
	for _, c := range cases {
		f := newClientFixture(t, rolePlace{})
		f.h.cfg.EnablePropertyFilter = c.filter
		body := protocol.MustEncode(protocol.CheckClientConfigBody{Group: "G1", SubscriptionData: protocol.SubscriptionData{Topic: "T1", ExpressionType: c.typ, SubString: c.expr}})
		wantCode(t, c.typ+" "+c.expr, f.h.handleCheckClientConfig(nil, remoting.NewRequest(remoting.CheckClientConfig, nil, body)), c.code, c.remark)
	}
	f := newClientFixture(t, rolePlace{})
	wantCode(t, "bad body", f.h.handleCheckClientConfig(nil, remoting.NewRequest(remoting.CheckClientConfig, nil, []byte("x"))), remoting.SystemError, "bad body")
}

// ownQueues keeps this broker's queues (any case) and those naming no broker, in order.
func TestOwnQueues(t *testing.T) {
	mqs := []protocol.MessageQueue{{Topic: "T", BrokerName: "b1", QueueID: 0}, {Topic: "T", BrokerName: "b2", QueueID: 1},
		{Topic: "T", BrokerName: "B1", QueueID: 2}, {Topic: "T", QueueID: 3}}
	got := ownQueues("b1", mqs)
	if want := []protocol.MessageQueue{mqs[0], mqs[2], mqs[3]}; !slices.Equal(got, want) {
		t.Fatalf("own queues %v, want %v", got, want)
	}
	if len(mqs) != 4 || mqs[1].BrokerName != "b2" {
		t.Fatal("ownQueues changed its argument")
	}
}
