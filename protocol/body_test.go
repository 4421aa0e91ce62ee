package protocol

import (
	"reflect"
	"strings"
	"testing"
)

func roundTrip[T any](t *testing.T, in *T) *T {
	t.Helper()
	b, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	out := new(T)
	if err := Decode(b, out); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip of %T\n got %+v\nwant %+v\nwire %s", in, out, in, b)
	}
	return out
}

func TestDataVersion(t *testing.T) {
	d := NewDataVersion()
	n := d.Next()
	if n.Counter != 1 || d.Equal(&n) || !n.Equal(&DataVersion{Counter: 1, Timestamp: n.Timestamp}) {
		t.Fatalf("next %+v of %+v", n, d)
	}
	var nilDV *DataVersion
	if nilDV.Equal(&d) || !nilDV.Equal(nil) {
		t.Fatal("nil equality")
	}
	roundTrip(t, &n)
}

func TestRegisterBrokerBody(t *testing.T) {
	body := &RegisterBrokerBody{
		TopicConfigSerializeWrapper: TopicConfigSerializeWrapper{
			TopicConfigTable: map[string]*TopicConfig{
				"T1":     {TopicName: "T1", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6, TopicFilterType: FilterSingleTag},
				"TBW102": {TopicName: "TBW102", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 7, TopicFilterType: FilterSingleTag, Attributes: map[string]string{"a": "b"}},
			},
			DataVersion: DataVersion{Counter: 7, Timestamp: 1700000000000},
		},
		FilterServerList: []string{},
	}
	roundTrip(t, body)
	empty, _ := Encode(RegisterBrokerBody{})
	if string(empty) != `{"topicConfigSerializeWrapper":{"topicConfigTable":{},"dataVersion":{"counter":0,"stateVersion":0,"timestamp":0}},"filterServerList":[]}` {
		t.Fatalf("empty %s", empty)
	}
	// Java 5.x body with extra members and defaults left out.
	java := `{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":7,"stateVersion":0,"timestamp":1700000000000},` +
		`"mappingDataVersion":{"counter":0,"timestamp":1},"topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":4,"topicName":"T","writeQueueNums":4}},` +
		`"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}}`
	var rb RegisterBrokerBody
	if err := Decode([]byte(java), &rb); err != nil {
		t.Fatal(err)
	}
	tc := rb.TopicConfigSerializeWrapper.TopicConfigTable["T"]
	if tc.TopicFilterType != FilterSingleTag || tc.WriteQueueNums != 4 || rb.TopicConfigSerializeWrapper.DataVersion.Counter != 7 {
		t.Fatalf("decoded %+v", tc)
	}
}

func TestTopicConfigDefaults(t *testing.T) {
	var tc TopicConfig
	if err := Decode([]byte(`{"topicName":"X"}`), &tc); err != nil {
		t.Fatal(err)
	}
	want := NewTopicConfig("X")
	if !reflect.DeepEqual(&tc, want) {
		t.Fatalf("got %+v", tc)
	}
}

func TestPerm(t *testing.T) {
	if !IsReadable(6) || !IsWriteable(6) || IsInherited(6) || !IsInherited(7) || IsWriteable(4) {
		t.Fatal("perm bits")
	}
	if PermString(7) != "RWX" || PermString(4) != "R--" || PermString(0) != "---" {
		t.Fatal("perm string")
	}
}

func TestCRC32(t *testing.T) {
	// crc32("123456789") = 0xCBF43926; masked to 31 bits.
	if got := CRC32([]byte("123456789")); got != 0x4BF43926 {
		t.Fatalf("crc %x", got)
	}
}

