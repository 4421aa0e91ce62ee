package broker

import (
	"context"
	"strconv"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/clients"
	"rocketraft/broker/meta"
	"rocketraft/config"
	"rocketraft/fsm"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// offsetHandlers serves the consumer-offset requests (this file) and the reset by timestamp
// (resetoffset.go). Commits go through tables, which keeps each client's commits in order and
// hands them to the place; reads ask the place. Its dependencies are wired in New; the request
// checks and forwarding other files own come as func values.
type offsetHandlers struct {
	cfg     *config.Broker
	logger  hclog.Logger
	tables  *tables
	place   place
	topics  *meta.Topics
	groups  *meta.Groups
	clients *clients.Manager
	// refuseBadNames answers an invalid group or topic name (nameGuard.refuseBadNames, names.go).
	refuseBadNames func(req *remoting.Command, checks ...nameCheck) *remoting.Command
	// forwardOrRefuse and forwardRead hand a follower's request to the leader (forward.go).
	forwardOrRefuse func(conn *remoting.Conn, req *remoting.Command) *remoting.Command
	forwardRead     func(conn *remoting.Conn, req *remoting.Command) *remoting.Command
	// isClassicSlave reports a classic slave, which stores commits itself (Broker.isClassicSlave).
	isClassicSlave func() bool
}

// hotDataWindow approximates RocketMQ's "still in the page cache" test used by
// QUERY_CONSUMER_OFFSET: a queue whose first message lies within this many
// bytes of the commitlog end counts as young.
const hotDataWindow = 4 << 30

// handleQueryConsumerOffset answers a group's committed offset. With none
// stored it answers 0 for a young queue that starts at offset 0 (so a new
// group reads a new topic from its start, as a 4.x broker does) and
// QUERY_NOT_FOUND otherwise, which makes the client apply ConsumeFromWhere.
//
// DLedger mode: the leader answers from the replicated table once every commit queued before the
// query has settled (offsetBatcher.waitSettled), so a client reads back its own commits and never
// a value a failover could take back; a follower asks the leader (waiting up to forwardWait for
// one) and answers from its replicated table only when no leader answers.
func (o *offsetHandlers) handleQueryConsumerOffset(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if fwd := o.forwardRead(conn, req); fwd != nil { // nil on a classic node and on the leader
		return fwd
	}
	resp := req.NewResponse(remoting.Success, "")
	group, topic := req.Ext("consumerGroup"), req.Ext("topic")
	qid, err := req.ExtInt32("queueId")
	if err != nil || group == "" || topic == "" {
		return req.NewResponse(remoting.SystemError, "bad query consumer offset header: consumerGroup, topic and queueId are required")
	}
	if bad := o.refuseBadNames(req, groupName("consumerGroup", group), topicName("topic", topic)); bad != nil {
		return bad
	}
	off, ok := o.place.queryOffset(group, topic, qid)
	if ok && off >= 0 {
		resp.SetExt("offset", strconv.FormatInt(off, 10))
		return resp
	}
	st, release, err := o.place.acquire()
	if err != nil {
		return storeUnavailable(req, err)
	}
	young := st.MinOffset(topic, qid) <= 0 && queueIsYoung(st, topic, qid)
	release()
	if young {
		resp.SetExt("offset", "0")
		return resp
	}
	return req.NewResponse(remoting.QueryNotFound, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
}

func queueIsYoung(st *storage.Store, topic string, qid int32) bool {
	res := st.GetMessages(topic, qid, 0, 1, maxPullBytes, nil)
	if len(res.Records) == 0 {
		return true
	}
	phys := physicalOffsetOf(res.Records[0])
	return st.CommitLogMaxOffset()-phys < hotDataWindow
}

// handleUpdateConsumerOffset records a committed offset. DLedger mode: a follower forwards it to
// the leader; the leader queues it for the next Raft entry (see offsetBatcher) and, unless the
// request is oneway, answers once that entry is applied, so an acknowledged commit survives a
// failover. A classic slave stores it locally, as a 4.x slave does (its table is replaced by the
// master's at the next metadata copy).
func (o *offsetHandlers) handleUpdateConsumerOffset(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	group, topic := req.Ext("consumerGroup"), req.Ext("topic")
	qid, err1 := req.ExtInt32("queueId")
	off, err2 := req.ExtInt64("commitOffset")
	if group == "" || topic == "" || err1 != nil || err2 != nil {
		return req.NewResponse(remoting.SystemError, "bad update consumer offset header: consumerGroup, topic, queueId and commitOffset are required")
	}
	if bad := o.refuseBadNames(req, groupName("consumerGroup", group), topicName("topic", topic)); bad != nil {
		return bad
	}
	if fwd := o.forwardOrRefuse(conn, req); fwd != nil && !o.isClassicSlave() {
		return fwd
	}
	if !o.tables.validOffsetNames(group, topic) {
		return req.NewResponse(remoting.Success, "")
	}
	// A request a follower forwarded (one hop longer than the client's direct requests to the new
	// leader) only moves the offset forward: a stale persist can arrive after a newer pull
	// commit and would move the queue back (the fault lab saw drops of 1-2 on every queue after
	// leader changes). A deliberate reset comes through the broker's own reset or straight to
	// the leader. A client's own request is dropped when a later request of the same connection
	// already committed the queue (commitOrder). Unless oneway, the answer waits until the commit
	// is durable (DLedger: its entry applied), so an acknowledged commit survives a failover.
	forwarded := req.Ext(extForwarded) != ""
	origin := originOf(conn, req)
	if forwarded {
		origin = commitOrigin{} // the follower's connection orders nothing of the client's
	}
	wait, ok := o.tables.commitInOrder(origin, fsm.OffsetCommit{Group: group, Topic: topic, QueueID: qid, Offset: off}, forwarded)
	if !ok {
		// A later request of this client already committed the queue: this one is superseded.
		return req.NewResponse(remoting.Success, "")
	}
	if !req.IsOneway() {
		ctx, cancel := context.WithTimeout(context.Background(), replicatedOffsetWait)
		defer cancel()
		if err := wait(ctx); err != nil {
			return req.NewResponse(remoting.SystemError, err.Error())
		}
	}
	return req.NewResponse(remoting.Success, "")
}

// queueOffsetHandler serves the per-queue offset lookups that all share the
// header (topic, queueId) and answer one "offset" field. lookup reads st, which is released
// when it returns.
func (o *offsetHandlers) queueOffsetHandler(lookup func(st *storage.Store, topic string, qid int32, req *remoting.Command) (string, string, error)) remoting.Handler {
	return func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		topic := req.Ext("topic")
		qid, err := req.ExtInt32("queueId")
		if topic == "" || err != nil {
			return req.NewResponse(remoting.SystemError, "bad header: topic and queueId are required")
		}
		st, release, err := o.place.acquire()
		if err != nil {
			return storeUnavailable(req, err)
		}
		key, val, err := lookup(st, topic, qid, req)
		release()
		if err != nil {
			return req.NewResponse(remoting.SystemError, err.Error())
		}
		resp := req.NewResponse(remoting.Success, "")
		resp.SetExt(key, val)
		return resp
	}
}

// The per-queue lookups served through queueOffsetHandler (handlers.go): GET_MAX_OFFSET,
// GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME, SEARCH_OFFSET_BY_TIMESTAMP.

func lookupMaxOffset(st *storage.Store, t string, q int32, _ *remoting.Command) (string, string, error) {
	return "offset", strconv.FormatInt(st.MaxOffset(t, q), 10), nil
}

func lookupMinOffset(st *storage.Store, t string, q int32, _ *remoting.Command) (string, string, error) {
	return "offset", strconv.FormatInt(st.MinOffset(t, q), 10), nil
}

func lookupEarliestStoreTime(st *storage.Store, t string, q int32, _ *remoting.Command) (string, string, error) {
	return "timestamp", strconv.FormatInt(st.EarliestMsgStoreTime(t, q), 10), nil
}

func lookupOffsetByTimestamp(st *storage.Store, t string, q int32, req *remoting.Command) (string, string, error) {
	ts, err := req.ExtInt64("timestamp")
	if err != nil {
		return "", "", err
	}
	upper := req.Ext("boundaryType") == "upper"
	return "offset", strconv.FormatInt(st.SearchOffsetByTimestamp(t, q, ts, upper), 10), nil
}
