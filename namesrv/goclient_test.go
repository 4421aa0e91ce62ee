package namesrv

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// TestOfficialGoClientRoute drives the official Go client's route lookup (the same code path its
// producer uses) and topic listing against an in-process name server.
func TestOfficialGoClientRoute(t *testing.T) {
	rlog.SetLogLevel("error")
	s := startServer(t, Config{})
	broker := newTestClient(t, s.Addr())
	body := registerBody(topic("T", 4, 6), topic(protocol.AutoCreateTopicKey, 8, 7))
	expectCode(t, registerFakeBroker(broker, "broker-b", "10.0.0.3:10911", 0, body), remoting.Success)
	expectCode(t, registerFakeBroker(broker, "broker-a", "10.0.0.1:10911", 0, body), remoting.Success)
	expectCode(t, registerFakeBroker(broker, "broker-a", "10.0.0.2:10911", 1, body), remoting.Success)

	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{s.Addr()})))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()

	mqs, err := adm.FetchPublishMessageQueues(context.Background(), "T")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mq := range mqs {
		got = append(got, mq.BrokerName+"/"+string(rune('0'+mq.QueueId)))
	}
	slices.Sort(got)
	want := []string{"broker-a/0", "broker-a/1", "broker-a/2", "broker-a/3", "broker-b/0", "broker-b/1", "broker-b/2", "broker-b/3"}
	if !slices.Equal(got, want) {
		t.Fatalf("publish queues %v, want %v", got, want)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tl, err := adm.FetchAllTopicList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tl.TopicList, []string{"T", protocol.AutoCreateTopicKey}) {
		t.Fatalf("topic list %v", tl.TopicList)
	}

	if _, err := adm.FetchPublishMessageQueues(context.Background(), "Nope"); err == nil {
		t.Fatal("route for unknown topic")
	}
}
