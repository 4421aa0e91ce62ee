package admin

import (
	"testing"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

func consumeStats(tps float64, entries map[protocol.MessageQueue]protocol.OffsetWrapper) *protocol.ConsumeStats {
	return &protocol.ConsumeStats{ConsumeTps: tps, OffsetTable: entries}
}

func progressFixture(t *testing.T) *fixture {
	const ts = int64(1700000000000)
	a0 := &brokerState{consume: consumeStats(1.5, map[protocol.MessageQueue]protocol.OffsetWrapper{
		{Topic: "T1", BrokerName: "broker-a", QueueID: 1}:        {BrokerOffset: 10, ConsumerOffset: 4, LastTimestamp: ts},
		{Topic: "T1", BrokerName: "broker-a", QueueID: 0}:        {BrokerOffset: 8, ConsumerOffset: 8, LastTimestamp: ts},
		{Topic: "%RETRY%G1", BrokerName: "broker-a", QueueID: 0}: {BrokerOffset: 2, ConsumerOffset: -1},
	})}
	b0 := &brokerState{consume: consumeStats(0.25, map[protocol.MessageQueue]protocol.OffsetWrapper{
		{Topic: "T1", BrokerName: "broker-b", QueueID: 0}: {BrokerOffset: 3, ConsumerOffset: 0},
	})}
	return newFixture(t, a0, nil, b0)
}

func TestConsumerProgressAllTopics(t *testing.T) {
	f := progressFixture(t)
	f.route("T1", 2, "broker-a", "broker-b")
	f.route("%RETRY%G1", 1, "broker-a")
	f.expect(`
#Topic     #Broker Name  #QID  #Broker Offset  #Consumer Offset  #Diff  #LastTime                #Lag Time
%RETRY%G1  broker-a      0     2               -1                2      N/A                      unknown
T1         broker-a      0     8               8                 0      `+localTime(1700000000000)+`  0
T1         broker-a      1     10              4                 6      `+localTime(1700000000000)+`  unknown
T1         broker-b      0     3               0                 3      N/A                      unknown

Consume TPS: 1.75
Diff Total: 11
Lag Time: unknown
`, "consumerProgress", "-g", "G1")
	// The retry topic lives on broker-a only, but every master of its cluster is asked, without a topic.
	for _, p := range []*fakePeer{f.a0, f.b0} {
		got := p.requests(remoting.GetConsumeStats)
		if len(got) != 1 || got[0]["consumerGroup"] != "G1" || got[0]["topic"] != "" {
			t.Fatalf("%s got %v", p.addr(), got)
		}
	}
	if got := f.a1.requests(remoting.GetConsumeStats); len(got) != 0 {
		t.Fatalf("slave asked: %v", got)
	}
}

func TestConsumerProgressTopic(t *testing.T) {
	f := progressFixture(t)
	f.route("T1", 2, "broker-b")
	f.expect(`
{
  "group": "G1",
  "consumeTps": 0.25,
  "diffTotal": 3,
  "lagTimeMs": -1,
  "queues": [
    {
      "topic": "T1",
      "brokerName": "broker-b",
      "queueId": 0,
      "brokerOffset": 3,
      "consumerOffset": 0,
      "diff": 3,
      "lastTimestamp": 0,
      "lagTimeMs": -1
    }
  ]
}
`, "consumerProgress", "-g", "G1", "-t", "T1", "-o", "json")
	if got := f.b0.requests(remoting.GetConsumeStats); len(got) != 1 || got[0]["topic"] != "T1" {
		t.Fatalf("broker-b got %v", got)
	}
	if got := f.a0.requests(remoting.GetConsumeStats); len(got) != 0 {
		t.Fatalf("broker-a is not in the route but was asked: %v", got)
	}
}

func TestConsumerProgressNoRetryTopicAsksEveryMaster(t *testing.T) {
	f := progressFixture(t)
	_, _, code := f.mq("consumerProgress", "-g", "G1", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if len(f.a0.requests(remoting.GetConsumeStats)) != 1 || len(f.b0.requests(remoting.GetConsumeStats)) != 1 {
		t.Fatal("not every master was asked")
	}
	f.route("T2", 1, "broker-b")
	f.expectFail(1, []string{"not found: no consume stats for group G1"}, "consumerProgress", "-g", "G1", "-t", "T2")
	f.expectFail(1, []string{"get route of topic Nope: {NS} answered code 17"}, "consumerProgress", "-g", "G1", "-t", "Nope")
	f.expectFail(2, []string{"-t/--topicName needs -g/--groupName"}, "consumerProgress", "-t", "T1")
}

func TestConsumerGroupList(t *testing.T) {
	f := progressFixture(t)
	f.route("T1", 2, "broker-a", "broker-b")
	f.route("%RETRY%G1", 1, "broker-a")
	f.route("%RETRY%G0", 1, "broker-b") // no member online
	f.expect(`
#Group  #Count  #Type  #Model      #TPS  #Diff Total  #Lag Time
G0      0                          1.75  11           unknown
G1      1       PUSH   CLUSTERING  1.75  11           unknown
`, "consumerProgress")
}
