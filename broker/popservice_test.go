package broker

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/pop"
	"rocketraft/fsm"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// popFixture is a POP service over readTables whose changes apply directly to its table (as a
// classic place does), with the group's committed offsets and the offsets ACKs commit as plain
// fields.
type popFixture struct {
	*readTables
	s         *popService
	committed map[int32]int64 // queue id -> the group's committed offset
	commits   []int64         // offsets ACKs committed
	failWith  error           // the next commits fail with it
	forwarded *remoting.Command
}

func newPopFixture(t *testing.T) *popFixture {
	t.Helper()
	rt := newReadTables(t)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	f := &popFixture{readTables: rt, committed: map[int32]int64{}}
	s, err := newPopService(popDeps{cfg: rt.cfg, topics: rt.topics, stats: newStats(), acquire: rt.acquire,
		commit: func(op *fsm.MetaOp) error {
			if f.failWith != nil {
				return f.failWith
			}
			return f.s.apply(op)
		},
		forwardOrRefuse: func(*remoting.Conn, *remoting.Command) *remoting.Command { return f.forwarded },
		refuseBadNames:  nameGuard{hclog.NewNullLogger()}.refuseBadNames,
		groupOrCreate:   func(name string) (*protocol.SubscriptionGroupConfig, error) { return rt.groups.Get(name), nil },
		committedOffset: func(_, _ string, qid int32) (int64, bool) { off, ok := f.committed[qid]; return off, ok },
		commitOffset:    func(_, _ string, _ int32, off int64) { f.commits = append(f.commits, off) },
		stop:            stop}, t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	f.s = s
	return f
}

// popReq is a POP_MESSAGE of group G on topic T, with extra header fields overriding the
// defaults (queue 0, one message, a minute invisible, no polling).
func popReq(extra map[string]string) *remoting.Command {
	ext := map[string]string{"consumerGroup": "G", "topic": "T", "queueId": "0", "maxMsgNums": "1",
		"invisibleTime": "60000", "pollTime": "0", "bornTime": strconv.FormatInt(time.Now().UnixMilli(), 10)}
	for k, v := range extra {
		ext[k] = v
	}
	return remoting.NewRequest(remoting.PopMessage, ext, nil)
}

// popped runs a POP and returns its answer and the messages it handed out, with their
// checkpoints.
func (f *popFixture) popped(extra map[string]string) (*remoting.Command, []*message.Message, []pop.ExtraInfo) {
	f.t.Helper()
	resp := f.s.handlePopMessage(nil, popReq(extra))
	if resp == nil {
		f.t.Fatal("POP parked in long polling")
	}
	msgs, err := message.DecodeRecords(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	var cks []pop.ExtraInfo
	for _, m := range msgs {
		ei, err := pop.ParseExtraInfo(message.ParseProperties(m.Properties)[popPropertyCK])
		if err != nil {
			f.t.Fatalf("offset %d: POP_CK: %v", m.QueueOffset, err)
		}
		cks = append(cks, ei)
	}
	return resp, msgs, cks
}

// offsetsOf lists the queue offsets of msgs.
func offsetsOf(msgs []*message.Message) []int64 {
	var out []int64
	for _, m := range msgs {
		out = append(out, m.QueueOffset)
	}
	return out
}

func ackReq(code int32, ck pop.ExtraInfo, extra map[string]string) *remoting.Command {
	ext := map[string]string{"consumerGroup": "G", "topic": "T", "extraInfo": ck.String()}
	for k, v := range extra {
		ext[k] = v
	}
	return remoting.NewRequest(code, ext, nil)
}

func (f *popFixture) ack(ck pop.ExtraInfo) *remoting.Command {
	return f.s.handleAckMessage(nil, ackReq(remoting.AckMessage, ck, nil))
}

func (f *popFixture) change(ck pop.ExtraInfo, invisible string) *remoting.Command {
	return f.s.handleChangeInvisibleTime(nil, ackReq(remoting.ChangeMessageInvisibleTime, ck, map[string]string{"invisibleTime": invisible}))
}

func wantOffsets(t *testing.T, msgs []*message.Message, want ...int64) {
	t.Helper()
	if got := offsetsOf(msgs); !slices.Equal(got, want) {
		t.Fatalf("offsets %v, want %v", got, want)
	}
}

// TestPopServicePopAndAck: POPs hand out each message once with its checkpoint and the header
// the client needs; ACKs remove them, move the group's offset past the acked prefix, and
// refuse stale or unknown checkpoints.
func TestPopServicePopAndAck(t *testing.T) {
	f := newPopFixture(t)
	f.put("T", 0, tagged("a", ""), tagged("a", ""), tagged("a", ""))

	resp, msgs, cks := f.popped(map[string]string{"maxMsgNums": "2"})
	if resp.Code != remoting.Success {
		t.Fatalf("pop: %d %s", resp.Code, resp.Remark)
	}
	wantOffsets(t, msgs, 0, 1)
	for ext, want := range map[string]string{"startOffsetInfo": "0 0 0", "msgOffsetInfo": "0 0 0,1", "restNum": "1",
		"reviveQid": "0", "invisibleTime": "60000", "orderCountInfo": ""} {
		if got := resp.Ext(ext); got != want {
			t.Fatalf("%s = %q, want %q", ext, got, want)
		}
	}
	if cks[1].MsgQueueOffset != 1 || cks[1].BrokerName != "B" || cks[1].QueueID != 0 || cks[1].PopTime != extOf(t, resp, "popTime") {
		t.Fatalf("checkpoint %+v", cks[1])
	}
	if got := f.s.stats.getTotal.Load(); got != 2 {
		t.Fatalf("get total %d", got)
	}
	_, more, moreCks := f.popped(map[string]string{"maxMsgNums": "2"})
	wantOffsets(t, more, 2)
	if resp, _, _ := f.popped(nil); resp.Code != remoting.PullNotFound || resp.Ext("restNum") != "0" {
		t.Fatalf("all in flight: %d %s restNum %s", resp.Code, resp.Remark, resp.Ext("restNum"))
	}

	if resp := f.ack(cks[1]); resp.Code != remoting.Success || len(f.commits) != 0 {
		t.Fatalf("ack 1: %d %s, commits %v", resp.Code, resp.Remark, f.commits)
	}
	if resp := f.ack(cks[0]); resp.Code != remoting.Success || len(f.commits) != 1 || f.commits[0] != 2 {
		t.Fatalf("ack 0: %d %s, commits %v (want the offset past 0 and 1)", resp.Code, resp.Remark, f.commits)
	}
	if resp := f.ack(cks[0]); resp.Code != remoting.Success || resp.Remark != "already acked" {
		t.Fatalf("ack 0 again: %d %s", resp.Code, resp.Remark)
	}
	stale := moreCks[0]
	stale.PopTime--
	if resp := f.ack(stale); resp.Code != remoting.NoMessage {
		t.Fatalf("stale ack: %d %s", resp.Code, resp.Remark)
	}
	unknown := moreCks[0]
	unknown.MsgQueueOffset = 9
	if resp := f.ack(unknown); resp.Code != remoting.NoMessage {
		t.Fatalf("unknown ack: %d %s", resp.Code, resp.Remark)
	}
	if in := f.s.table.Inflight(pop.Key{Group: "G", Topic: "T"}); len(in) != 1 || in[0].Offset != 2 {
		t.Fatalf("in flight %+v", in)
	}
}

// TestPopServiceChangeInvisibleTime: a changed invisible time gives the message a new
// checkpoint; once it passes, the message is handed out again with its delivery count raised.
func TestPopServiceChangeInvisibleTime(t *testing.T) {
	f := newPopFixture(t)
	f.put("T", 0, tagged("a", ""))
	_, _, cks := f.popped(nil)

	time.Sleep(5 * time.Millisecond) // the new checkpoint's popTime differs from the old one's
	resp := f.change(cks[0], "1")
	if resp.Code != remoting.Success || resp.Ext("invisibleTime") != "1" || resp.Ext("reviveQid") != "0" {
		t.Fatalf("change: %d %s %v", resp.Code, resp.Remark, resp.ExtFields)
	}
	newPopTime := extOf(t, resp, "popTime")
	if resp := f.ack(cks[0]); resp.Code != remoting.NoMessage {
		t.Fatalf("ack with the old checkpoint: %d %s", resp.Code, resp.Remark)
	}
	time.Sleep(10 * time.Millisecond)
	_, msgs, again := f.popped(nil)
	wantOffsets(t, msgs, 0)
	if msgs[0].ReconsumeTimes != 1 || again[0].PopTime <= newPopTime {
		t.Fatalf("revived: reconsumeTimes %d, checkpoint %+v", msgs[0].ReconsumeTimes, again[0])
	}
	if resp := f.ack(again[0]); resp.Code != remoting.Success {
		t.Fatalf("ack: %d %s", resp.Code, resp.Remark)
	}
	if resp := f.change(again[0], "1000"); resp.Code != remoting.NoMessage {
		t.Fatalf("change of an acked message: %d %s", resp.Code, resp.Remark)
	}
	for _, bad := range []string{"0", "x", strconv.FormatInt(popMaxInvisibleTimeMillis+1, 10)} {
		if resp := f.change(again[0], bad); resp.Code != remoting.InvalidParameter {
			t.Fatalf("invisibleTime %q: %d %s", bad, resp.Code, resp.Remark)
		}
	}
}

// TestPopServiceOrderly: an orderly POP holds the queue while its messages are in flight and
// continues after them once they are acked.
func TestPopServiceOrderly(t *testing.T) {
	f := newPopFixture(t)
	f.put("T", 0, tagged("a", ""), tagged("a", ""))
	order := map[string]string{"order": "true"}
	resp, msgs, cks := f.popped(order)
	wantOffsets(t, msgs, 0)
	if resp.Ext("reviveQid") != strconv.Itoa(popOrderReviveQid) || resp.Ext("orderCountInfo") != "0 qo0%0 0" {
		t.Fatalf("orderly header: %v", resp.ExtFields)
	}
	if resp, _, _ := f.popped(order); resp.Code != remoting.PullNotFound {
		t.Fatalf("held queue: %d %s", resp.Code, resp.Remark)
	}
	if resp := f.ack(cks[0]); resp.Code != remoting.Success {
		t.Fatalf("ack: %d %s", resp.Code, resp.Remark)
	}
	_, msgs, _ = f.popped(order)
	wantOffsets(t, msgs, 1)
}

// TestPopServiceStartOffset: a queue never popped starts at the group's committed offset, else
// at the queue's min (initMode 0) or max (1); queueId -1 reads every queue.
func TestPopServiceStartOffset(t *testing.T) {
	f := newPopFixture(t)
	f.put("T", 0, tagged("a", ""), tagged("a", ""), tagged("a", ""))
	f.put("T", 1, tagged("a", ""), tagged("a", ""))
	f.committed[0] = 2
	_, msgs, _ := f.popped(nil)
	wantOffsets(t, msgs, 2)

	if resp, _, _ := f.popped(map[string]string{"queueId": "1", "initMode": "1"}); resp.Code != remoting.PullNotFound {
		t.Fatalf("from the max: %d %s", resp.Code, resp.Remark)
	}
	f.put("T", 1, tagged("a", ""))
	_, msgs, _ = f.popped(map[string]string{"queueId": "1"})
	wantOffsets(t, msgs, 2)

	g := newPopFixture(t)
	g.put("T", 0, tagged("a", ""))
	g.put("T", 1, tagged("a", ""))
	resp, msgs, cks := g.popped(map[string]string{"queueId": "-1", "maxMsgNums": "32"})
	if resp.Code != remoting.Success || len(msgs) != 2 || cks[0].QueueID == cks[1].QueueID {
		t.Fatalf("any queue: %d %s, checkpoints %+v", resp.Code, resp.Remark, cks)
	}
}

// TestPopServiceTagFilter: a POP skips the messages its tag filter rejects, and does not hand
// them out later either.
func TestPopServiceTagFilter(t *testing.T) {
	f := newPopFixture(t)
	f.put("T", 0, tagged("a", ""), tagged("b", ""), tagged("a", ""))
	_, msgs, _ := f.popped(map[string]string{"maxMsgNums": "32", "exp": "b"})
	wantOffsets(t, msgs, 1)
	if resp, _, _ := f.popped(map[string]string{"exp": "b"}); resp.Code != remoting.PullNotFound {
		t.Fatalf("after the filtered queue: %d %s", resp.Code, resp.Remark)
	}
}

// TestPopServiceRefusals: each check answers its code, and nothing is handed out.
func TestPopServiceRefusals(t *testing.T) {
	old := strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10)
	for _, tc := range []struct {
		name  string
		setup func(f *popFixture)
		extra map[string]string
		want  int32
	}{
		{"too many messages", nil, map[string]string{"maxMsgNums": "33"}, remoting.InvalidParameter},
		{"no invisible time", nil, map[string]string{"invisibleTime": "0"}, remoting.InvalidParameter},
		{"SQL filter", nil, map[string]string{"exp": "a > 1", "expType": "SQL92"}, remoting.InvalidParameter},
		{"bad group name", nil, map[string]string{"consumerGroup": "G@"}, remoting.InvalidParameter},
		{"too old", nil, map[string]string{"bornTime": old}, remoting.PollingTimeout},
		{"broker not readable", func(f *popFixture) { f.s.cfg.BrokerPermission = int(protocol.PermWrite) }, nil, remoting.NoPermission},
		{"unknown group", nil, map[string]string{"consumerGroup": "G2"}, remoting.SubscriptionGroupNotExist},
		{"unknown topic", nil, map[string]string{"topic": "T2"}, remoting.TopicNotExist},
		{"queue out of range", nil, map[string]string{"queueId": "2"}, remoting.InvalidParameter},
		{"no store", func(f *popFixture) { f.s.acquire = noStore }, nil, remoting.ServiceNotAvailable},
		{"commit fails", func(f *popFixture) { f.failWith = fsm.ErrClosed }, nil, remoting.ServiceNotAvailable},
		{"forwarded", func(f *popFixture) {
			f.forwarded = remoting.NewRequest(0, nil, nil).NewResponse(remoting.SystemError, "relayed")
		}, nil, remoting.SystemError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPopFixture(t)
			f.put("T", 0, tagged("a", ""))
			if tc.setup != nil {
				tc.setup(f)
			}
			resp, msgs, _ := f.popped(tc.extra)
			if resp.Code != tc.want || len(msgs) != 0 {
				t.Fatalf("code %d (%s), %d messages; want %d", resp.Code, resp.Remark, len(msgs), tc.want)
			}
			if r := f.s.table.Records(); len(r) != 0 {
				t.Fatalf("POP state changed: %+v", r)
			}
		})
	}
}

