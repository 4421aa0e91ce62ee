package broker

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/dledger"
	"rocketraft/fsm"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// newTestLocks is a queueLocks over newTestTables' lock table and fake place (which applies
// each change at once), with the name checks and queue filter of a broker named "B" and
// forward as its forwarding (nil: serve here).
func newTestLocks(t *testing.T, forward func(*remoting.Conn, *remoting.Command) *remoting.Command) (*queueLocks, *testTables) {
	t.Helper()
	tt := newTestTables(t)
	if forward == nil {
		forward = func(*remoting.Conn, *remoting.Command) *remoting.Command { return nil }
	}
	return &queueLocks{clients: tt.clients, place: tt.fp, refuseBadNames: nameGuard{hclog.NewNullLogger()}.refuseBadNames,
		forwardOrRefuse: forward, brokerName: tt.cfg.BrokerName}, tt
}

func lockReq(group, client string, mqs ...protocol.MessageQueue) *remoting.Command {
	body := protocol.MustEncode(protocol.LockBatchRequestBody{ConsumerGroup: group, ClientID: client, MqSet: mqs})
	return remoting.NewRequest(remoting.LockBatchMQ, nil, body)
}

func unlockReq(group, client string, mqs ...protocol.MessageQueue) *remoting.Command {
	body := protocol.MustEncode(protocol.UnlockBatchRequestBody{ConsumerGroup: group, ClientID: client, MqSet: mqs})
	return remoting.NewRequest(remoting.UnlockBatchMQ, nil, body)
}

// lockedBy runs a LOCK_BATCH_MQ and returns the queues the answer grants.
func lockedBy(t *testing.T, l *queueLocks, group, client string, mqs ...protocol.MessageQueue) []protocol.MessageQueue {
	t.Helper()
	resp := l.handleLockBatch(nil, lockReq(group, client, mqs...))
	if resp.Code != remoting.Success {
		t.Fatalf("lock: code %d %s", resp.Code, resp.Remark)
	}
	var body protocol.LockBatchResponseBody
	if err := protocol.Decode(resp.Body, &body); err != nil {
		t.Fatal(err)
	}
	return body.LockOKMQSet
}

func mqOf(broker string, q int32) protocol.MessageQueue {
	return protocol.MessageQueue{Topic: "T", BrokerName: broker, QueueID: q}
}

// Malformed requests and invalid names are refused before anything is decided.
func TestQueueLocksRefusals(t *testing.T) {
	bad := protocol.MessageQueue{Topic: "bad topic!", BrokerName: "B"}
	tests := []struct {
		name   string
		req    *remoting.Command
		unlock bool
		code   int32
		remark string
	}{
		{"lock: undecodable body", remoting.NewRequest(remoting.LockBatchMQ, nil, []byte("{")), false, remoting.SystemError, "bad lock body: "},
		{"lock: no client id", lockReq("G", "", mqOf("B", 0)), false, remoting.SystemError, "bad lock body: consumerGroup and clientId"},
		{"lock: no group", lockReq("", "c1", mqOf("B", 0)), false, remoting.SystemError, "bad lock body: consumerGroup and clientId"},
		{"lock: invalid group", lockReq("bad group!", "c1", mqOf("B", 0)), false, remoting.InvalidParameter, "invalid consumerGroup: "},
		{"lock: invalid topic", lockReq("G", "c1", mqOf("B", 0), bad), false, remoting.InvalidParameter, "invalid topic of mqSet entry 1: "},
		{"unlock: undecodable body", remoting.NewRequest(remoting.UnlockBatchMQ, nil, []byte("{")), true, remoting.SystemError, "bad unlock body: "},
		{"unlock: no client id", unlockReq("G", "", mqOf("B", 0)), true, remoting.SystemError, "bad unlock body: consumerGroup and clientId"},
		{"unlock: invalid topic", unlockReq("G", "c1", bad), true, remoting.InvalidParameter, "invalid topic of mqSet entry 0: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, tt := newTestLocks(t, nil)
			handle := l.handleLockBatch
			if tc.unlock {
				handle = l.handleUnlockBatch
			}
			resp := handle(nil, tc.req)
			if resp.Code != tc.code || !strings.HasPrefix(resp.Remark, tc.remark) {
				t.Fatalf("answer %d %q, want %d %q...", resp.Code, resp.Remark, tc.code, tc.remark)
			}
			if ops := tt.fp.opsOf(); len(ops) != 0 {
				t.Fatalf("a refused request made changes %v", ops)
			}
		})
	}
}

