package broker

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/internal/storetest"
	"rocketraft/fsm"
	"rocketraft/message"
	"rocketraft/remoting"
)

// testOffsets is an offsetHandlers over newTestTables, with the name checks of a broker named
// "B"; forward (nil: serve here) is both its write and its read forwarding.
type testOffsets struct {
	*offsetHandlers
	tt *testTables
}

func newTestOffsets(t *testing.T, forward func(*remoting.Conn, *remoting.Command) *remoting.Command) *testOffsets {
	t.Helper()
	tt := newTestTables(t)
	if forward == nil {
		forward = func(*remoting.Conn, *remoting.Command) *remoting.Command { return nil }
	}
	o := &offsetHandlers{cfg: tt.cfg, logger: hclog.NewNullLogger(), tables: tt.tables, place: tt.fp, topics: tt.topics,
		groups: tt.groups, clients: tt.clients, refuseBadNames: nameGuard{hclog.NewNullLogger()}.refuseBadNames, forwardOrRefuse: forward,
		forwardRead: forward, isClassicSlave: func() bool { return false }}
	return &testOffsets{o, tt}
}

func updateOffsetReq(ext map[string]string) *remoting.Command {
	return requestWith(remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "G", "topic": "T", "queueId": "1", "commitOffset": "42"}, ext)
}

func TestOffsetHandlersUpdateRefusals(t *testing.T) {
	tests := []struct {
		name   string
		ext    map[string]string
		code   int32
		remark string
	}{
		{"no commit offset", map[string]string{"commitOffset": "-"}, remoting.SystemError, "bad update consumer offset header"},
		{"bad queue id", map[string]string{"queueId": "x"}, remoting.SystemError, "bad update consumer offset header"},
		{"no group", map[string]string{"consumerGroup": "-"}, remoting.SystemError, "bad update consumer offset header"},
		{"invalid group", map[string]string{"consumerGroup": "bad group!"}, remoting.InvalidParameter, "invalid consumerGroup: "},
		{"invalid topic", map[string]string{"topic": "bad topic!"}, remoting.InvalidParameter, "invalid topic: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := newTestOffsets(t, nil)
			resp := o.handleUpdateConsumerOffset(nil, updateOffsetReq(tc.ext))
			if resp.Code != tc.code || !strings.HasPrefix(resp.Remark, tc.remark) {
				t.Fatalf("answer %d %q, want %d %q...", resp.Code, resp.Remark, tc.code, tc.remark)
			}
			if c := o.tt.fp.commitsMade(); len(c) != 0 {
				t.Fatalf("a refused update committed %+v", c)
			}
		})
	}
}

// A client's update is committed as sent; one a follower forwarded only moves forward; an
// answered update reports a commit that did not become durable, a oneway one does not.
func TestOffsetHandlersUpdateCommits(t *testing.T) {
	o := newTestOffsets(t, nil)
	if resp := o.handleUpdateConsumerOffset(nil, updateOffsetReq(nil)); resp.Code != remoting.Success {
		t.Fatalf("update: %d %s", resp.Code, resp.Remark)
	}
	if resp := o.handleUpdateConsumerOffset(nil, updateOffsetReq(map[string]string{extForwarded: "1", "commitOffset": "43"})); resp.Code != remoting.Success {
		t.Fatalf("forwarded update: %d %s", resp.Code, resp.Remark)
	}
	want := []fakeCommit{
		{fsm.OffsetCommit{Group: "G", Topic: "T", QueueID: 1, Offset: 42}, false},
		{fsm.OffsetCommit{Group: "G", Topic: "T", QueueID: 1, Offset: 43}, true},
	}
	if got := o.tt.fp.commitsMade(); !reflect.DeepEqual(got, want) {
		t.Fatalf("commits %+v, want %+v", got, want)
	}

	o.tt.fp.commitErr = errOffsetNotReplicated
	resp := o.handleUpdateConsumerOffset(nil, updateOffsetReq(nil))
	if resp.Code != remoting.SystemError || resp.Remark != errOffsetNotReplicated.Error() {
		t.Fatalf("update whose commit was lost: %d %q", resp.Code, resp.Remark)
	}
	oneway := updateOffsetReq(nil)
	oneway.Flag |= remoting.FlagOneway
	if resp := o.handleUpdateConsumerOffset(nil, oneway); resp.Code != remoting.Success {
		t.Fatalf("oneway update: %d %s", resp.Code, resp.Remark)
	}
}

