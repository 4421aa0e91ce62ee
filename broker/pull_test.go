package broker

import (
	"strconv"
	"testing"

	"rocketraft/broker/clients"
	"rocketraft/broker/longpoll"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// pullFixture is a puller over readTables, with the node's role and runtime configuration as
// fields a test changes, and the commit offsets pulls carried recorded.
type pullFixture struct {
	*readTables
	pl        *puller
	role      haPart
	id        int64
	perm      int32
	slaveRead bool
	commits   []int64
}

func newPullFixture(t *testing.T) *pullFixture {
	t.Helper()
	rt := newReadTables(t)
	f := &pullFixture{readTables: rt, role: haMaster, perm: protocol.PermRead | protocol.PermWrite}
	reads := storeReads{acquire: rt.acquire}
	f.pl = &puller{cfg: rt.cfg, reads: reads, topics: rt.topics, groups: rt.groups, offsets: rt.offsets,
		clients: clients.NewManager(clients.Config{}), longPoll: longpoll.New(longpoll.Config{MaxOffset: reads.queueMaxOffset}),
		stats: newStats(), inMemoryBytes: 1 << 30,
		haPart: func() haPart { return f.role }, brokerID: func() int64 { return f.id },
		permission: func() int32 { return f.perm }, slaveReadEnable: func() bool { return f.slaveRead },
		refuseBadNames: func(req *remoting.Command, checks ...nameCheck) *remoting.Command {
			for _, c := range checks {
				if err := c.valid(c.name); err != nil {
					return req.NewResponse(remoting.InvalidParameter, "invalid "+c.field)
				}
			}
			return nil
		},
		groupOrCreate: func(name string) (*protocol.SubscriptionGroupConfig, error) { return rt.groups.Get(name), nil },
		commitPullOffset: func(_ commitOrigin, _, _ string, _ int32, off int64) {
			f.commits = append(f.commits, off)
		},
	}
	return f
}

// pullReq is a pull of group/topic/qid from off with a TAG subscription sub (carried in the
// request) and the extra sysFlag bits.
func pullReq(group, topic string, qid int32, off int64, sub string, sysFlag int32) *remoting.Command {
	h := protocol.PullMessageRequestHeader{ConsumerGroup: group, Topic: topic, QueueID: qid, QueueOffset: off,
		MaxMsgNums: 32, SysFlag: sysFlag | protocol.PullSubscription, Subscription: sub, ExpressionType: protocol.ExpressionTag,
		CommitOffset: 7}
	return remoting.NewRequest(remoting.PullMessage, h.ToExt(), nil)
}

func (f *pullFixture) pull(req *remoting.Command) *remoting.Command {
	f.t.Helper()
	resp := f.pl.handlePull(nil, req)
	if resp == nil {
		f.t.Fatal("pull parked in long polling")
	}
	return resp
}

func extOf(t *testing.T, resp *remoting.Command, key string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(resp.Ext(key), 10, 64)
	if err != nil {
		t.Fatalf("%s = %q: %v", key, resp.Ext(key), err)
	}
	return v
}

// TestPullerReads: a pull answers the queue's records with the offsets the client moves on
// with, records the group's pull offset and the traffic, filters by tag, and answers
// PULL_NOT_FOUND at the queue's end.
func TestPullerReads(t *testing.T) {
	f := newPullFixture(t)
	f.put("T", 0, tagged("a", ""), tagged("b", ""), tagged("a", ""))

	resp := f.pull(pullReq("G", "T", 0, 0, "*", 0))
	if resp.Code != remoting.Success || resp.Remark != storage.Found.String() {
		t.Fatalf("pull: %d %q", resp.Code, resp.Remark)
	}
	if msgs, err := message.DecodeRecords(resp.Body); err != nil || len(msgs) != 3 {
		t.Fatalf("body: %d messages, %v", len(msgs), err)
	}
	if extOf(t, resp, "nextBeginOffset") != 3 || extOf(t, resp, "maxOffset") != 3 || extOf(t, resp, "minOffset") != 0 {
		t.Fatalf("offsets: %v", resp.ExtFields)
	}
	if extOf(t, resp, "suggestWhichBrokerId") != protocol.MasterID {
		t.Fatalf("suggested %s", resp.Ext("suggestWhichBrokerId"))
	}
	if off, ok := f.offsets.PullOffset("G", "T", 0); !ok || off != 3 {
		t.Fatalf("pull offset %d %v", off, ok)
	}
	if got := f.pl.stats.getTotal.Load(); got != 3 {
		t.Fatalf("get total %d", got)
	}

	resp = f.pull(pullReq("G", "T", 0, 0, "b", 0))
	msgs, err := message.DecodeRecords(resp.Body)
	if resp.Code != remoting.Success || err != nil || len(msgs) != 1 || msgs[0].QueueOffset != 1 {
		t.Fatalf("tag b: %d, %d messages, %v", resp.Code, len(msgs), err)
	}

	resp = f.pull(pullReq("G", "T", 0, 3, "*", 0))
	if resp.Code != remoting.PullNotFound || extOf(t, resp, "nextBeginOffset") != 3 {
		t.Fatalf("at the end: %d %q next %s", resp.Code, resp.Remark, resp.Ext("nextBeginOffset"))
	}
}

// TestPullerOffsetChecks: an offset the queue does not hold moves a master's consumer, but a
// replica (brokerId != 0) makes it retry at the same offset, since it may only be behind.
func TestPullerOffsetChecks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		qid      int32
		off      int64
		id       int64
		wantCode int32
		wantNext int64 // -1: not checked
	}{
		{"empty queue at 0", 1, 0, 0, remoting.PullNotFound, 0},
		{"empty queue past 0, master", 1, 5, 0, remoting.PullOffsetMoved, -1},
		{"empty queue past 0, replica", 1, 5, 1, remoting.PullRetryImmediately, 5},
		{"beyond the end, master", 0, 10, 0, remoting.PullOffsetMoved, -1},
		{"beyond the end, replica", 0, 10, 2, remoting.PullRetryImmediately, 10},
		{"just at the end, replica", 0, 2, 1, remoting.PullNotFound, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPullFixture(t)
			f.put("T", 0, tagged("a", ""), tagged("a", ""))
			f.id = tc.id
			resp := f.pull(pullReq("G", "T", tc.qid, tc.off, "*", 0))
			if resp.Code != tc.wantCode {
				t.Fatalf("code %d (%s), want %d", resp.Code, resp.Remark, tc.wantCode)
			}
			if tc.wantNext >= 0 && extOf(t, resp, "nextBeginOffset") != tc.wantNext {
				t.Fatalf("nextBeginOffset %s, want %d", resp.Ext("nextBeginOffset"), tc.wantNext)
			}
		})
	}
}