func TestHeartbeatFromGoClient(t *testing.T) {
	in := `{"clientID":"10.0.0.5@4321","producerDataSet":[],"consumerDataSet":[{"groupName":"G","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{"classFilterMode":false,"topic":"T","subString":"TagA","tagsSet":["TagA"],"codeSet":["2598919"],"subVersion":1700000000000000000,"expressionType":"TAG"},{"classFilterMode":false,"topic":"%RETRY%G","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1700000000000000001,"expressionType":"TAG"}],"unitMode":false}]}`
	var hb HeartbeatData
	if err := Decode([]byte(in), &hb); err != nil {
		t.Fatal(err)
	}
	sub := hb.ConsumerDataSet[0].SubscriptionDataSet[0]
	if hb.ClientID != "10.0.0.5@4321" || sub.CodeSet[0] != 2598919 || sub.SubVersion != 1700000000000000000 || sub.TagsSet[0] != "TagA" {
		t.Fatalf("decoded %+v", hb)
	}
	roundTrip(t, &hb)
}

func TestCodeSetNumbersAndStrings(t *testing.T) {
	var s SubscriptionData
	if err := Decode([]byte(`{"codeSet":[1,"-2",3]}`), &s); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.CodeSet, CodeSet{1, -2, 3}) {
		t.Fatalf("codes %v", s.CodeSet)
	}
	b, _ := Encode(CodeSet{-5})
	if string(b) != `[-5]` {
		t.Fatalf("encoded %s", b)
	}
	if err := Decode([]byte(`{"codeSet":["x"]}`), &s); err == nil {
		t.Fatal("accepted non-numeric code")
	}
}

func TestLockBodies(t *testing.T) {
	// Go client form: onlyThisBroker omitted.
	var req LockBatchRequestBody
	in := `{"consumerGroup":"G","clientId":"10.0.0.5@1234","mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"T"}]}`
	if err := Decode([]byte(in), &req); err != nil {
		t.Fatal(err)
	}
	if req.ClientID != "10.0.0.5@1234" || req.MqSet[0] != (MessageQueue{BrokerName: "broker-a", Topic: "T"}) {
		t.Fatalf("got %+v", req)
	}
	roundTrip(t, &req)
	roundTrip(t, &LockBatchResponseBody{LockOKMQSet: []MessageQueue{{"b", 3, "T"}}})
}

func TestSubscriptionGroup(t *testing.T) {
	var c SubscriptionGroupConfig
	if err := Decode([]byte(`{"groupName":"G","retryMaxTimes":3,"groupRetryPolicy":{"type":"CUSTOMIZED"}}`), &c); err != nil {
		t.Fatal(err)
	}
	want := NewSubscriptionGroupConfig("G")
	want.RetryMaxTimes = 3
	want.GroupRetryPolicy = []byte(`{"type":"CUSTOMIZED"}`)
	if !reflect.DeepEqual(&c, want) {
		t.Fatalf("got %+v", c)
	}
	w := &SubscriptionGroupWrapper{
		SubscriptionGroupTable: map[string]*SubscriptionGroupConfig{"G": want},
		ForbiddenTable:         map[string]map[string]int32{},
		DataVersion:            DataVersion{Counter: 2},
	}
	roundTrip(t, w)
}

func TestConsumerOffsetWrapper(t *testing.T) {
	w := &ConsumerOffsetSerializeWrapper{OffsetTable: map[string]map[int32]int64{OffsetKey("T", "G"): {0: 12, 1: 40}}}
	b, _ := Encode(w)
	if string(b) != `{"offsetTable":{"T@G":{"0":12,"1":40}}}` {
		t.Fatalf("got %s", b)
	}
	roundTrip(t, w)
	var java ConsumerOffsetSerializeWrapper
	if err := Decode([]byte(`{"offsetTable":{"TopicTest@group1":{0:120,1:98}},"dataVersion":{"counter":1,"timestamp":5}}`), &java); err != nil {
		t.Fatal(err)
	}
	if java.OffsetTable["TopicTest@group1"][1] != 98 || java.DataVersion.Counter != 1 {
		t.Fatalf("got %+v", java)
	}
	if tp, g, ok := SplitOffsetKey("%RETRY%G@G"); !ok || tp != "%RETRY%G" || g != "G" {
		t.Fatal("split")
	}
}