// TestPopServiceAckRefusals: bad ACK and CHANGE headers, and a failed commit, change nothing.
func TestPopServiceAckRefusals(t *testing.T) {
	f := newPopFixture(t)
	f.put("T", 0, tagged("a", ""))
	_, _, cks := f.popped(nil)
	for _, tc := range []struct {
		name string
		req  *remoting.Command
		want int32
	}{
		{"no extraInfo", remoting.NewRequest(remoting.AckMessage, map[string]string{"consumerGroup": "G", "topic": "T"}, nil), remoting.MessageIllegal},
		{"bad group name", ackReq(remoting.AckMessage, cks[0], map[string]string{"consumerGroup": "G@"}), remoting.InvalidParameter},
		{"bad offset", ackReq(remoting.AckMessage, cks[0], map[string]string{"offset": "x"}), remoting.MessageIllegal},
	} {
		if resp := f.s.handleAckMessage(nil, tc.req); resp.Code != tc.want {
			t.Fatalf("%s: ack: %d %s, want %d", tc.name, resp.Code, resp.Remark, tc.want)
		}
		tc.req.Code = remoting.ChangeMessageInvisibleTime
		tc.req.ExtFields["invisibleTime"] = "1000"
		if resp := f.s.handleChangeInvisibleTime(nil, tc.req); resp.Code != tc.want {
			t.Fatalf("%s: change: %d %s, want %d", tc.name, resp.Code, resp.Remark, tc.want)
		}
	}
	f.failWith = fsm.ErrClosed
	if resp := f.ack(cks[0]); resp.Code != remoting.ServiceNotAvailable {
		t.Fatalf("ack, commit failing: %d %s", resp.Code, resp.Remark)
	}
	if resp := f.change(cks[0], "1000"); resp.Code != remoting.ServiceNotAvailable {
		t.Fatalf("change, commit failing: %d %s", resp.Code, resp.Remark)
	}
	if in := f.s.table.Inflight(pop.Key{Group: "G", Topic: "T"}); len(in) != 1 || in[0].PopTime != cks[0].PopTime {
		t.Fatalf("in flight %+v", in)
	}
}

