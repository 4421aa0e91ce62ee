package admin

import (
	"reflect"
	"strings"
	"testing"

	"rocketraft/remoting"
)

func TestTableAlignment(t *testing.T) {
	tb := newTable("#A", "#Long Header", "#C")
	tb.add("x", 1, "")
	tb.add("longer cell", 22, "z")
	var sb strings.Builder
	if err := tb.write(&sb); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"#A           #Long Header  #C\n" +
		"x            1\n" +
		"longer cell  22            z\n"
	if sb.String() != want {
		t.Fatalf("got\n%q\nwant\n%q", sb.String(), want)
	}
}

func TestUpdateTopicCluster(t *testing.T) {
	f := newFixture(t, nil, nil, nil)
	f.expect(`
create topic to {A0} success.
create topic to {B0} success.
TopicConfig [topicName=T1, readQueueNums=4, writeQueueNums=8, perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]
`, "updateTopic", "-t", "T1", "-c", "DefaultCluster", "-r", "4")

	want := map[string]string{"topic": "T1", "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "8",
		"perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
	for _, p := range []*fakePeer{f.a0, f.b0} {
		got := p.requests(remoting.UpdateAndCreateTopic)
		if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
			t.Fatalf("%s got %v, want one %v", p.addr(), got, want)
		}
	}
	if got := f.a1.requests(remoting.UpdateAndCreateTopic); len(got) != 0 {
		t.Fatalf("slave was asked to create the topic: %v", got)
	}

	f.expect(`
{
  "topicConfig": {
    "topicName": "T2",
    "readQueueNums": 8,
    "writeQueueNums": 8,
    "perm": 4,
    "topicFilterType": "MULTI_TAG",
    "topicSysFlag": 0,
    "order": false
  },
  "brokers": [
    {
      "brokerName": "broker-a",
      "addr": "{A0}",
      "success": true
    },
    {
      "brokerName": "broker-b",
      "addr": "{B0}",
      "success": true
    }
  ]
}
`, "updateTopic", "-t", "T2", "-c", "DefaultCluster", "-p", "4", "--topicFilterType", "MULTI_TAG", "-o", "json")
}

func TestUpdateTopicBrokerOrder(t *testing.T) {
	f := newFixture(t, nil, nil, nil)
	f.expect(`
create topic to {B0} success.
set cluster orderConf. isOrder=true, orderConf=[broker-b:2]
TopicConfig [topicName=T1, readQueueNums=2, writeQueueNums=2, perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=0, order=true]
`, "updateTopic", "-t", "T1", "-b", f.b0.addr(), "-r", "2", "-w", "2", "--order")
	if got := f.b0.requests(remoting.UpdateAndCreateTopic); len(got) != 1 || got[0]["order"] != "true" {
		t.Fatalf("broker got %v", got)
	}
	kv := f.ns.requests(remoting.PutKVConfig)
	want := map[string]string{"namespace": "ORDER_TOPIC_CONFIG", "key": "T1", "value": "broker-b:2"}
	if len(kv) != 1 || !reflect.DeepEqual(kv[0], want) {
		t.Fatalf("name server got %v, want %v", kv, want)
	}
}

func TestUpdateTopicErrors(t *testing.T) {
	f := newFixture(t, nil, nil, &brokerState{fail: map[int32]string{remoting.UpdateAndCreateTopic: "disk full"}})
	f.expectFail(2, []string{"give exactly one of -c/--clusterName and -b/--brokerAddr"}, "updateTopic", "-t", "T1")
	f.expectFail(2, []string{"-t/--topic is required"}, "updateTopic", "-c", "DefaultCluster")
	f.expectFail(2, []string{`illegal character`}, "updateTopic", "-t", "a b", "-c", "DefaultCluster")
	f.expectFail(1, []string{"cluster not found", `"Nope"`}, "updateTopic", "-t", "T1", "-c", "Nope")
	out := f.expectFail(1, []string{"broker-b: {B0} answered code 1: disk full"}, "updateTopic", "-t", "T1", "-c", "DefaultCluster")
	if want := f.sub("create topic to {A0} success.\n"); !strings.HasPrefix(out, want) || strings.Contains(out, f.b0.addr()) {
		t.Fatalf("partial output:\n%s", out)
	}
}

func TestDeleteTopic(t *testing.T) {
	f := newFixture(t, nil, nil, nil)
	f.expect(`
delete topic [T1] from cluster [DefaultCluster] success.
delete topic [T1] from NameServer success.
`, "deleteTopic", "-t", "T1", "-c", "DefaultCluster")
	for _, p := range []*fakePeer{f.a0, f.a1, f.b0} {
		if got := p.requests(remoting.DeleteTopicInBroker); len(got) != 1 || got[0]["topic"] != "T1" {
			t.Fatalf("%s got %v", p.addr(), got)
		}
	}
	want := map[string]string{"topic": "T1", "clusterName": "DefaultCluster"}
	if got := f.ns.requests(remoting.DeleteTopicInNamesrv); len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("name server got %v", got)
	}
}

