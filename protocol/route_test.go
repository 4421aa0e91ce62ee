package protocol

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func sampleRoute() *TopicRouteData {
	return &TopicRouteData{
		QueueDatas: []*QueueData{
			{BrokerName: "broker-b", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6},
			{BrokerName: "broker-a", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6},
		},
		BrokerDatas: []*BrokerData{
			{Cluster: "DefaultCluster", BrokerName: "broker-b", BrokerAddrs: map[int64]string{}},
			{Cluster: "DefaultCluster", BrokerName: "broker-a", BrokerAddrs: map[int64]string{0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}},
		},
	}
}

func TestRouteGolden(t *testing.T) {
	r := sampleRoute()
	r.Sort()
	got, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSynFlag":0,"topicSysFlag":0,"writeQueueNums":4},` +
		`{"brokerName":"broker-b","perm":6,"readQueueNums":8,"topicSynFlag":0,"topicSysFlag":0,"writeQueueNums":8}],` +
		`"brokerDatas":[{"cluster":"DefaultCluster","brokerName":"broker-a","brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"enableActingMaster":false},` +
		`{"cluster":"DefaultCluster","brokerName":"broker-b","brokerAddrs":{},"enableActingMaster":false}],` +
		`"filterServerTable":{}}`
	if string(got) != want {
		t.Fatalf("route JSON\n got %s\nwant %s", got, want)
	}
	if strings.ContainsAny(string(got), " \n\t\r") {
		t.Fatal("route JSON contains whitespace")
	}
}

func TestRouteEmptyCollections(t *testing.T) {
	got, err := Encode(&TopicRouteData{BrokerDatas: []*BrokerData{{BrokerName: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"queueDatas":[],"brokerDatas":[{"cluster":"","brokerName":"x","brokerAddrs":{},"enableActingMaster":false}],"filterServerTable":{}}`
	if string(got) != want {
		t.Fatalf("got %s", got)
	}
	withOrder, _ := Encode(TopicRouteData{OrderTopicConf: "broker-a:4"})
	if !strings.HasPrefix(string(withOrder), `{"orderTopicConf":"broker-a:4",`) {
		t.Fatalf("got %s", withOrder)
	}
}

// goClientBrokerAddrs mimics the Go client's hand parser of brokerAddrs (§4.1).
func goClientBrokerAddrs(raw string) map[int64]string {
	out := map[int64]string{}
	for _, s := range strings.Split(raw[1:len(raw)-1], ",") {
		i := strings.Index(s, ":")
		if i < 0 {
			continue
		}
		var id int64
		_ = json.Unmarshal([]byte(strings.ReplaceAll(s[:i], `"`, "")), &id)
		out[id] = strings.ReplaceAll(s[i+1:], `"`, "")
	}
	return out
}

func TestRouteParsesLikeGoClient(t *testing.T) {
	b, _ := Encode(sampleRoute())
	var raw struct {
		BrokerDatas []struct {
			BrokerAddrs json.RawMessage `json:"brokerAddrs"`
		} `json:"brokerDatas"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	got := goClientBrokerAddrs(string(raw.BrokerDatas[1].BrokerAddrs))
	want := map[int64]string{0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("go client view %v", got)
	}
}

func TestRouteRoundTrip(t *testing.T) {
	r := sampleRoute()
	r.OrderTopicConf = "broker-a:4"
	r.FilterServerTable = map[string][]string{}
	b, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	var back TopicRouteData
	if err := Decode(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, r) {
		t.Fatalf("round trip\n got %+v\nwant %+v", back, r)
	}
}

func TestRouteDecodeFastjsonLegacy(t *testing.T) {
	legacy := `{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],` +
		`"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSynFlag":1,"writeQueueNums":4}]}`
	var r TopicRouteData
	if err := Decode([]byte(legacy), &r); err != nil {
		t.Fatal(err)
	}
	if r.BrokerDatas[0].BrokerAddrs[1] != "10.0.0.2:10911" || r.BrokerDatas[0].MasterAddr() != "10.0.0.1:10911" {
		t.Fatalf("addrs %v", r.BrokerDatas[0].BrokerAddrs)
	}
	if q := r.QueueDatas[0]; q.TopicSysFlag != 1 || q.ReadQueueNums != 4 || q.Perm != 6 {
		t.Fatalf("queue data %+v", q)
	}
}

func TestClusterInfoRoundTrip(t *testing.T) {
	ci := &ClusterInfo{
		BrokerAddrTable:  map[string]*BrokerData{"broker-a": {Cluster: "C", BrokerName: "broker-a", BrokerAddrs: map[int64]string{0: "a:1"}}},
		ClusterAddrTable: map[string][]string{"C": {"broker-a"}},
	}
	b, _ := Encode(ci)
	want := `{"brokerAddrTable":{"broker-a":{"cluster":"C","brokerName":"broker-a","brokerAddrs":{"0":"a:1"},"enableActingMaster":false}},"clusterAddrTable":{"C":["broker-a"]}}`
	if string(b) != want {
		t.Fatalf("got %s", b)
	}
	var back ClusterInfo
	if err := Decode([]byte(strings.ReplaceAll(string(b), `"0"`, "0")), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, ci) {
		t.Fatalf("got %+v", back)
	}
	empty, _ := Encode(ClusterInfo{})
	if string(empty) != `{"brokerAddrTable":{},"clusterAddrTable":{}}` {
		t.Fatalf("empty %s", empty)
	}
}

func TestSmallBodies(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{TopicList{}, `{"topicList":[]}`},
		{TopicList{TopicList: []string{"T1"}, BrokerAddr: "a:1"}, `{"topicList":["T1"],"brokerAddr":"a:1"}`},
		{KVTable{}, `{"table":{}}`},
		{KVTable{Table: map[string]string{"k": "v<&>"}}, `{"table":{"k":"v<&>"}}`},
		{ConsumerListBody{}, `{"consumerIdList":[]}`},
		{LockBatchResponseBody{}, `{"lockOKMQSet":[]}`},
		{LockBatchResponseBody{LockOKMQSet: []MessageQueue{{BrokerName: "b", QueueID: 1, Topic: "T"}}}, `{"lockOKMQSet":[{"brokerName":"b","queueId":1,"topic":"T"}]}`},
	}
	for _, c := range cases {
		got, err := Encode(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("%T: got %s want %s", c.v, got, c.want)
		}
	}
}
