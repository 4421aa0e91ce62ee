package proxy

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/protocol"
	"rocketraft/proxy/rmqpb"
)

// fifoTestProxy is a messaging whose caches already hold topic T's route (two groups of 4
// writable queues) and config with message.type typ ("" for none), so nothing goes to the network.
func fifoTestProxy(typ string) *messaging {
	cfg := DefaultConfig()
	m := &messaging{cfg: &cfg, log: hclog.NewNullLogger()}
	m.leaders = newLeaderBook(&cfg, nil, hclog.NewNullLogger())
	m.routes = newRouteCache(&cfg, nil, m.leaders)
	r := &protocol.TopicRouteData{
		QueueDatas: []*protocol.QueueData{
			{BrokerName: "b", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6},
			{BrokerName: "a", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6},
		},
		BrokerDatas: []*protocol.BrokerData{
			{BrokerName: "a", BrokerAddrs: map[int64]string{0: "127.0.0.1:1"}},
			{BrokerName: "b", BrokerAddrs: map[int64]string{0: "127.0.0.1:2"}},
		},
	}
	m.routes.m["T"] = cachedRoute{r: r, at: time.Now().Add(time.Hour)}
	tc := protocol.NewTopicConfig("T")
	if typ != "" {
		tc.Attributes = map[string]string{protocol.AttrMessageType: typ}
	}
	m.confs.topics.store("T", confEntry[*protocol.TopicConfig]{v: tc, at: time.Now().Add(time.Hour)})
	return m
}

func TestAcceptTypes(t *testing.T) {
	for typ, want := range map[string][]rmqpb.MessageType{
		"":            {rmqpb.MessageType_NORMAL, rmqpb.MessageType_FIFO, rmqpb.MessageType_DELAY, rmqpb.MessageType_TRANSACTION},
		"FIFO":        {rmqpb.MessageType_FIFO},
		"TRANSACTION": {rmqpb.MessageType_TRANSACTION},
		"MIXED":       {rmqpb.MessageType_NORMAL, rmqpb.MessageType_FIFO, rmqpb.MessageType_DELAY, rmqpb.MessageType_TRANSACTION},
	} {
		if got := fifoTestProxy(typ).topicAcceptTypes(context.Background(), "T"); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", typ, got, want)
		}
	}
}

// TestCheckMessageType: a send of another type than the topic's is refused in-band with
// MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, before any broker is asked; an untyped topic takes all.
func TestCheckMessageType(t *testing.T) {
	group := "g1"
	fifo := &rmqpb.SystemProperties{MessageType: rmqpb.MessageType_FIFO, MessageGroup: &group}
	normal := &rmqpb.SystemProperties{MessageType: rmqpb.MessageType_NORMAL}
	ctx := context.Background()
	for _, c := range []struct {
		typ  string
		sp   *rmqpb.SystemProperties
		want rmqpb.Code
	}{
		{"FIFO", fifo, rmqpb.Code_OK},
		{"FIFO", normal, rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"NORMAL", fifo, rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"MIXED", fifo, rmqpb.Code_OK},
		{"", fifo, rmqpb.Code_OK},
		{"", &rmqpb.SystemProperties{MessageType: rmqpb.MessageType_FIFO}, rmqpb.Code_ILLEGAL_MESSAGE_GROUP},
		{"", &rmqpb.SystemProperties{MessageType: rmqpb.MessageType_NORMAL, MessageGroup: &group}, rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
	} {
		got := rmqpb.Code_OK
		if st := fifoTestProxy(c.typ).checkMessageType(ctx, "T", c.sp); st != nil {
			got = st.Code
		}
		if got != c.want {
			t.Errorf("topic %q, message %v: %v, want %v", c.typ, c.sp, got, c.want)
		}
	}
	// Through SendMessage: an in-band status, no error.
	resp, err := fifoTestProxy("FIFO").SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{
		{Topic: &rmqpb.Resource{Name: "T"}, SystemProperties: normal, Body: []byte("x")}}})
	if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE {
		t.Fatalf("SendMessage: %v %v", resp.GetStatus(), err)
	}
}

// TestPickQueueForGroup: one message group always maps to one queue, and groups spread.
func TestPickQueueForGroup(t *testing.T) {
	m := fifoTestProxy("FIFO")
	ctx := context.Background()
	seen := map[string]bool{}
	for i := 0; i < 64; i++ {
		g := string(rune('a'+i%26)) + string(rune('0'+i/26))
		name, qid, err := m.pickQueueFor(ctx, "T", g)
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 3; j++ {
			n2, q2, _ := m.pickQueueFor(ctx, "T", g)
			if n2 != name || q2 != qid {
				t.Fatalf("group %s moved from %s/%d to %s/%d", g, name, qid, n2, q2)
			}
		}
		seen[name+string(rune('0'+qid))] = true
	}
	if len(seen) < 4 {
		t.Fatalf("64 groups on %d queues only", len(seen))
	}
}

// TestSettingsFifo: a consumer's settings carry fifo = its group's consumeMessageOrderly; a group the
// brokers do not know (nil config) is not FIFO.
func TestSettingsFifo(t *testing.T) {
	m := fifoTestProxy("FIFO")
	gc := protocol.NewSubscriptionGroupConfig("G")
	gc.ConsumeMessageOrderly = true
	m.confs.groups.store("G", confEntry[*protocol.SubscriptionGroupConfig]{v: gc, at: time.Now().Add(time.Hour)})
	m.confs.groups.store("U", confEntry[*protocol.SubscriptionGroupConfig]{at: time.Now().Add(time.Hour)})
	for group, want := range map[string]bool{"G": true, "U": false} {
		sub := &rmqpb.Subscription{Group: &rmqpb.Resource{Name: group}, Subscriptions: []*rmqpb.SubscriptionEntry{{Topic: &rmqpb.Resource{Name: "T"}}}}
		m.serverSettings(context.Background(), &rmqpb.Settings{PubSub: &rmqpb.Settings_Subscription{Subscription: sub}})
		if sub.Fifo == nil || *sub.Fifo != want {
			t.Errorf("group %s: fifo %v, want %v", group, sub.Fifo, want)
		}
	}
}