// TestPullerRefusals: every check before the read answers its own code.
func TestPullerRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(f *pullFixture)
		req   *remoting.Command
		want  int32
	}{
		{"no group", nil, pullReq("", "T", 0, 0, "*", 0), remoting.SystemError},
		{"bad group name", nil, pullReq("G@", "T", 0, 0, "*", 0), remoting.InvalidParameter},
		{"bad header", nil, remoting.NewRequest(remoting.PullMessage, map[string]string{"consumerGroup": "G", "topic": "T", "queueId": "x"}, nil), remoting.SystemError},
		{"broker not readable", func(f *pullFixture) { f.perm = protocol.PermWrite }, pullReq("G", "T", 0, 0, "*", 0), remoting.NoPermission},
		{"unknown group", nil, pullReq("G2", "T", 0, 0, "*", 0), remoting.SubscriptionGroupNotExist},
		{"group may not consume", func(f *pullFixture) {
			gc := protocol.NewSubscriptionGroupConfig("G")
			gc.ConsumeEnable = false
			_ = f.groups.Put(gc)
		}, pullReq("G", "T", 0, 0, "*", 0), remoting.NoPermission},
		{"unknown topic", nil, pullReq("G", "T2", 0, 0, "*", 0), remoting.TopicNotExist},
		{"topic not readable", func(f *pullFixture) {
			tc := topicCfg("T", 2)
			tc.Perm = protocol.PermWrite
			_ = f.topics.Put(tc)
		}, pullReq("G", "T", 0, 0, "*", 0), remoting.NoPermission},
		{"queue out of range", nil, pullReq("G", "T", 2, 0, "*", 0), remoting.InvalidParameter},
		{"negative queue", nil, pullReq("G", "T", -1, 0, "*", 0), remoting.InvalidParameter},
		{"no subscription registered", nil, func() *remoting.Command {
			h := protocol.PullMessageRequestHeader{ConsumerGroup: "G", Topic: "T", MaxMsgNums: 1}
			return remoting.NewRequest(remoting.PullMessage, h.ToExt(), nil)
		}(), remoting.SubscriptionNotExist},
		{"SQL92 without the property filter", nil, func() *remoting.Command {
			h := protocol.PullMessageRequestHeader{ConsumerGroup: "G", Topic: "T", MaxMsgNums: 1, SysFlag: protocol.PullSubscription,
				Subscription: "a > 1", ExpressionType: "SQL92"}
			return remoting.NewRequest(remoting.PullMessage, h.ToExt(), nil)
		}(), remoting.SystemError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPullFixture(t)
			if tc.setup != nil {
				tc.setup(f)
			}
			if resp := f.pull(tc.req); resp.Code != tc.want {
				t.Fatalf("code %d (%s), want %d", resp.Code, resp.Remark, tc.want)
			}
		})
	}
}