// A follower's forwarded answer is returned, except on a classic slave, which stores the
// commit itself.
func TestOffsetHandlersUpdateForwardOrSlave(t *testing.T) {
	fwd := remoting.NewRequest(0, nil, nil).NewResponse(remoting.ServiceNotAvailable, "no leader")
	o := newTestOffsets(t, func(*remoting.Conn, *remoting.Command) *remoting.Command { return fwd })
	if resp := o.handleUpdateConsumerOffset(nil, updateOffsetReq(nil)); resp != fwd {
		t.Fatalf("answered %d %q, not the forwarded answer", resp.Code, resp.Remark)
	}
	if c := o.tt.fp.commitsMade(); len(c) != 0 {
		t.Fatalf("a forwarded update committed here: %+v", c)
	}
	o.isClassicSlave = func() bool { return true }
	if resp := o.handleUpdateConsumerOffset(nil, updateOffsetReq(nil)); resp.Code != remoting.Success {
		t.Fatalf("classic slave: %d %s", resp.Code, resp.Remark)
	}
	if c := o.tt.fp.commitsMade(); len(c) != 1 {
		t.Fatalf("a classic slave did not store the commit: %+v", c)
	}
}

func TestOffsetHandlersQuery(t *testing.T) {
	query := func(ext map[string]string) *remoting.Command {
		return remoting.NewRequest(remoting.QueryConsumerOffset, ext, nil)
	}
	o := newTestOffsets(t, nil)
	if resp := o.handleQueryConsumerOffset(nil, query(map[string]string{"consumerGroup": "G", "topic": "T"})); resp.Code != remoting.SystemError {
		t.Fatalf("query without queueId: %d %s", resp.Code, resp.Remark)
	}
	if resp := o.handleQueryConsumerOffset(nil, query(map[string]string{"consumerGroup": "bad group!", "topic": "T", "queueId": "0"})); resp.Code != remoting.InvalidParameter {
		t.Fatalf("query with an invalid group: %d %s", resp.Code, resp.Remark)
	}
	o.tt.commitOffset("G", "T", 0, 17)
	resp := o.handleQueryConsumerOffset(nil, query(map[string]string{"consumerGroup": "G", "topic": "T", "queueId": "0"}))
	if resp.Code != remoting.Success || resp.Ext("offset") != "17" {
		t.Fatalf("query of a committed offset: %d %q offset=%q", resp.Code, resp.Remark, resp.Ext("offset"))
	}
	// No offset: the store decides; when it cannot be read the client is told to retry.
	o.tt.fp.acquireErr = errors.New("restoring")
	resp = o.handleQueryConsumerOffset(nil, query(map[string]string{"consumerGroup": "G", "topic": "T", "queueId": "5"}))
	if resp.Code != remoting.ServiceNotAvailable {
		t.Fatalf("query with the store unavailable: %d %s", resp.Code, resp.Remark)
	}
	// A young empty queue starts at 0.
	o.tt.fp.store = storetest.Open(t)
	resp = o.handleQueryConsumerOffset(nil, query(map[string]string{"consumerGroup": "G", "topic": "T", "queueId": "5"}))
	if resp.Code != remoting.Success || resp.Ext("offset") != "0" {
		t.Fatalf("query of a young queue: %d %q offset=%q", resp.Code, resp.Remark, resp.Ext("offset"))
	}
	// On a follower the leader's answer is returned.
	fwd := remoting.NewRequest(0, nil, nil).NewResponse(remoting.Success, "leader")
	o.forwardRead = func(*remoting.Conn, *remoting.Command) *remoting.Command { return fwd }
	if resp := o.handleQueryConsumerOffset(nil, query(nil)); resp != fwd {
		t.Fatal("a follower did not return the leader's answer")
	}
}