// A request the node forwards is answered with the forwarded answer, and nothing is decided here.
func TestQueueLocksForwarded(t *testing.T) {
	forwarded := remoting.NewRequest(0, nil, nil).NewResponse(remoting.ServiceNotAvailable, "from the leader")
	l, tt := newTestLocks(t, func(*remoting.Conn, *remoting.Command) *remoting.Command { return forwarded })
	if resp := l.handleLockBatch(nil, lockReq("G", "c1", mqOf("B", 0))); resp != forwarded {
		t.Fatalf("lock answered %d %q, not the forwarded answer", resp.Code, resp.Remark)
	}
	if resp := l.handleUnlockBatch(nil, unlockReq("G", "c1", mqOf("B", 0))); resp != forwarded {
		t.Fatalf("unlock answered %d %q, not the forwarded answer", resp.Code, resp.Remark)
	}
	if ops := tt.fp.opsOf(); len(ops) != 0 {
		t.Fatalf("a forwarded request made changes %v", ops)
	}
}

// Free queues and the client's own are granted, a queue another client holds is not, queues of
// other brokers are ignored, and a request with nothing grantable makes no change.
func TestQueueLocksGrants(t *testing.T) {
	l, tt := newTestLocks(t, nil)
	got := lockedBy(t, l, "G", "c1", mqOf("B", 0), mqOf("B", 1), mqOf("Other", 2), mqOf("", 3))
	if want := []protocol.MessageQueue{mqOf("B", 0), mqOf("B", 1), mqOf("", 3)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("c1 granted %+v, want %+v", got, want)
	}
	got = lockedBy(t, l, "G", "c2", mqOf("B", 1), mqOf("B", 4))
	if want := []protocol.MessageQueue{mqOf("B", 4)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("c2 granted %+v, want only the free queue %+v", got, want)
	}
	if got = lockedBy(t, l, "G", "c1", mqOf("B", 0)); len(got) != 1 {
		t.Fatalf("c1's renewal granted %+v", got)
	}
	// Another group's locks are separate.
	if got = lockedBy(t, l, "G2", "c2", mqOf("B", 0)); len(got) != 1 {
		t.Fatalf("another group's lock refused: %+v", got)
	}
	ops := len(tt.fp.opsOf())
	if got = lockedBy(t, l, "G", "c2", mqOf("B", 0), mqOf("B", 1)); len(got) != 0 {
		t.Fatalf("c2 granted c1's queues %+v", got)
	}
	if len(tt.fp.opsOf()) != ops {
		t.Fatal("a lock with nothing grantable made a change")
	}
	if ops := tt.fp.opsOf(); ops[0] != fsm.OpLockQueues {
		t.Fatalf("changes %v", ops)
	}
}

