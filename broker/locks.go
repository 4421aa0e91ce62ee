package broker

// LOCK_BATCH_MQ (41) / UNLOCK_BATCH_MQ (42): orderly consumption's queue locks.
//
// Classic mode keeps RocketMQ's broker-local table (its place applies each change at once): a queue is granted if free, already held by
// the requester, or its holder has not re-locked for lockMaxLiveTime (60 s); the client believes
// it holds a lock for 30 s after its last successful LOCK and re-locks every 20 s.
//
// DLedger mode must keep that promise across a leader change: two consumers must never both
// believe they hold the same queue. A broker-local table would lose every lock with the leader,
// and the new leader would hand a queue to a second consumer while the first still consumes it
// for up to 30 s. So grants and releases are Raft entries (fsm.OpLockQueues/OpUnlockQueues):
//
//   - Followers forward LOCK and UNLOCK to the leader (clients send them to brokerId 0, which a
//     stale route may name wrongly). Only the ready leader decides, under queueLocks.mu: it picks the
//     grantable queues (Lockable), proposes the grant stamped with its clock, and answers with
//     that set only once the entry is committed and applied. A client therefore only believes in
//     grants every future leader has applied before it serves (the leader is ready only after
//     its barrier); a grant whose outcome is unknown is answered as "not locked".
//   - The apply is unconditional and deterministic (the decision was the leader's), so every
//     replica's table is the same, snapshots included (queueLocks.json).
//   - Expiry compares the replicated grant time with the current leader's clock. Against clocks
//     that disagree between nodes, a leader younger than one lock expiry never takes a queue
//     away from another client on expiry grounds (takeOver=false): whatever the old leader's
//     clock said, the old holder's belief (30 s after its last grant, which was committed
//     before this leader took over) ends before the new leader's first minute does. Free
//     queues and renewals by the holder are granted at once, so a failover costs the live
//     holder nothing; only a queue whose holder died together with the leader waits up to
//     60 s longer.
//
// Classic mode's restart still loses its table, as RocketMQ's does.

import (
	"context"
	"strconv"
	"sync"
	"time"

	"rocketraft/broker/clients"
	"rocketraft/fsm"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// lockProposeTimeout bounds one lock proposal: the Go client gives LOCK_BATCH_MQ 1 s and takes
// a late answer as "not locked", so waiting longer only delays the next request.
const lockProposeTimeout = 3 * time.Second

// queueLocks serves LOCK_BATCH_MQ and UNLOCK_BATCH_MQ: it decides which queues a client may hold
// (see the file comment) and makes each grant or release happen through the place. Its
// dependencies are wired in New: the lock table (clients), the place, and the request checks
// other files own as func values.
type queueLocks struct {
	clients *clients.Manager
	place   place
	// refuseBadNames answers an invalid group or topic name (nameGuard.refuseBadNames, names.go).
	refuseBadNames func(req *remoting.Command, checks ...nameCheck) *remoting.Command
	// forwardOrRefuse hands a follower's request to the leader (forwarder.forwardOrRefuse, forward.go).
	forwardOrRefuse func(conn *remoting.Conn, req *remoting.Command) *remoting.Command
	// brokerName picks this broker's queues out of a request's (ownQueues, clienthandlers.go).
	brokerName string

	// mu serialises lock decisions with their changes.
	mu sync.Mutex
}

// handleLockBatch serves LOCK_BATCH_MQ: the answer lists the queues the client now holds.
func (l *queueLocks) handleLockBatch(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var body protocol.LockBatchRequestBody
	if err := protocol.Decode(req.Body, &body); err != nil {
		return req.NewResponse(remoting.SystemError, "bad lock body: "+err.Error())
	}
	if body.ConsumerGroup == "" || body.ClientID == "" {
		return req.NewResponse(remoting.SystemError, "bad lock body: consumerGroup and clientId are required")
	}
	if bad := l.refuseLockNames(req, body.ConsumerGroup, body.MqSet); bad != nil {
		return bad
	}
	if fwd := l.forwardOrRefuse(conn, req); fwd != nil {
		return fwd
	}
	locked, err := l.lockQueues(body.ConsumerGroup, body.ClientID, ownQueues(l.brokerName, body.MqSet))
	if err != nil {
		return metaErrorResponse(req, "lock queues", err)
	}
	resp := req.NewResponse(remoting.Success, "")
	resp.Body = protocol.MustEncode(protocol.LockBatchResponseBody{LockOKMQSet: locked})
	return resp
}

// handleUnlockBatch serves UNLOCK_BATCH_MQ: the queues the client holds are released (one
// change), the others are left alone.
func (l *queueLocks) handleUnlockBatch(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var body protocol.UnlockBatchRequestBody
	if err := protocol.Decode(req.Body, &body); err != nil {
		return req.NewResponse(remoting.SystemError, "bad unlock body: "+err.Error())
	}
	if body.ConsumerGroup == "" || body.ClientID == "" {
		return req.NewResponse(remoting.SystemError, "bad unlock body: consumerGroup and clientId are required")
	}
	if bad := l.refuseLockNames(req, body.ConsumerGroup, body.MqSet); bad != nil {
		return bad
	}
	if fwd := l.forwardOrRefuse(conn, req); fwd != nil {
		return fwd
	}
	mqs := ownQueues(l.brokerName, body.MqSet)
	l.mu.Lock()
	defer l.mu.Unlock()
	if mqs = l.clients.HeldBy(body.ConsumerGroup, body.ClientID, mqs); len(mqs) == 0 {
		return req.NewResponse(remoting.Success, "") // nothing to release: no entry needed
	}
	ctx, cancel := context.WithTimeout(context.Background(), lockProposeTimeout)
	defer cancel()
	op := &fsm.MetaOp{Op: fsm.OpUnlockQueues, Lock: &fsm.QueueLock{Group: body.ConsumerGroup, ClientID: body.ClientID, Queues: mqs}}
	if err := l.place.change(ctx, op); err != nil {
		return metaErrorResponse(req, "unlock queues", err)
	}
	return req.NewResponse(remoting.Success, "")
}

// lockQueues decides a LOCK_BATCH_MQ and makes the grant happen through the place (see the file
// comment) and returns the queues the client now holds. A classic node's leaderSince is the
// zero time, so it always takes over expired locks, as RocketMQ's broker-local table does.
func (l *queueLocks) lockQueues(group, clientID string, mqs []protocol.MessageQueue) ([]protocol.MessageQueue, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	takeOver := now.Sub(l.place.leaderSince()) > l.clients.LockExpiry()
	grant := l.clients.Lockable(group, clientID, mqs, now, takeOver)
	if len(grant) == 0 {
		return grant, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), lockProposeTimeout)
	defer cancel()
	op := &fsm.MetaOp{Op: fsm.OpLockQueues, Now: now.UnixMilli(), Lock: &fsm.QueueLock{Group: group, ClientID: clientID, Queues: grant}}
	if err := l.place.change(ctx, op); err != nil {
		return nil, err
	}
	return grant, nil
}

// refuseLockNames checks the group and every queue's topic of a LOCK/UNLOCK_BATCH_MQ (names.go).
func (l *queueLocks) refuseLockNames(req *remoting.Command, group string, mqs []protocol.MessageQueue) *remoting.Command {
	if bad := l.refuseBadNames(req, groupName("consumerGroup", group)); bad != nil {
		return bad
	}
	for i := range mqs {
		if bad := l.refuseBadNames(req, topicName("topic of mqSet entry "+strconv.Itoa(i), mqs[i].Topic)); bad != nil {
			return bad
		}
	}
	return nil
}