// TestPullerTopicLag: a topic missing from the tables is served from the store's data off a
// classic master (its config may lag its data), never on a master.
func TestPullerTopicLag(t *testing.T) {
	for _, tc := range []struct {
		role haPart
		want int32
	}{{haMaster, remoting.TopicNotExist}, {haSlave, remoting.Success}, {haWhileLeader, remoting.Success}} {
		f := newPullFixture(t)
		f.put("L", 1, tagged("a", ""))
		f.role = tc.role
		if resp := f.pull(pullReq("G", "L", 1, 0, "*", 0)); resp.Code != tc.want {
			t.Fatalf("haPart %d: code %d (%s), want %d", tc.role, resp.Code, resp.Remark, tc.want)
		}
	}
}

// TestPullerCommitOffset: the commit offset a pull carries is recorded on a master and a Raft
// member, never on a classic slave nor by a long-poll retry.
func TestPullerCommitOffset(t *testing.T) {
	f := newPullFixture(t)
	f.pull(pullReq("G", "T", 0, 0, "*", protocol.PullCommitOffset))
	f.role = haWhileLeader
	f.pull(pullReq("G", "T", 0, 0, "*", protocol.PullCommitOffset))
	f.role = haSlave
	f.pull(pullReq("G", "T", 0, 0, "*", protocol.PullCommitOffset))
	f.role = haMaster
	f.pl.pull(nil, pullReq("G", "T", 0, 0, "*", protocol.PullCommitOffset), false)
	f.pull(pullReq("G", "T", 0, 0, "*", 0))
	if len(f.commits) != 2 || f.commits[0] != 7 || f.commits[1] != 7 {
		t.Fatalf("commits %v, want two of 7", f.commits)
	}
}

// TestPullerNoSuspend: a pull asking to wait is answered at once when polling holds nothing
// (long polling off and a zero short-polling time), and a store that cannot be read answers
// SERVICE_NOT_AVAILABLE.
func TestPullerNoSuspend(t *testing.T) {
	f := newPullFixture(t)
	f.pl.cfg.LongPollingEnable = false
	f.pl.cfg.ShortPollingTimeMills = 0
	if resp := f.pull(pullReq("G", "T", 0, 0, "*", protocol.PullSuspend)); resp.Code != remoting.PullNotFound {
		t.Fatalf("code %d (%s)", resp.Code, resp.Remark)
	}
	if f.pl.longPoll.Len() != 0 {
		t.Fatal("a waiter was parked")
	}
	f.pl.reads = storeReads{acquire: noStore}
	if resp := f.pull(pullReq("G", "T", 0, 0, "*", 0)); resp.Code != remoting.ServiceNotAvailable {
		t.Fatalf("no store: code %d (%s)", resp.Code, resp.Remark)
	}
	if _, ok := f.pl.reads.queueMaxOffset("T", 0); ok {
		t.Fatal("queueMaxOffset without a store")
	}
}

// TestSuggestBroker: the replica a consumer is sent to next, by slaveReadEnable, how far
// behind the commitlog end it reads and its group's settings.
func TestSuggestBroker(t *testing.T) {
	far := &storage.GetResult{Status: storage.Found, ReadPhysEnd: 100}
	near := &storage.GetResult{Status: storage.Found, ReadPhysEnd: 1000}
	none := &storage.GetResult{Status: storage.NoMessageInQueue}
	for _, tc := range []struct {
		name      string
		slaveRead bool
		group     string
		res       *storage.GetResult
		want      int64
	}{
		{"slave read off", false, "G", far, protocol.MasterID},
		{"far behind", true, "G", far, 1},
		{"caught up", true, "G", near, protocol.MasterID},
		{"nothing found", true, "G", none, protocol.MasterID},
		{"unknown group far behind", true, "nope", far, 1},
		{"tuned group far behind", true, "S", far, 2},
		{"tuned group caught up", true, "S", near, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPullFixture(t)
			gc := protocol.NewSubscriptionGroupConfig("S")
			gc.WhichBrokerWhenConsumeSlowly, gc.BrokerID = 2, 3
			_ = f.groups.Put(gc)
			f.slaveRead = tc.slaveRead
			f.pl.inMemoryBytes = 500
			if got := f.pl.suggestBroker(tc.group, tc.res, 1000); got != tc.want {
				t.Fatalf("suggested %d, want %d", got, tc.want)
			}
		})
	}
}