// BATCH_ACK_MESSAGE checks every ack before it changes anything: a bad body or ack is
// MESSAGE_ILLEGAL, a bad name is refused as the name check answers.
func TestPopServiceBatchAckChecks(t *testing.T) {
	ack := func(f *popFixture, acks ...protocol.BatchAck) *remoting.Command {
		body, err := protocol.Encode(protocol.BatchAckBody{BrokerName: "b1", Acks: acks})
		if err != nil {
			t.Fatal(err)
		}
		return f.s.handleBatchAck(nil, remoting.NewRequest(remoting.BatchAckMessage, nil, body))
	}
	f := newPopFixture(t)
	if r := f.s.handleBatchAck(nil, remoting.NewRequest(remoting.BatchAckMessage, nil, []byte("{"))); r.Code != remoting.MessageIllegal {
		t.Fatalf("bad body: %d %q", r.Code, r.Remark)
	}
	cases := []struct {
		a      protocol.BatchAck
		remark string
	}{
		{protocol.BatchAck{Topic: "T"}, "lacks its consumer group or topic"},
		{protocol.BatchAck{ConsumerGroup: "g", Topic: "T", QueueID: -1}, "negative queue id"},
		{protocol.BatchAck{ConsumerGroup: "g", Topic: "T", BitSet: make([]byte, maxBatchAckOffsets/8+1)}, "names too many offsets"},
	}
	for _, c := range cases {
		if r := ack(f, c.a); r.Code != remoting.MessageIllegal || !strings.Contains(r.Remark, c.remark) {
			t.Errorf("%+v: %d %q, want %q", c.a, r.Code, r.Remark, c.remark)
		}
	}
	var checked []string
	f.s.refuseBadNames = func(req *remoting.Command, checks ...nameCheck) *remoting.Command {
		for _, c := range checks {
			checked = append(checked, c.name)
		}
		return req.NewResponse(remoting.InvalidParameter, "bad name")
	}
	if r := ack(f, protocol.BatchAck{ConsumerGroup: "g", Topic: "T"}); r.Code != remoting.InvalidParameter || strings.Join(checked, ",") != "g,T" {
		t.Fatalf("bad name: %d %q, checked %v", r.Code, r.Remark, checked)
	}
	f.forwarded = &remoting.Command{Code: remoting.ServiceNotAvailable, Remark: "follower"}
	if r := ack(f); r.Code != remoting.ServiceNotAvailable || r.Remark != "follower" {
		t.Fatalf("not writable: %d %q", r.Code, r.Remark)
	}
}