func TestDeleteTopicBrokerFailureKeepsNamesrv(t *testing.T) {
	f := newFixture(t, nil, &brokerState{fail: map[int32]string{remoting.DeleteTopicInBroker: "busy"}}, nil)
	f.expectFail(1, []string{"name servers not changed", "broker-a: {A1} answered code 1: busy"}, "deleteTopic", "-t", "T1", "-c", "DefaultCluster")
	if got := f.ns.requests(remoting.DeleteTopicInNamesrv); len(got) != 0 {
		t.Fatalf("name server asked to delete: %v", got)
	}
	f.expectFail(2, []string{"-c/--clusterName is required"}, "deleteTopic", "-t", "T1")
}

func TestTopicList(t *testing.T) {
	f := newFixture(t, &brokerState{types: map[string]string{"TopicA": "FIFO", "TopicB": ""}}, nil, nil)
	f.route("TopicB", 4, "broker-b")
	f.route("TopicA", 4, "broker-a", "broker-b")
	f.route("%RETRY%G1", 1, "broker-a")
	f.expect(`
%RETRY%G1
TopicA
TopicB
`, "topicList")
	f.expect(`
{
  "topicList": [
    "%RETRY%G1",
    "TopicA",
    "TopicB"
  ]
}
`, "topicList", "-o", "json")
	f.expect(`
#Cluster Name   #Topic  #Message Type  #Consumer Group
DefaultCluster  TopicA  FIFO           G1
DefaultCluster  TopicA  FIFO           G2
DefaultCluster  TopicB  -              G1
DefaultCluster  TopicB  -              G2
`, "topicList", "-c")
}

func TestTopicRoute(t *testing.T) {
	f := newFixture(t, nil, nil, nil)
	f.route("T1", 4, "broker-a", "broker-b")
	f.expect(`
#Cluster Name   #Broker Name  #BID  #Addr            #Read Queues  #Write Queues  #Perm
DefaultCluster  broker-a      0     {A0}  4             4              RW-
DefaultCluster  broker-a      1     {A1}  4             4              RW-
DefaultCluster  broker-b      0     {B0}  4             4              RW-
`, "topicRoute", "-t", "T1")
	f.expect(`
{
  "queueDatas": [
    {
      "brokerName": "broker-a",
      "perm": 6,
      "readQueueNums": 4,
      "topicSynFlag": 0,
      "topicSysFlag": 0,
      "writeQueueNums": 4
    },
    {
      "brokerName": "broker-b",
      "perm": 6,
      "readQueueNums": 4,
      "topicSynFlag": 0,
      "topicSysFlag": 0,
      "writeQueueNums": 4
    }
  ],
  "brokerDatas": [
    {
      "cluster": "DefaultCluster",
      "brokerName": "broker-a",
      "brokerAddrs": {
        "0": "{A0}",
        "1": "{A1}"
      },
      "enableActingMaster": false
    },
    {
      "cluster": "DefaultCluster",
      "brokerName": "broker-b",
      "brokerAddrs": {
        "0": "{B0}"
      },
      "enableActingMaster": false
    }
  ],
  "filterServerTable": {}
}
`, "topicRoute", "-t", "T1", "-o", "json")
	f.expectFail(1, []string{"get route of topic Nope: {NS} answered code 17: No topic route info in name server for the topic: Nope"}, "topicRoute", "-t", "Nope")
}

func TestUpdateTopicClusterOrder(t *testing.T) {
	f := newFixture(t, nil, nil, nil)
	f.expect(`
create topic to {A0} success.
create topic to {B0} success.
set cluster orderConf. isOrder=true, orderConf=[broker-a:4;broker-b:4]
TopicConfig [topicName=T1, readQueueNums=8, writeQueueNums=4, perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=0, order=true]
`, "updateTopic", "-t", "T1", "-c", "DefaultCluster", "-w", "4", "--order")
	if kv := f.ns.requests(remoting.PutKVConfig); len(kv) != 1 || kv[0]["value"] != "broker-a:4;broker-b:4" {
		t.Fatalf("name server got %v", kv)
	}
	dead := deadAddr(t)
	f.expectFail(1, []string{"mqadmin updateTopic: call " + dead + ": connect to " + dead}, "updateTopic", "-t", "T1", "-b", dead)
}
