package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/config"
	"rocketraft/fsm"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// topicFixture is a topicHandlers over real tables, a fake change path and a counted
// registration trigger.
type topicFixture struct {
	h    *topicHandlers
	tb   adminTables
	meta *metaRecorder
	reg  *counter
}

func newTopicFixture(t *testing.T) *topicFixture {
	tb := openAdminTables(t)
	f := &topicFixture{tb: tb, meta: &metaRecorder{tb: tb}, reg: &counter{}}
	f.h = &topicHandlers{cfg: &config.Broker{BrokerName: "b1"}, topics: tb.topics,
		metaMu: &nameLocks{}, logger: hclog.NewNullLogger(), acquire: acquireFails, forward: serveHere,
		changeMeta: f.meta.change, answerChange: f.meta.answer, triggerRegister: f.reg.inc}
	return f
}

func updateTopicReq(ext map[string]string) *remoting.Command {
	return requestWith(remoting.UpdateAndCreateTopic, map[string]string{"topic": "T1", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"}, ext)
}

// UPDATE_AND_CREATE_TOPIC refuses bad headers before anything changes.
func TestTopicHandlersUpdateRefusals(t *testing.T) {
	cases := []struct {
		name   string
		ext    map[string]string
		code   int32
		remark string
	}{
		{"invalid name", map[string]string{"topic": "bad topic"}, remoting.InvalidParameter, "invalid topic"},
		{"system name", map[string]string{"topic": "SCHEDULE_TOPIC_XXXX"}, remoting.InvalidParameter, "conflict with system topic"},
		{"no read queues", map[string]string{"readQueueNums": "-"}, remoting.SystemError, ""},
		{"bad write queues", map[string]string{"writeQueueNums": "x"}, remoting.SystemError, ""},
		{"no perm", map[string]string{"perm": "-"}, remoting.SystemError, ""},
		{"zero queues", map[string]string{"readQueueNums": "0"}, remoting.InvalidParameter, "between 1 and 1024"},
		{"too many queues", map[string]string{"writeQueueNums": "1025"}, remoting.InvalidParameter, "between 1 and 1024"},
		{"filter type", map[string]string{"topicFilterType": "SQL"}, remoting.InvalidParameter, "unknown topicFilterType SQL"},
		{"attributes", map[string]string{"attributes": "+nonsense.key=1"}, remoting.InvalidParameter, "topic T1: "},
	}
	for _, c := range cases {
		f := newTopicFixture(t)
		wantCode(t, c.name, f.h.handleUpdateTopic(nil, updateTopicReq(c.ext)), c.code, c.remark)
		if len(f.meta.ops) != 0 || f.reg.n != 0 {
			t.Errorf("%s: %d changes, %d registrations after a refusal", c.name, len(f.meta.ops), f.reg.n)
		}
	}
}

// A valid update stores the whole config through the change path and registers it.
func TestTopicHandlersUpdateStores(t *testing.T) {
	f := newTopicFixture(t)
	resp := f.h.handleUpdateTopic(nil, updateTopicReq(map[string]string{"readQueueNums": "2", "perm": "4",
		"topicFilterType": protocol.FilterMultiTag, "order": "true", "topicSysFlag": "1", "attributes": "+message.type=FIFO"}))
	wantCode(t, "update", resp, remoting.Success, "")
	if len(f.meta.ops) != 1 || f.meta.ops[0].Op != fsm.OpPutTopic || f.reg.n != 1 {
		t.Fatalf("ops %+v, registrations %d", f.meta.ops, f.reg.n)
	}
	tc := f.tb.topics.Get("T1")
	if tc == nil || tc.ReadQueueNums != 2 || tc.WriteQueueNums != 4 || tc.Perm != 4 || !tc.Order || tc.TopicSysFlag != 1 ||
		tc.TopicFilterType != protocol.FilterMultiTag || tc.Attributes["message.type"] != "FIFO" {
		t.Fatalf("stored %+v", tc)
	}
	// An update without attributes keeps the topic's.
	wantCode(t, "update again", f.h.handleUpdateTopic(nil, updateTopicReq(nil)), remoting.Success, "")
	if got := f.tb.topics.Get("T1").Attributes["message.type"]; got != "FIFO" {
		t.Fatalf("attributes after an update without them: %v", f.tb.topics.Get("T1").Attributes)
	}
}

// A failed change is answered as a metadata error and registers nothing; a follower that cannot
// forward answers what forwarding said.
func TestTopicHandlersUpdateFailures(t *testing.T) {
	f := newTopicFixture(t)
	f.meta.err = errors.New("disk gone")
	wantCode(t, "change fails", f.h.handleUpdateTopic(nil, updateTopicReq(nil)), remoting.SystemError, "store topic config: ")
	if f.reg.n != 0 {
		t.Fatal("a failed change registered")
	}
	f = newTopicFixture(t)
	f.h.forward = refuseAsFollower
	wantCode(t, "follower", f.h.handleUpdateTopic(nil, updateTopicReq(nil)), remoting.ServiceNotAvailable, "not the leader")
	wantCode(t, "follower delete", f.h.handleDeleteTopic(nil, remoting.NewRequest(remoting.DeleteTopicInBroker, map[string]string{"topic": "T1"}, nil)), remoting.ServiceNotAvailable, "")
	if len(f.meta.ops) != 0 {
		t.Fatal("a follower changed metadata")
	}
}

// DELETE_TOPIC_IN_BROKER: a name is required, system topics stay, the rest is one deleteTopic
// op and a registration.
func TestTopicHandlersDelete(t *testing.T) {
	f := newTopicFixture(t)
	del := func(topic string) *remoting.Command {
		return f.h.handleDeleteTopic(nil, remoting.NewRequest(remoting.DeleteTopicInBroker, map[string]string{"topic": topic}, nil))
	}
	wantCode(t, "no name", del(""), remoting.SystemError, "<topic> is null")
	wantCode(t, "system", del("SCHEDULE_TOPIC_XXXX"), remoting.InvalidParameter, "cannot be deleted")
	wantCode(t, "delete", del("T1"), remoting.Success, "")
	if len(f.meta.ops) != 1 || f.meta.ops[0].Op != fsm.OpDeleteTopic || f.meta.ops[0].Name != "T1" || f.reg.n != 1 {
		t.Fatalf("ops %+v, registrations %d", f.meta.ops, f.reg.n)
	}
	f.meta.err = errors.New("no quorum")
	wantCode(t, "failed delete", del("T2"), remoting.SystemError, "delete topic: ")
	if f.reg.n != 1 {
		t.Fatal("a failed delete registered")
	}
}

// The reads: one topic's config, the whole table, and the per-queue offsets with the last store
// time.
func TestTopicHandlersReads(t *testing.T) {
	f := newTopicFixture(t)
	f.tb.putTopic(t, "T1", 2)
	get := func(code int32, topic string) *remoting.Command {
		req := remoting.NewRequest(code, map[string]string{"topic": topic}, nil)
		switch code {
		case remoting.GetTopicConfig:
			return f.h.handleGetTopicConfig(nil, req)
		case remoting.GetAllTopicConfig:
			return f.h.handleGetAllTopicConfig(nil, req)
		}
		return f.h.handleTopicStats(nil, req)
	}
	var tc protocol.TopicConfig
	decode(t, get(remoting.GetTopicConfig, "T1"), &tc)
	if tc.TopicName != "T1" || tc.WriteQueueNums != 2 {
		t.Fatalf("config %+v", tc)
	}
	wantCode(t, "missing config", get(remoting.GetTopicConfig, "nope"), remoting.TopicNotExist, "No topic in this broker. topic: nope")
	var all protocol.TopicConfigSerializeWrapper
	decode(t, get(remoting.GetAllTopicConfig, ""), &all)
	if all.TopicConfigTable["T1"] == nil {
		t.Fatalf("table %v", all.TopicConfigTable)
	}

	wantCode(t, "stats of a missing topic", get(remoting.GetTopicStatsInfo, "nope"), remoting.TopicNotExist, "topic[nope] not exist")
	wantCode(t, "stats without a store", get(remoting.GetTopicStatsInfo, "T1"), remoting.ServiceNotAvailable, errStoreGone.Error())
	st := memStore(t)
	at := time.UnixMilli(1_700_000_000_000)
	storeAt(t, st, "T1", 1, at, at.Add(time.Second))
	f.h.acquire = acquireOf(st)
	var stats protocol.TopicStatsTable
	decode(t, get(remoting.GetTopicStatsInfo, "T1"), &stats)
	q1 := stats.OffsetTable[protocol.MessageQueue{Topic: "T1", BrokerName: "b1", QueueID: 1}]
	q0, ok := stats.OffsetTable[protocol.MessageQueue{Topic: "T1", BrokerName: "b1", QueueID: 0}]
	if len(stats.OffsetTable) != 2 || !ok || q0.MaxOffset != 0 || q0.LastUpdateTimestamp != 0 ||
		q1.MaxOffset != 2 || q1.LastUpdateTimestamp != at.Add(time.Second).UnixMilli() {
		t.Fatalf("stats %+v", stats.OffsetTable)
	}
}
