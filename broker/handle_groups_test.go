package broker

import (
	"errors"
	"slices"
	"testing"
	"time"

	"rocketraft/broker/clients"
	"rocketraft/config"
	"rocketraft/fsm"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// groupFixture is a groupHandlers over real tables, an empty clients manager, a fake change path
// and a committed-offset view that reads the offset table.
type groupFixture struct {
	h    *groupHandlers
	tb   adminTables
	meta *metaRecorder
}

func newGroupFixture(t *testing.T) *groupFixture {
	tb := openAdminTables(t)
	f := &groupFixture{tb: tb, meta: &metaRecorder{tb: tb}}
	f.h = &groupHandlers{cfg: &config.Broker{BrokerName: "b1"}, topics: tb.topics, groups: tb.groups,
		offsets: tb.offsets, clients: clients.NewManager(clients.Config{Notify: func(*remoting.Conn, string) {}}),
		acquire: acquireFails, committedOffset: tb.offsets.Query, forward: serveHere, answerChange: f.meta.answer}
	return f
}

// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: the body is the config; bad JSON and bad names change
// nothing; a good one is one putGroup op.
func TestGroupHandlersUpdate(t *testing.T) {
	f := newGroupFixture(t)
	update := func(body []byte) *remoting.Command {
		return f.h.handleUpdateGroup(nil, remoting.NewRequest(remoting.UpdateAndCreateSubscriptionGroup, nil, body))
	}
	wantCode(t, "bad body", update([]byte("{")), remoting.SystemError, "bad subscription group body")
	gc := protocol.NewSubscriptionGroupConfig("bad group")
	wantCode(t, "bad name", update(protocol.MustEncode(gc)), remoting.InvalidParameter, "")
	if len(f.meta.ops) != 0 {
		t.Fatalf("refusals changed metadata: %+v", f.meta.ops)
	}
	gc = protocol.NewSubscriptionGroupConfig("G1")
	gc.RetryMaxTimes = 3
	wantCode(t, "update", update(protocol.MustEncode(gc)), remoting.Success, "")
	if got := f.tb.groups.Get("G1"); got == nil || got.RetryMaxTimes != 3 || len(f.meta.ops) != 1 || f.meta.ops[0].Op != fsm.OpPutGroup {
		t.Fatalf("stored %+v, ops %+v", got, f.meta.ops)
	}
	f.meta.err = errors.New("no quorum")
	wantCode(t, "failed update", update(protocol.MustEncode(gc)), remoting.SystemError, "store subscription group: ")
	f.h.forward = refuseAsFollower
	wantCode(t, "follower", update(protocol.MustEncode(gc)), remoting.ServiceNotAvailable, "not the leader")
}

// DELETE_SUBSCRIPTIONGROUP keeps the group's offsets unless cleanOffset is set.
func TestGroupHandlersDelete(t *testing.T) {
	cases := []struct {
		ext  map[string]string
		code int32
		keep bool
	}{
		{map[string]string{}, remoting.SystemError, false},
		{map[string]string{"groupName": "G1"}, remoting.Success, true},
		{map[string]string{"groupName": "G1", "cleanOffset": "false"}, remoting.Success, true},
		{map[string]string{"groupName": "G1", "cleanOffset": "true"}, remoting.Success, false},
	}
	for _, c := range cases {
		f := newGroupFixture(t)
		resp := f.h.handleDeleteGroup(nil, remoting.NewRequest(remoting.DeleteSubscriptionGroup, c.ext, nil))
		if resp.Code != c.code {
			t.Errorf("%v: %d %q", c.ext, resp.Code, resp.Remark)
			continue
		}
		if c.code != remoting.Success {
			if len(f.meta.ops) != 0 {
				t.Errorf("%v: refused but changed", c.ext)
			}
			continue
		}
		if len(f.meta.ops) != 1 || f.meta.ops[0].Op != fsm.OpDeleteGroup || f.meta.ops[0].Name != "G1" || f.meta.ops[0].KeepOffsets != c.keep {
			t.Errorf("%v: ops %+v", c.ext, f.meta.ops)
		}
	}
}

// The table reads: one group's config, all groups, all offsets.
func TestGroupHandlersTableReads(t *testing.T) {
	f := newGroupFixture(t)
	if err := f.tb.groups.Put(protocol.NewSubscriptionGroupConfig("G1")); err != nil {
		t.Fatal(err)
	}
	f.tb.offsets.Commit("G1", "T1", 0, 7)
	var gc protocol.SubscriptionGroupConfig
	decode(t, f.h.handleGetSubscriptionGroupConfig(nil, remoting.NewRequest(remoting.GetSubscriptionGroupConfig, map[string]string{"group": "G1"}, nil)), &gc)
	if gc.GroupName != "G1" {
		t.Fatalf("group %+v", gc)
	}
	wantCode(t, "missing group", f.h.handleGetSubscriptionGroupConfig(nil, remoting.NewRequest(remoting.GetSubscriptionGroupConfig, map[string]string{"group": "G9"}, nil)),
		remoting.SubscriptionGroupNotExist, "No group in this broker: G9")
	var all protocol.SubscriptionGroupWrapper
	decode(t, f.h.handleGetAllGroupConfig(nil, remoting.NewRequest(remoting.GetAllSubscriptionGroupConfig, nil, nil)), &all)
	if all.SubscriptionGroupTable["G1"] == nil {
		t.Fatalf("groups %v", all.SubscriptionGroupTable)
	}
	var offs protocol.ConsumerOffsetSerializeWrapper
	decode(t, f.h.handleGetAllConsumerOffset(nil, remoting.NewRequest(remoting.GetAllConsumerOffset, nil, nil)), &offs)
	if offs.OffsetTable["T1@G1"][0] != 7 {
		t.Fatalf("offsets %v", offs.OffsetTable)
	}
}

// GET_CONSUME_STATS: per queue of the group's topics (those it has offsets on, or the one
// asked), the broker's end, the committed and pulled offsets and the store time at the committed
// offset; a queue without a commit reports -1.
func TestGroupHandlersConsumeStats(t *testing.T) {
	f := newGroupFixture(t)
	stats := func(ext map[string]string) *remoting.Command {
		return f.h.handleConsumeStats(nil, remoting.NewRequest(remoting.GetConsumeStats, ext, nil))
	}
	wantCode(t, "no group", stats(nil), remoting.SystemError, "<consumerGroup> is null")
	wantCode(t, "no store", stats(map[string]string{"consumerGroup": "G1"}), remoting.ServiceNotAvailable, "")
	f.tb.putTopic(t, "T1", 2)
	f.tb.putTopic(t, "T2", 1)
	st := memStore(t)
	at := time.UnixMilli(1_700_000_000_000)
	storeAt(t, st, "T1", 0, at, at.Add(time.Second), at.Add(2*time.Second))
	f.h.acquire = acquireOf(st)
	f.tb.offsets.Commit("G1", "T1", 0, 2)
	f.tb.offsets.SetPullOffset("G1", "T1", 0, 3)
	f.tb.offsets.Commit("G1", "gone", 0, 1) // a deleted topic: no queues to report

	var cs protocol.ConsumeStats
	decode(t, stats(map[string]string{"consumerGroup": "G1"}), &cs)
	q0 := cs.OffsetTable[protocol.MessageQueue{Topic: "T1", BrokerName: "b1", QueueID: 0}]
	q1 := cs.OffsetTable[protocol.MessageQueue{Topic: "T1", BrokerName: "b1", QueueID: 1}]
	if len(cs.OffsetTable) != 2 || q0 != (protocol.OffsetWrapper{BrokerOffset: 3, ConsumerOffset: 2, PullOffset: 3, LastTimestamp: at.Add(time.Second).UnixMilli()}) ||
		q1.ConsumerOffset != -1 || q1.BrokerOffset != 0 {
		t.Fatalf("consume stats %+v", cs.OffsetTable)
	}
	decode(t, stats(map[string]string{"consumerGroup": "G1", "topic": "T2"}), &cs)
	if _, ok := cs.OffsetTable[protocol.MessageQueue{Topic: "T2", BrokerName: "b1", QueueID: 0}]; len(cs.OffsetTable) != 1 || !ok {
		t.Fatalf("one topic asked: %+v", cs.OffsetTable)
	}
}

// QUERY_TOPIC_CONSUME_BY_WHO: groups with offsets on the topic and groups online subscribed to
// it, sorted, each once.
func TestGroupHandlersConsumedByWho(t *testing.T) {
	f := newGroupFixture(t)
	f.tb.offsets.Commit("G2", "T1", 0, 1)
	f.tb.offsets.Commit("G1", "T1", 0, 1)
	f.tb.offsets.Commit("G3", "T2", 0, 1)
	conn := loopConn(t)
	f.h.clients.Heartbeat(conn, consumerHeartbeat("c1", "G0", "T1"), "GO", 1, time.Now())
	f.h.clients.Heartbeat(conn, consumerHeartbeat("c1", "G1", "T1"), "GO", 1, time.Now())
	f.h.clients.Heartbeat(conn, consumerHeartbeat("c1", "G4", "T9"), "GO", 1, time.Now())
	var body struct {
		GroupList []string `json:"groupList"`
	}
	decode(t, f.h.handleConsumedByWho(nil, remoting.NewRequest(remoting.QueryTopicConsumeByWho, map[string]string{"topic": "T1"}, nil)), &body)
	if want := []string{"G0", "G1", "G2"}; !slices.Equal(body.GroupList, want) {
		t.Fatalf("groups %v, want %v", body.GroupList, want)
	}
}