func TestOffsetHandlersQueueLookups(t *testing.T) {
	o := newTestOffsets(t, nil)
	st := storetest.Open(t)
	for range 3 {
		storetest.Put(t, st, &message.Message{Topic: "T", QueueID: 2, Body: []byte("m")})
	}
	o.tt.fp.store = st
	h := o.queueOffsetHandler(lookupMaxOffset)
	if resp := h(nil, remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": "T"}, nil)); resp.Code != remoting.SystemError {
		t.Fatalf("lookup without queueId: %d %s", resp.Code, resp.Remark)
	}
	resp := h(nil, remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": "T", "queueId": "2"}, nil))
	if resp.Code != remoting.Success || resp.Ext("offset") != "3" {
		t.Fatalf("max offset: %d %q offset=%q", resp.Code, resp.Remark, resp.Ext("offset"))
	}
	// A lookup's own error is the answer's remark.
	resp = o.queueOffsetHandler(lookupOffsetByTimestamp)(nil, remoting.NewRequest(remoting.SearchOffsetByTimestamp, map[string]string{"topic": "T", "queueId": "2"}, nil))
	if resp.Code != remoting.SystemError {
		t.Fatalf("search without a timestamp: %d %s", resp.Code, resp.Remark)
	}
	o.tt.fp.store, o.tt.fp.acquireErr = nil, errors.New("closing")
	if resp := h(nil, remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": "T", "queueId": "2"}, nil)); resp.Code != remoting.ServiceNotAvailable {
		t.Fatalf("lookup with the store unavailable: %d %s", resp.Code, resp.Remark)
	}
}

// INVOKE_BROKER_TO_RESET_OFFSET: refusals, then a reset to the queues' ends (timestamp -1), forced
// or only rewinding, committed through the tables.
func TestOffsetHandlersReset(t *testing.T) {
	reset := func(ext map[string]string) *remoting.Command {
		full := map[string]string{"topic": "T", "group": "G", "timestamp": "-1"}
		for k, v := range ext {
			full[k] = v
		}
		return remoting.NewRequest(remoting.InvokeBrokerToResetOffset, full, nil)
	}
	o := newTestOffsets(t, nil)
	st := storetest.Open(t)
	for range 3 {
		storetest.Put(t, st, &message.Message{Topic: "T", QueueID: 0, Body: []byte("m")})
	}
	o.tt.fp.store = st
	refusals := []struct {
		ext  map[string]string
		code int32
	}{
		{map[string]string{"timestamp": "x"}, remoting.SystemError},
		{map[string]string{"group": "bad group!"}, remoting.InvalidParameter},
		{map[string]string{"queueId": "1"}, remoting.SystemError},
		{nil, remoting.TopicNotExist}, // T is not in the topic table yet
	}
	for _, r := range refusals {
		if resp := o.handleResetOffset(nil, reset(r.ext)); resp.Code != r.code {
			t.Fatalf("reset %v: %d %s, want %d", r.ext, resp.Code, resp.Remark, r.code)
		}
	}
	if err := o.tt.topics.Put(topicCfg("T", 2)); err != nil {
		t.Fatal(err)
	}
	resp := o.handleResetOffset(nil, reset(nil))
	if resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, "not exist") {
		t.Fatalf("reset of an unknown group: %d %q", resp.Code, resp.Remark)
	}
	if c := o.tt.fp.commitsMade(); len(c) != 0 {
		t.Fatalf("refused resets committed %+v", c)
	}

	o.tt.commitOffset("G", "T", 0, 1) // the group is known by its offset
	resp = o.handleResetOffset(nil, reset(map[string]string{"isForce": "false"}))
	if resp.Code != remoting.Success || !strings.HasPrefix(resp.Remark, "no consumer of group G is online") {
		t.Fatalf("reset: %d %q", resp.Code, resp.Remark)
	}
	if off, _ := o.tt.committedOffset("G", "T", 0); off != 1 {
		t.Fatalf("an unforced reset moved queue 0 forward to %d", off)
	}
	if off, ok := o.tt.committedOffset("G", "T", 1); !ok || off != 0 {
		t.Fatalf("queue 1 = %d %v after the reset, want 0", off, ok)
	}
	resp = o.handleResetOffset(nil, reset(nil)) // isForce absent: forced
	if resp.Code != remoting.Success || len(resp.Body) == 0 {
		t.Fatalf("forced reset: %d %q", resp.Code, resp.Remark)
	}
	if off, _ := o.tt.committedOffset("G", "T", 0); off != 3 {
		t.Fatalf("a forced reset left queue 0 at %d, want its end 3", off)
	}
	for _, c := range o.tt.fp.commitsMade() {
		if c.ahead {
			t.Fatalf("a reset committed %+v only forward", c)
		}
	}
}