// An expired lock is taken over by a classic node and by a leader older than one lock expiry,
// never by a younger leader (see locks.go).
func TestQueueLocksTakeOverExpired(t *testing.T) {
	old := time.Now().Add(-2 * time.Minute)
	tests := []struct {
		name    string
		since   time.Time
		granted bool
	}{
		{"classic node", time.Time{}, true},
		{"leader for longer than the expiry", time.Now().Add(-10 * time.Minute), true},
		{"young leader", time.Now(), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, tt := newTestLocks(t, nil)
			grant := &fsm.MetaOp{Op: fsm.OpLockQueues, Now: old.UnixMilli(), Lock: &fsm.QueueLock{Group: "G", ClientID: "c1", Queues: []protocol.MessageQueue{mqOf("B", 0)}}}
			if err := tt.ApplyMeta(grant); err != nil {
				t.Fatal(err)
			}
			tt.fp.since = tc.since
			got := lockedBy(t, l, "G", "c2", mqOf("B", 0))
			if (len(got) == 1) != tc.granted {
				t.Fatalf("c2 granted %+v, want granted=%v", got, tc.granted)
			}
			if held := tt.clients.HeldBy("G", "c2", []protocol.MessageQueue{mqOf("B", 0)}); (len(held) == 1) != tc.granted {
				t.Fatalf("the table says c2 holds %+v, want %v", held, tc.granted)
			}
		})
	}
}

// A grant or release whose change fails is answered as the failure, and the table keeps its
// state.
func TestQueueLocksChangeFails(t *testing.T) {
	l, tt := newTestLocks(t, nil)
	if got := lockedBy(t, l, "G", "c1", mqOf("B", 0)); len(got) != 1 {
		t.Fatal("not granted")
	}
	tt.fp.changeErr = dledger.ErrNotLeader
	resp := l.handleLockBatch(nil, lockReq("G", "c1", mqOf("B", 1)))
	if resp.Code != remoting.ServiceNotAvailable || !strings.HasPrefix(resp.Remark, "lock queues: ") {
		t.Fatalf("failed grant answered %d %q", resp.Code, resp.Remark)
	}
	resp = l.handleUnlockBatch(nil, unlockReq("G", "c1", mqOf("B", 0)))
	if resp.Code != remoting.ServiceNotAvailable || !strings.HasPrefix(resp.Remark, "unlock queues: ") {
		t.Fatalf("failed release answered %d %q", resp.Code, resp.Remark)
	}
	held := tt.clients.HeldBy("G", "c1", []protocol.MessageQueue{mqOf("B", 0), mqOf("B", 1)})
	if want := []protocol.MessageQueue{mqOf("B", 0)}; !reflect.DeepEqual(held, want) {
		t.Fatalf("c1 holds %+v after failed changes, want %+v", held, want)
	}
}

// UNLOCK releases only what the client holds; releasing nothing makes no change.
func TestQueueLocksUnlock(t *testing.T) {
	l, tt := newTestLocks(t, nil)
	lockedBy(t, l, "G", "c1", mqOf("B", 0), mqOf("B", 1))
	ops := len(tt.fp.opsOf())
	if resp := l.handleUnlockBatch(nil, unlockReq("G", "c2", mqOf("B", 0))); resp.Code != remoting.Success {
		t.Fatalf("unlock of another's queue: %d %s", resp.Code, resp.Remark)
	}
	if len(tt.fp.opsOf()) != ops {
		t.Fatal("releasing nothing made a change")
	}
	if resp := l.handleUnlockBatch(nil, unlockReq("G", "c1", mqOf("B", 0), mqOf("Other", 1))); resp.Code != remoting.Success {
		t.Fatalf("unlock: %d %s", resp.Code, resp.Remark)
	}
	got := tt.fp.opsOf()
	if got[len(got)-1] != fsm.OpUnlockQueues {
		t.Fatalf("changes %v, want an unlock last", got)
	}
	held := tt.clients.HeldBy("G", "c1", []protocol.MessageQueue{mqOf("B", 0), mqOf("B", 1)})
	if want := []protocol.MessageQueue{mqOf("B", 1)}; !reflect.DeepEqual(held, want) {
		t.Fatalf("c1 holds %+v, want %+v (queue 1 of another broker is not this one's)", held, want)
	}
	// The released queue is free for another client.
	if got := lockedBy(t, l, "G", "c2", mqOf("B", 0)); len(got) != 1 {
		t.Fatal("a released queue was not granted")
	}
}
