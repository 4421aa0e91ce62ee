package admin

import (
	"strings"
	"testing"
	"time"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// localTime renders ms as tables do (the tool's default location is time.Local).
func localTime(ms int64) string { return time.UnixMilli(ms).In(time.Local).Format(TimeLayout) }

func stats(broker, topic string, offsets ...protocol.TopicOffset) *protocol.TopicStatsTable {
	st := &protocol.TopicStatsTable{OffsetTable: map[protocol.MessageQueue]protocol.TopicOffset{}}
	for i, o := range offsets {
		st.OffsetTable[protocol.MessageQueue{Topic: topic, BrokerName: broker, QueueID: int32(i)}] = o
	}
	return st
}

func TestTopicStatus(t *testing.T) {
	const ts = int64(1700000000123)
	a0 := &brokerState{stats: map[string]*protocol.TopicStatsTable{"T1": stats("broker-a", "T1",
		protocol.TopicOffset{MinOffset: 0, MaxOffset: 10, LastUpdateTimestamp: ts},
		protocol.TopicOffset{MinOffset: 2, MaxOffset: 5, LastUpdateTimestamp: ts + 1000},
	)}}
	b0 := &brokerState{stats: map[string]*protocol.TopicStatsTable{"T1": stats("broker-b", "T1",
		protocol.TopicOffset{MinOffset: 0, MaxOffset: 0},
	)}}
	f := newFixture(t, a0, nil, b0)
	f.route("T1", 2, "broker-b", "broker-a")
	f.expect(`
#Broker Name  #QID  #Min Offset  #Max Offset  #Last Updated
broker-a      0     0            10           `+localTime(ts)+`
broker-a      1     2            5            `+localTime(ts+1000)+`
broker-b      0     0            0
`, "topicStatus", "-t", "T1")
	f.expect(`
[
  {
    "brokerName": "broker-a",
    "queueId": 0,
    "minOffset": 0,
    "maxOffset": 10,
    "lastUpdateTimestamp": 1700000000123
  },
  {
    "brokerName": "broker-a",
    "queueId": 1,
    "minOffset": 2,
    "maxOffset": 5,
    "lastUpdateTimestamp": 1700000001123
  },
  {
    "brokerName": "broker-b",
    "queueId": 0,
    "minOffset": 0,
    "maxOffset": 0,
    "lastUpdateTimestamp": 0
  }
]
`, "topicStatus", "-t", "T1", "-o", "json")
	if got := f.a1.requests(remoting.GetTopicStatsInfo); len(got) != 0 {
		t.Fatalf("slave asked: %v", got)
	}
	f.route("T2", 2, "broker-a")
	f.expectFail(1, []string{"get stats of topic T2: broker-a: {A0} answered code 17: topic[T2] not exist"}, "topicStatus", "-t", "T2")
}

func runtimeTable(version, role, put, get, maxOff string) map[string]string {
	return map[string]string{"brokerVersionDesc": version, "brokerRole": role, "msgPutTotalTodayNow": put,
		"msgGetTotalTodayNow": get, "commitLogMaxOffset": maxOff, "bootTimestamp": "1"}
}

func TestClusterListMarksUnreachable(t *testing.T) {
	a0 := &brokerState{runtime: runtimeTable("V4_9_4", "ASYNC_MASTER", "100", "90", "123456")}
	a1 := &brokerState{fail: map[int32]string{remoting.GetBrokerRuntimeInfo: "boom"}}
	a0.runtime["putTps"] = "12.5 10.0 9.0"
	f := newFixture(t, a0, a1, nil)
	_ = f.b0.srv.Close() // broker-b's master is down
	errOut := f.expectOut(`
#Cluster Name   #Broker Name  #BID  #Addr            #Version     #InTPS(LOAD)  #OutTPS(LOAD)  #InTotalToday  #OutTotalToday  #CommitLogMaxOffset  #Role
DefaultCluster  broker-a      0     {A0}  V4_9_4       12.50         -              100            90              123456               ASYNC_MASTER
DefaultCluster  broker-a      1     {A1}  UNREACHABLE  -             -              -              -               -                    -
DefaultCluster  broker-b      0     {B0}  UNREACHABLE  -             -              -              -               -                    -
`, "clusterList", "--timeout", "1s")
	for _, want := range []string{
		"warning: broker {A1} (broker-a, id 1) is unreachable: get runtime info: {A1} answered code 1: boom\n",
		"warning: broker {B0} (broker-b, id 0) is unreachable: get runtime info: call {B0}: ",
	} {
		if !strings.Contains(errOut, f.sub(want)) {
			t.Fatalf("stderr lacks %q:\n%s", f.sub(want), errOut)
		}
	}
	// JSON, with broker-b up again in a new fixture.
	b0 := &brokerState{runtime: map[string]string{"brokerVersionDesc": "V5"}}
	f2 := newFixture(t, a0, a1, b0)
	f2.expectOut(`
[
  {
    "cluster": "DefaultCluster",
    "brokerName": "broker-a",
    "brokerId": 0,
    "addr": "{A0}",
    "table": {
      "bootTimestamp": "1",
      "brokerRole": "ASYNC_MASTER",
      "brokerVersionDesc": "V4_9_4",
      "commitLogMaxOffset": "123456",
      "msgGetTotalTodayNow": "90",
      "msgPutTotalTodayNow": "100",
      "putTps": "12.5 10.0 9.0"
    }
  },
  {
    "cluster": "DefaultCluster",
    "brokerName": "broker-a",
    "brokerId": 1,
    "addr": "{A1}",
    "error": "get runtime info: {A1} answered code 1: boom"
  },
  {
    "cluster": "DefaultCluster",
    "brokerName": "broker-b",
    "brokerId": 0,
    "addr": "{B0}",
    "table": {
      "brokerVersionDesc": "V5"
    }
  }
]
`, "clusterList", "-o", "json")
	f2.expectFail(1, []string{`cluster not found: "NoSuch" (known: DefaultCluster)`}, "clusterList", "-c", "NoSuch")
}

func TestBrokerStatus(t *testing.T) {
	a0 := &brokerState{runtime: map[string]string{"msgPutTotalTodayNow": "7", "brokerVersionDesc": "V4_9_4"}}
	b0 := &brokerState{runtime: map[string]string{"brokerRole": "ASYNC_MASTER"}}
	f := newFixture(t, a0, &brokerState{fail: map[int32]string{remoting.GetBrokerRuntimeInfo: "boom"}}, b0)
	f.expect(`
brokerVersionDesc               : V4_9_4
msgPutTotalTodayNow             : 7
`, "brokerStatus", "-b", f.a0.addr())
	f.expect(`
{
  "brokerVersionDesc": "V4_9_4",
  "msgPutTotalTodayNow": "7"
}
`, "brokerStatus", "-b", f.a0.addr(), "-o", "json")
	out := f.expectFail(1, []string{"warning: {A1}: get runtime info: {A1} answered code 1: boom", "mqadmin brokerStatus: {A1} (broker-a): get runtime info"},
		"brokerStatus", "-c", "DefaultCluster")
	want := f.sub("" +
		"{A0}          brokerVersionDesc               : V4_9_4\n" +
		"{A0}          msgPutTotalTodayNow             : 7\n" +
		"{B0}          brokerRole                      : ASYNC_MASTER\n")
	if out != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
	f.expectFail(2, []string{"give exactly one of -b/--brokerAddr and -c/--clusterName"}, "brokerStatus")
}
