package proxy

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/pop"
	"rocketraft/protocol"
	"rocketraft/proxy/rmqpb"
)

// TestReceiptHandleCarriesCommitLogOffset: the handle is the broker's checkpoint text plus the
// commitlog offset, which the brokers' parser ignores and ForwardMessageToDeadLetterQueue reads;
// a changed checkpoint keeps it.
func TestReceiptHandleCarriesCommitLogOffset(t *testing.T) {
	ck := pop.ExtraInfo{CkQueueOffset: 5, PopTime: 1700000000000, InvisibleTime: 30000, BrokerName: "broker-a", QueueID: 2, MsgQueueOffset: 7}
	h := receiptHandle(ck.String(), 123456)
	ei, err := pop.ParseExtraInfo(h)
	if err != nil || ei != (pop.ExtraInfo{CkQueueOffset: 5, PopTime: 1700000000000, InvisibleTime: 30000, RetryFlag: "0", BrokerName: "broker-a", QueueID: 2, MsgQueueOffset: 7}) {
		t.Fatalf("the brokers' parser reads %+v, %v from %q", ei, err, h)
	}
	if off, ok := handleCommitLogOffset(h); !ok || off != 123456 {
		t.Fatalf("commitlog offset %d %v", off, ok)
	}
	if _, ok := handleCommitLogOffset(ck.String()); ok {
		t.Fatal("a bare checkpoint has no commitlog offset")
	}
	ck.PopTime++
	if got := withSameCommitLogOffset(ck.String(), h); got != receiptHandle(ck.String(), 123456) {
		t.Fatalf("changed handle %q", got)
	}
}

// TestBackoffPolicy: max attempts is retryMaxTimes + 1; the default policy is the customized
// delay levels, a group's EXPONENTIAL policy is passed on.
func TestBackoffPolicy(t *testing.T) {
	gc := protocol.NewSubscriptionGroupConfig("G")
	gc.RetryMaxTimes = 2
	rp := backoffPolicy(gc)
	if rp.GetMaxAttempts() != 3 || len(rp.GetCustomizedBackoff().GetNext()) != 18 || rp.GetCustomizedBackoff().GetNext()[1].AsDuration() != 5*time.Second {
		t.Fatalf("default policy %v", rp)
	}
	gc.GroupRetryPolicy = json.RawMessage(`{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000,"max":60000,"multiplier":3}}`)
	rp = backoffPolicy(gc)
	e := rp.GetExponentialBackoff()
	if e.GetInitial().AsDuration() != time.Second || e.GetMax().AsDuration() != time.Minute || e.GetMultiplier() != 3 {
		t.Fatalf("exponential policy %v", rp)
	}
}

// TestConsumerRPCsBadInput: requests without topic, group or queue are answered in-band.
func TestConsumerRPCsBadInput(t *testing.T) {
	m := &messaging{}
	ctx := context.Background()
	qa, err := m.QueryAssignment(ctx, &rmqpb.QueryAssignmentRequest{Group: &rmqpb.Resource{Name: "G"}})
	if err != nil || qa.GetStatus().GetCode() != rmqpb.Code_ILLEGAL_TOPIC {
		t.Errorf("QueryAssignment without topic: %v %v", qa, err)
	}
	fw, err := m.ForwardMessageToDeadLetterQueue(ctx, &rmqpb.ForwardMessageToDeadLetterQueueRequest{})
	if err != nil || fw.GetStatus().GetCode() != rmqpb.Code_BAD_REQUEST {
		t.Errorf("ForwardMessageToDeadLetterQueue without group: %v %v", fw, err)
	}
	fw, err = m.ForwardMessageToDeadLetterQueue(ctx, &rmqpb.ForwardMessageToDeadLetterQueueRequest{
		Group: &rmqpb.Resource{Name: "G"}, Topic: &rmqpb.Resource{Name: "T"}, ReceiptHandle: "garbage"})
	if err != nil || fw.GetStatus().GetCode() != rmqpb.Code_INVALID_RECEIPT_HANDLE {
		t.Errorf("ForwardMessageToDeadLetterQueue with a bad handle: %v %v", fw, err)
	}
	uo, err := m.UpdateOffset(ctx, &rmqpb.UpdateOffsetRequest{Group: &rmqpb.Resource{Name: "G"},
		MessageQueue: &rmqpb.MessageQueue{Topic: &rmqpb.Resource{Name: "T"}, Id: -1}})
	if err != nil || uo.GetStatus().GetCode() != rmqpb.Code_BAD_REQUEST {
		t.Errorf("UpdateOffset of queue -1: %v %v", uo, err)
	}
	gofs, err := m.GetOffset(ctx, &rmqpb.GetOffsetRequest{MessageQueue: &rmqpb.MessageQueue{Topic: &rmqpb.Resource{Name: "T"}}})
	if err != nil || gofs.GetStatus().GetCode() != rmqpb.Code_ILLEGAL_CONSUMER_GROUP {
		t.Errorf("GetOffset without group: %v %v", gofs, err)
	}
	qo, err := m.QueryOffset(ctx, &rmqpb.QueryOffsetRequest{MessageQueue: &rmqpb.MessageQueue{Topic: &rmqpb.Resource{Name: "T"}},
		QueryOffsetPolicy: rmqpb.QueryOffsetPolicy_TIMESTAMP})
	if err != nil || qo.GetStatus().GetCode() != rmqpb.Code_BAD_REQUEST {
		t.Errorf("QueryOffset TIMESTAMP without a timestamp: %v %v", qo, err)
	}
}

