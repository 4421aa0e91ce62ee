package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

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

// Through a running proxy: a unary call, a server stream and Telemetry settings naming an
// invalid topic or group are answered in-band before the RPC runs (no broker is reachable here,
// so an RPC that ran would answer something else).
func TestInvalidNamesInBand(t *testing.T) {
	_, c := startTestServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := c.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{{Topic: &rmqpb.Resource{Name: "../../tmp/x"},
		Body: []byte("x"), SystemProperties: &rmqpb.SystemProperties{MessageId: "1"}}}})
	if err != nil || r.GetStatus().GetCode() != rmqpb.Code_ILLEGAL_TOPIC {
		t.Fatalf("send to ../../tmp/x: %v %v, want ILLEGAL_TOPIC", r.GetStatus(), err)
	}
	rs, err := c.ReceiveMessage(ctx, &rmqpb.ReceiveMessageRequest{Group: &rmqpb.Resource{Name: "bad\x00group"},
		MessageQueue: &rmqpb.MessageQueue{Topic: &rmqpb.Resource{Name: "T"}}})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := rs.Recv(); err != nil || m.GetStatus().GetCode() != rmqpb.Code_ILLEGAL_CONSUMER_GROUP {
		t.Fatalf("receive with a NUL group: %v %v, want ILLEGAL_CONSUMER_GROUP", m, err)
	}
	st, err := c.Telemetry(ctx)
	if err != nil {
		t.Fatal(err)
	}
	settings := &rmqpb.Settings{PubSub: &rmqpb.Settings_Subscription{Subscription: &rmqpb.Subscription{
		Group: &rmqpb.Resource{Name: strings.Repeat("g", 10<<10)}}}}
	if err := st.Send(&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: settings}}); err != nil {
		t.Fatal(err)
	}
	if m, err := st.Recv(); err != nil || m.GetStatus().GetCode() != rmqpb.Code_ILLEGAL_CONSUMER_GROUP {
		t.Fatalf("settings with a 10 KB group: %v %v, want ILLEGAL_CONSUMER_GROUP", m, err)
	}
}
