package proxy

import (
	"strings"
	"testing"

	"rocketraft/proxy/rmqpb"
)

func TestCheckNames(t *testing.T) {
	res := func(n string) *rmqpb.Resource { return &rmqpb.Resource{Name: n} }
	if st := checkNames(&rmqpb.AckMessageRequest{Topic: res("T"), Group: res("G")}); st != nil {
		t.Fatalf("valid names refused: %v", st)
	}
	if st := checkNames(&rmqpb.HeartbeatRequest{}); st != nil {
		t.Fatalf("empty group (a producer's heartbeat) refused: %v", st)
	}
	cases := []struct {
		req  any
		want rmqpb.Code
	}{
		{&rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{{Topic: res("../../tmp/x")}}}, rmqpb.Code_ILLEGAL_TOPIC},
		{&rmqpb.ReceiveMessageRequest{MessageQueue: &rmqpb.MessageQueue{Topic: res("T")}, Group: res("a\x00b")}, rmqpb.Code_ILLEGAL_CONSUMER_GROUP},
		{&rmqpb.UpdateOffsetRequest{MessageQueue: &rmqpb.MessageQueue{Topic: res("T")}, Group: res(strings.Repeat("g", 10<<10))}, rmqpb.Code_ILLEGAL_CONSUMER_GROUP},
		{&rmqpb.ForwardMessageToDeadLetterQueueRequest{Topic: res("%RETRY%../../.."), Group: res("G")}, rmqpb.Code_ILLEGAL_TOPIC},
		{&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: &rmqpb.Settings{PubSub: &rmqpb.Settings_Subscription{
			Subscription: &rmqpb.Subscription{Group: res("G"), Subscriptions: []*rmqpb.SubscriptionEntry{{Topic: res("a b")}}}}}}}, rmqpb.Code_ILLEGAL_TOPIC},
	}
	for i, c := range cases {
		st := checkNames(c.req)
		if st == nil || st.GetCode() != c.want {
			t.Errorf("case %d: got %v, want %v", i, st, c.want)
		}
	}
}