// testMessaging is a messaging whose route of topic and group table of the broker at addr are
// cached (nothing is asked of a name server or broker while they are fresh).
func testMessaging(topic string, r *protocol.TopicRouteData, addr string, groups map[string]*protocol.SubscriptionGroupConfig) *messaging {
	cfg := DefaultConfig()
	cfg.RouteTTL = time.Hour
	m := &messaging{cfg: &cfg, leaders: newLeaderBook(&cfg, nil, hclog.NewNullLogger())}
	m.routes = newRouteCache(&cfg, nil, m.leaders)
	m.routes.m[topic] = cachedRoute{r: r, at: time.Now()}
	if groups == nil {
		groups = map[string]*protocol.SubscriptionGroupConfig{"G": nil} // known to lack G: defaults
	}
	for name, gc := range groups {
		m.confs.groups.store(name, confEntry[*protocol.SubscriptionGroupConfig]{v: gc, at: time.Now().Add(time.Hour)})
	}
	return m
}

// TestQueryAssignmentOnePerGroup: a concurrent group gets one assignment per readable broker
// group with a master, queue id -1, at the endpoints the client used; groups without a master or
// read permission get none.
func TestQueryAssignmentOnePerGroup(t *testing.T) {
	r := &protocol.TopicRouteData{
		QueueDatas: []*protocol.QueueData{
			{BrokerName: "a", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6},
			{BrokerName: "b", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6},
			{BrokerName: "c", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 2},
		},
		BrokerDatas: []*protocol.BrokerData{
			{BrokerName: "a", BrokerAddrs: map[int64]string{0: "127.0.0.1:1"}},
			{BrokerName: "b", BrokerAddrs: map[int64]string{1: "127.0.0.1:2"}}, // no master now
			{BrokerName: "c", BrokerAddrs: map[int64]string{0: "127.0.0.1:3"}},
		},
	}
	m := testMessaging("T", r, "127.0.0.1:1", nil)
	ep := &rmqpb.Endpoints{Addresses: []*rmqpb.Address{{Host: "127.0.0.1", Port: 8081}}}
	resp, err := m.QueryAssignment(context.Background(), &rmqpb.QueryAssignmentRequest{
		Topic: &rmqpb.Resource{Name: "T"}, Group: &rmqpb.Resource{Name: "G"}, Endpoints: ep})
	if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_OK || len(resp.GetAssignments()) != 1 {
		t.Fatalf("QueryAssignment: %v %v; want OK with one assignment", resp, err)
	}
	mq := resp.GetAssignments()[0].GetMessageQueue()
	if mq.GetId() != -1 || mq.GetBroker().GetName() != "a" || mq.GetBroker().GetEndpoints().GetAddresses()[0].GetPort() != 8081 || mq.GetPermission() != rmqpb.Permission_READ {
		t.Fatalf("assignment %v: want queue -1 of a, at the client's endpoints, READ", mq)
	}
}

// TestServerSettings: a producer is told Apache's exponential backoff; a push consumer the batch
// size, long-polling bound, fifo=false and its group's retry policy (retryMaxTimes + 1 attempts).
func TestServerSettings(t *testing.T) {
	r := &protocol.TopicRouteData{
		QueueDatas:  []*protocol.QueueData{{BrokerName: "a", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}},
		BrokerDatas: []*protocol.BrokerData{{BrokerName: "a", BrokerAddrs: map[int64]string{0: "127.0.0.1:1"}}},
	}
	gc := protocol.NewSubscriptionGroupConfig("G")
	gc.RetryMaxTimes = 4
	m := testMessaging("T", r, "127.0.0.1:1", map[string]*protocol.SubscriptionGroupConfig{"G": gc})
	ctx := context.Background()

	pub := &rmqpb.Settings{PubSub: &rmqpb.Settings_Publishing{Publishing: &rmqpb.Publishing{}}}
	m.serverSettings(ctx, pub)
	if e := pub.GetBackoffPolicy().GetExponentialBackoff(); pub.GetBackoffPolicy().GetMaxAttempts() != 3 || e.GetInitial().AsDuration() != 10*time.Millisecond || e.GetMax().AsDuration() != time.Second {
		t.Fatalf("producer settings %v", pub)
	}

	sub := &rmqpb.Settings{PubSub: &rmqpb.Settings_Subscription{Subscription: &rmqpb.Subscription{
		Group:         &rmqpb.Resource{Name: "G"},
		Subscriptions: []*rmqpb.SubscriptionEntry{{Topic: &rmqpb.Resource{Name: "T"}}},
	}}}
	m.serverSettings(ctx, sub)
	s := sub.GetSubscription()
	if s.GetReceiveBatchSize() != 32 || s.GetFifo() || s.GetLongPollingTimeout().AsDuration() != 20*time.Second || sub.GetBackoffPolicy().GetMaxAttempts() != 5 {
		t.Fatalf("consumer settings %v", sub)
	}
}