func TestTopicStatsFastjsonForm(t *testing.T) {
	ts := &TopicStatsTable{OffsetTable: map[MessageQueue]TopicOffset{
		{BrokerName: "b", QueueID: 1, Topic: "T"}: {MinOffset: 0, MaxOffset: 9, LastUpdateTimestamp: 100},
		{BrokerName: "b", QueueID: 0, Topic: "T"}: {MinOffset: 1, MaxOffset: 2, LastUpdateTimestamp: 3},
	}}
	b, err := Encode(ts)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"minOffset":1,"maxOffset":2,"lastUpdateTimestamp":3},` +
		`{"brokerName":"b","queueId":1,"topic":"T"}:{"minOffset":0,"maxOffset":9,"lastUpdateTimestamp":100}},"topicPutTps":0}`
	if string(b) != want {
		t.Fatalf("got %s", b)
	}
	roundTrip(t, ts)
	empty, _ := Encode(&TopicStatsTable{})
	if string(empty) != `{"offsetTable":{},"topicPutTps":0}` {
		t.Fatalf("empty %s", empty)
	}
}

func TestConsumeStatsFastjsonForm(t *testing.T) {
	cs := &ConsumeStats{ConsumeTps: 1.5, OffsetTable: map[MessageQueue]OffsetWrapper{
		{BrokerName: "b", QueueID: 0, Topic: "T"}: {BrokerOffset: 10, ConsumerOffset: 7, PullOffset: 8, LastTimestamp: 99},
	}}
	b, _ := Encode(cs)
	want := `{"consumeTps":1.5,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":10,"consumerOffset":7,"pullOffset":8,"lastTimestamp":99}}}`
	if string(b) != want {
		t.Fatalf("got %s", b)
	}
	roundTrip(t, cs)
}

func TestResetOffsetBody(t *testing.T) {
	r := &ResetOffsetBody{OffsetTable: map[MessageQueue]int64{{"b", 0, "T"}: 5, {"b", 1, "T"}: 6}}
	b, _ := Encode(r)
	if string(b) != `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5,{"brokerName":"b","queueId":1,"topic":"T"}:6}}` {
		t.Fatalf("got %s", b)
	}
	roundTrip(t, r)
}

func TestConnections(t *testing.T) {
	cc := &ConsumerConnection{
		ConnectionSet:     []Connection{{ClientAddr: "1.2.3.4:5", ClientID: "c", Language: "GO", Version: 317}},
		ConsumeType:       ConsumePassively,
		MessageModel:      Clustering,
		ConsumeFromWhere:  ConsumeFromLastOffset,
		SubscriptionTable: map[string]SubscriptionData{"T": {Topic: "T", SubString: "*", TagsSet: []string{}, CodeSet: CodeSet{}, ExpressionType: ExpressionTag}},
	}
	roundTrip(t, cc)
	pc := &ProducerConnection{ConnectionSet: []Connection{{ClientID: "p"}}}
	roundTrip(t, pc)
	b, _ := Encode(ProducerConnection{})
	if !strings.Contains(string(b), `"connectionSet":[]`) {
		t.Fatalf("got %s", b)
	}
}

func TestCompressedRegisterBody(t *testing.T) {
	body := &RegisterBrokerBody{
		TopicConfigSerializeWrapper: TopicConfigSerializeWrapper{
			TopicConfigTable: map[string]*TopicConfig{
				"T1":     {TopicName: "T1", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6, TopicFilterType: FilterSingleTag},
				"TBW102": {TopicName: "TBW102", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 7, TopicFilterType: FilterMultiTag, Attributes: map[string]string{"+queue.type": "BatchCQ"}},
			},
			DataVersion: DataVersion{Counter: 3, Timestamp: 99},
		},
		FilterServerList: []string{},
	}
	b, err := EncodeCompressedRegisterBrokerBody(body)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeCompressedRegisterBrokerBody(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, body) {
		t.Fatalf("got %+v want %+v", back, body)
	}
	if _, err := DecodeCompressedRegisterBrokerBody([]byte("not zlib")); err == nil {
		t.Fatal("accepted garbage")
	}
}

func TestFastjsonEncodeByValue(t *testing.T) {
	a, err := Encode(ConsumeStats{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Encode(&ConsumeStats{})
	if string(a) != string(b) || string(a) != `{"consumeTps":0,"offsetTable":{}}` {
		t.Fatalf("%s vs %s", a, b)
	}
}
