package admin

import (
	"testing"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// TestUpdateTopicAttributes: -a is sent as the header "attributes" and echoed.
func TestUpdateTopicAttributes(t *testing.T) {
	f := newFixture(t, nil, nil, nil)
	f.expect(`
create topic to {A0} success.
TopicConfig [topicName=T1, readQueueNums=8, writeQueueNums=8, perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]
attributes: +message.type=FIFO
`, "updateTopic", "-t", "T1", "-b", f.a0.addr(), "-a", "+message.type=FIFO")
	if got := f.a0.requests(remoting.UpdateAndCreateTopic); len(got) != 1 || got[0]["attributes"] != "+message.type=FIFO" {
		t.Fatalf("broker got %v", got)
	}
}

// TestTopicStatusMessageType: the type under the table and in every JSON row.
func TestTopicStatusMessageType(t *testing.T) {
	a0 := &brokerState{types: map[string]string{"T1": "FIFO"}, stats: map[string]*protocol.TopicStatsTable{"T1": stats("broker-a", "T1",
		protocol.TopicOffset{MinOffset: 0, MaxOffset: 3})}}
	f := newFixture(t, a0, nil, nil)
	f.route("T1", 1, "broker-a")
	f.expect(`
#Broker Name  #QID  #Min Offset  #Max Offset  #Last Updated
broker-a      0     0            3

#Message Type: FIFO
`, "topicStatus", "-t", "T1")
	f.expect(`
[
  {
    "brokerName": "broker-a",
    "queueId": 0,
    "minOffset": 0,
    "maxOffset": 3,
    "lastUpdateTimestamp": 0,
    "messageType": "FIFO"
  }
]
`, "topicStatus", "-t", "T1", "-o", "json")
}
