package admin

import (
	"bytes"
	"compress/zlib"
	"net/netip"
	"strconv"
	"testing"

	"rocketraft/message"
	"rocketraft/remoting"
)

func record(t *testing.T, storeHost string, m message.Message) []byte {
	t.Helper()
	m.StoreHost = netip.MustParseAddrPort(storeHost)
	m.BornHost = netip.MustParseAddrPort("10.0.0.5:50000")
	b, err := message.EncodeRecord(&m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func props(kv ...string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return message.FormatProperties(m)
}

func TestQueryMsgByKeyAndID(t *testing.T) {
	const ts = int64(1700000000000)
	a0 := &brokerState{}
	f := newFixture(t, a0, nil, nil)
	a0Addr := f.a0.addr()
	first := record(t, a0Addr, message.Message{Topic: "T1", QueueID: 1, QueueOffset: 7, PhysicalOffset: 1000,
		BornTimestamp: ts - 5, StoreTimestamp: ts, Body: []byte("hello"),
		Properties: props("KEYS", "k1 k2", "TAGS", "TagA", "UNIQ_KEY", "U1")})
	second := record(t, a0Addr, message.Message{Topic: "T1", QueueID: 0, QueueOffset: 3, PhysicalOffset: 2000,
		BornTimestamp: ts + 5, StoreTimestamp: ts + 10, Body: []byte{0, 1, 2},
		Properties: props("KEYS", "k1 k3", "UNIQ_KEY", "U2")})
	collision := record(t, a0Addr, message.Message{Topic: "T1", QueueID: 0, QueueOffset: 4, PhysicalOffset: 3000,
		StoreTimestamp: ts, Body: []byte("x"), Properties: props("KEYS", "k10")})
	// Records are state read by the handler goroutines: set before the first command.
	a0.query = append(append(append([]byte{}, second...), collision...), first...)
	var zbuf bytes.Buffer
	zw := zlib.NewWriter(&zbuf)
	_, _ = zw.Write([]byte("compressed text"))
	_ = zw.Close()
	a0.view = map[string][]byte{
		"1000": first,
		"4000": record(t, a0Addr, message.Message{Topic: "T1", QueueOffset: 9, PhysicalOffset: 4000, SysFlag: message.SysFlagCompressed,
			StoreTimestamp: ts, Body: zbuf.Bytes(), Properties: props("TAGS", "Z")}),
	}
	f.route("T1", 2, "broker-a", "broker-b")
	id1 := message.OffsetMsgID(netip.MustParseAddrPort(a0Addr), 1000)
	id2 := message.OffsetMsgID(netip.MustParseAddrPort(a0Addr), 2000)

	f.expect(`
#Message ID                       #QID  #Offset  #Tags  #Keys  #Store Time
`+id1+`  1     7        TagA   k1 k2  `+localTime(ts)+`
`+id2+`  0     3               k1 k3  `+localTime(ts+10)+`
`, "queryMsgByKey", "-t", "T1", "-k", "k1", "-e", "1800000000000")
	got := f.a0.requests(remoting.QueryMessage)
	if len(got) != 1 || got[0]["key"] != "k1" || got[0]["maxNum"] != "64" || got[0]["beginTimestamp"] != "0" ||
		got[0]["endTimestamp"] != "1800000000000" || got[0]["_UNIQUE_KEY_QUERY"] != "false" {
		t.Fatalf("query header %v", got)
	}
	if len(f.b0.requests(remoting.QueryMessage)) != 1 {
		t.Fatal("broker-b (QUERY_NOT_FOUND) was not asked")
	}

	f.expect(`
OffsetID:            `+id1+`
MsgId:               U1
Topic:               T1
Tags:                [TagA]
Keys:                [k1 k2]
Queue ID:            1
Queue Offset:        7
CommitLog Offset:    1000
Reconsume Times:     0
Born Timestamp:      `+localTime(ts-5)+`
Store Timestamp:     `+localTime(ts)+`
Born Host:           10.0.0.5:50000
Store Host:          {A0}
System Flag:         0
Properties:          {KEYS=k1 k2, TAGS=TagA, UNIQ_KEY=U1}
Message Body:        hello
Broker Name:         broker-a
Stored At:           broker broker-a, queue 1, offset 7, stored `+localTime(ts)+`

MessageTrack [consumerGroup=G1, trackType=NOT_CONSUME_YET, exceptionDesc=null]  (no committed offset on queue 1)
MessageTrack [consumerGroup=G2, trackType=NOT_ONLINE, exceptionDesc=CODE:206 DESC:the consumer group[G2] not online]  (no committed offset on queue 1)
`, "queryMsgById", "-i", id1)
	if got := f.a0.requests(remoting.ViewMessageByID); len(got) != 1 || got[0]["offset"] != "1000" {
		t.Fatalf("view header %v", got)
	}

	f.expect(`
[
  {
    "offsetMsgId": "`+id2+`",
    "msgId": "U2",
    "topic": "T1",
    "tags": "",
    "keys": "k1 k3",
    "queueId": 0,
    "queueOffset": 3,
    "commitLogOffset": 2000,
    "reconsumeTimes": 0,
    "bornTimestamp": `+strconv.FormatInt(ts+5, 10)+`,
    "storeTimestamp": `+strconv.FormatInt(ts+10, 10)+`,
    "bornHost": "10.0.0.5:50000",
    "storeHost": "{A0}",
    "sysFlag": 0,
    "properties": {
      "KEYS": "k1 k3",
      "UNIQ_KEY": "U2"
    },
    "bodyBase64": "AAEC",
    "bodySize": 3
  }
]
`, "queryMsgByKey", "-t", "T1", "-k", "k3", "-o", "json")

	id4 := message.OffsetMsgID(netip.MustParseAddrPort(a0Addr), 4000)
	out, _, code := f.mq("queryMsgById", "-i", id4)
	if code != 0 || !bytes.Contains([]byte(out), []byte("\nMessage Body:        compressed text\n")) {
		t.Fatalf("exit %d, compressed body not shown:\n%s", code, out)
	}
	f.expectFail(1, []string{"no message of topic T1 with key nokey"}, "queryMsgByKey", "-t", "T1", "-k", "nokey")
	f.expectFail(1, []string{"can not find message by the offset, 5000"},
		"queryMsgById", "-i", message.OffsetMsgID(netip.MustParseAddrPort(a0Addr), 5000))
	f.expectFail(2, []string{"offset msgId \"XYZ\": length 3"}, "queryMsgById", "-i", "XYZ")
}
