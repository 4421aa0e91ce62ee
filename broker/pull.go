package broker

import (
	"strconv"
	"time"

	"rocketraft/broker/clients"
	"rocketraft/broker/longpoll"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// maxPullBytes bounds one pull response, as the Java store does for data
// still in the page cache.
const maxPullBytes = 256 * 1024

func (b *Broker) handlePull(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	return b.pull(conn, req, true)
}

// pull runs one pull. With allowSuspend a pull that finds nothing new is
// parked in long polling and nil is returned; the answer is sent later.
func (b *Broker) pull(conn *remoting.Conn, req *remoting.Command, allowSuspend bool) *remoting.Command {
	resp := req.NewResponse(remoting.Success, "")
	fail := func(code int32, remark string) *remoting.Command {
		resp.Code, resp.Remark = code, remark
		return resp
	}
	var p protocol.PullMessageRequestHeader
	if err := p.FromExt(req.ExtFields); err != nil {
		return fail(remoting.SystemError, "bad pull header: "+err.Error())
	}
	if p.ConsumerGroup == "" || p.Topic == "" {
		return fail(remoting.SystemError, "bad pull header: consumerGroup and topic are required")
	}
	if bad := b.refuseBadNames(req, groupName("consumerGroup", p.ConsumerGroup), topicName("topic", p.Topic)); bad != nil {
		return bad
	}
	if !protocol.IsReadable(b.brokerPermission()) {
		return fail(remoting.NoPermission, "the broker["+b.cfg.BrokerName+"] pulling message is forbidden")
	}
	gc, err := b.tables.groupOrCreate(p.ConsumerGroup)
	if err != nil {
		code, remark := errorCode(err)
		return fail(code, "subscription group "+p.ConsumerGroup+": "+remark)
	}
	if gc == nil {
		return fail(remoting.SubscriptionGroupNotExist, "subscription group ["+p.ConsumerGroup+"] does not exist")
	}
	if !gc.ConsumeEnable {
		return fail(remoting.NoPermission, "subscription group no permission, "+p.ConsumerGroup)
	}
	tc := b.topics.Get(p.Topic)
	if tc == nil && b.place.haPart() != haMaster && p.QueueID >= 0 {
		// DLedger mode: a topic's config and its first messages are separate Raft entries, and a
		// config created before this node's tables were restored may lag its data for a moment.
		// The replica's store is authoritative for what can be read. Likewise on a classic slave,
		// whose topic configs are copied from the master only every 10 s (broker/replication).
		if maxOff, _ := b.queueMaxOffset(p.Topic, p.QueueID); maxOff > 0 {
			tc = &protocol.TopicConfig{TopicName: p.Topic, ReadQueueNums: p.QueueID + 1, Perm: protocol.PermRead}
		}
	}
	if tc == nil {
		return fail(remoting.TopicNotExist, "topic["+p.Topic+"] not exist, apply first please!")
	}
	if !protocol.IsReadable(tc.Perm) {
		return fail(remoting.NoPermission, "the topic["+p.Topic+"] pulling message is forbidden")
	}
	if p.QueueID < 0 || p.QueueID >= tc.ReadQueueNums {
		return fail(remoting.InvalidParameter, "queueId["+strconv.Itoa(int(p.QueueID))+"] is illegal, topic "+p.Topic+" has "+strconv.Itoa(int(tc.ReadQueueNums))+" read queues")
	}
	var sub *clients.Subscription
	if p.SysFlag&protocol.PullSubscription != 0 {
		if sub, err = clients.ParseSubscription(p.Topic, p.Subscription, p.ExpressionType); err != nil {
			return fail(remoting.SubscriptionParseFailed, "parse the consumer's subscription failed: "+err.Error())
		}
	} else {
		var ok bool
		if sub, ok = b.clients.Subscription(p.ConsumerGroup, p.Topic); !ok {
			return fail(remoting.SubscriptionNotExist, "the consumer's subscription not exist, group "+p.ConsumerGroup+" topic "+p.Topic)
		}
	}
	switch {
	case sub.IsSQL() && !b.cfg.EnablePropertyFilter:
		return fail(remoting.SystemError, "The broker does not support consumer to filter message by SQL92: set enablePropertyFilter=true on the broker")
	case sub.IsSQL() && sub.ParseErr != nil:
		return fail(remoting.SubscriptionParseFailed, "parse the consumer's SQL92 subscription failed: "+sub.ParseErr.Error())
	case !sub.IsTag() && !sub.IsSQL():
		return fail(remoting.SystemError, "The broker does not support consumer to filter message by "+sub.ExpressionType)
	}
	if p.SysFlag&protocol.PullCommitOffset != 0 && allowSuspend && !b.isClassicSlave() {
		// DLedger: queued for Raft on the leader, ignored on a follower and on a classic slave
		// (as a Java slave does). Never a step back (see commitPullOffset).
		b.tables.commitPullOffset(originOf(conn, req), p.ConsumerGroup, p.Topic, p.QueueID, p.CommitOffset)
	}

	maxNums := int(p.MaxMsgNums)
	if maxNums <= 0 {
		maxNums = 1
	}
	res, commitLogEnd, err := b.getMessages(p.Topic, p.QueueID, p.QueueOffset, maxNums, sub.Match)
	if err != nil {
		return storeUnavailable(req, err)
	}
	if sub.SQL != nil {
		filterByProperties(&res, sub)
	}
	resp.Remark = res.Status.String()
	resp.Code = pullCode(res.Status)
	if (res.Status == storage.NoMessageInQueue || res.Status == storage.NoMatchedLogicQueue) && p.QueueOffset != 0 {
		resp.Code = remoting.PullOffsetMoved
	}
	if resp.Code == remoting.PullOffsetMoved && res.Status != storage.OffsetTooSmall && b.brokerID() != 0 {
		// A replica (a DLedger follower, a node not yet a ready leader, a classic slave) may
		// simply be behind its master: an offset beyond its queue's end is one it has not
		// applied yet, not a wrong one. Moving the consumer would make it commit that replica's
		// lower end as its offset (a regression the master then stores) and consume again
		// what it had consumed; it retries at the same offset instead, as RocketMQ's slaves
		// answer without offsetCheckInSlave.
		resp.Code = remoting.PullRetryImmediately
		res.NextBeginOffset = p.QueueOffset
	}
	resp.SetExt("suggestWhichBrokerId", strconv.FormatInt(b.suggestBroker(p.ConsumerGroup, &res, commitLogEnd), 10))
	resp.SetExt("nextBeginOffset", strconv.FormatInt(res.NextBeginOffset, 10))
	resp.SetExt("minOffset", strconv.FormatInt(res.MinOffset, 10))
	resp.SetExt("maxOffset", strconv.FormatInt(res.MaxOffset, 10))
	b.offsets.SetPullOffset(p.ConsumerGroup, p.Topic, p.QueueID, res.NextBeginOffset)
	if resp.Code == remoting.Success {
		resp.Body = res.Body
		b.stats.recordGet(p.Topic, p.ConsumerGroup, len(res.Records), len(res.Body))
		return resp
	}
	if resp.Code == remoting.PullNotFound && allowSuspend && p.SysFlag&protocol.PullSuspend != 0 {
		hold := longpoll.CapSuspend(p.SuspendTimeoutMillis, b.cfg.LongPollingMaxMillis)
		if !b.cfg.LongPollingEnable {
			hold = time.Duration(b.cfg.ShortPollingTimeMills) * time.Millisecond
		}
		if hold > 0 {
			// Woken by a message at or past the offset that sub selects; answered by running the
			// pull again, without suspending.
			w := &longpoll.Waiter{Topic: p.Topic, QueueID: p.QueueID, Offset: p.QueueOffset, Deadline: time.Now().Add(hold), Gone: conn.Done(),
				Answer: func() {
					if resp := b.pull(conn, req, false); resp != nil {
						_ = conn.Reply(resp)
					}
				}}
			if sub != nil {
				w.Match = sub.Match
			}
			b.longPoll.Suspend(w)
			return nil
		}
	}
	return resp
}

// filterByProperties drops the records a SQL92 subscription does not select (their properties
// are read from the copies GetMessages returned), keeping nextBeginOffset past everything
// scanned. A pull that found messages but none selected becomes NO_MATCHED_MESSAGE, which the
// client answers by pulling again at once from nextBeginOffset.
func filterByProperties(res *storage.GetResult, sub *clients.Subscription) {
	if res.Status != storage.Found {
		return
	}
	kept := res.Records[:0]
	var body []byte
	for _, rec := range res.Records {
		v, err := message.ParseView(rec)
		if err != nil || !sub.MatchProperties(message.ParseProperties(string(v.Properties()))) {
			continue
		}
		body = append(body, rec...)
		kept = append(kept, rec)
	}
	if len(kept) == len(res.Records) {
		return
	}
	// Re-slice the kept records out of the new body (the old one still backs the dropped ones).
	off := 0
	for i, rec := range kept {
		kept[i] = body[off : off+len(rec) : off+len(rec)]
		off += len(rec)
	}
	res.Records, res.Body, res.Bytes = kept, body, len(body)
	if len(kept) == 0 {
		res.Status = storage.NoMatchedMessage
	}
}

// suggestBroker is the broker id the consumer should pull this queue from next (the client keeps
// it per queue). Without slaveReadEnable it is always the master (0). With
// it, a reader further behind the commitlog end than accessMessageInMemoryMaxRatio percent of RAM
// (its data is likely on disk, not in the page cache) is sent to the group's
// whichBrokerWhenConsumeSlowly (default 1: a slave; in DLedger mode a follower, whose ids are
// peer index + 1, and the client tries the next id when that one is the master's), and anyone else
// to the group's brokerId (default 0), which also sends a caught-up reader back from a slave.
func (b *Broker) suggestBroker(group string, res *storage.GetResult, commitLogEnd int64) int64 {
	if !b.slaveReadEnabled() {
		return protocol.MasterID
	}
	slow, normal := int64(1), int64(protocol.MasterID)
	if gc := b.groups.Get(group); gc != nil {
		slow, normal = gc.WhichBrokerWhenConsumeSlowly, gc.BrokerID
	}
	if res.Status == storage.Found && commitLogEnd-res.ReadPhysEnd > b.inMemoryBytes {
		return slow
	}
	return normal
}

// getMessages reads one pull's messages and the commitlog's end. The store is held only for the
// read (the records are copies): never while the pull is parked in long polling, so a snapshot
// restore is not held up.
func (b *Broker) getMessages(topic string, qid int32, offset int64, maxNums int, match func(int64) bool) (storage.GetResult, int64, error) {
	st, release, err := b.acquireStore()
	if err != nil {
		return storage.GetResult{}, 0, err
	}
	defer release()
	return st.GetMessages(topic, qid, offset, maxNums, maxPullBytes, match), st.CommitLogMaxOffset(), nil
}

// queueMaxOffset is the next offset of a queue (0 if unknown); false if the store cannot be
// read now (DLedger mode: closing, or a failed restore).
func (b *Broker) queueMaxOffset(topic string, qid int32) (int64, bool) {
	st, release, err := b.acquireStore()
	if err != nil {
		return 0, false
	}
	defer release()
	return st.MaxOffset(topic, qid), true
}

// pullCode maps a store lookup status to the pull response code, as RocketMQ's broker does.
func pullCode(s storage.GetStatus) int32 {
	switch s {
	case storage.Found:
		return remoting.Success
	case storage.NoMatchedMessage, storage.MessageWasRemoving:
		return remoting.PullRetryImmediately
	case storage.OffsetTooSmall, storage.OffsetOverflowBadly:
		return remoting.PullOffsetMoved
	case storage.NoMessageInQueue, storage.NoMatchedLogicQueue:
		return remoting.PullNotFound // OFFSET_MOVED when the requested offset is not 0; see pull
	default: // OFFSET_OVERFLOW_ONE, OFFSET_FOUND_NULL
		return remoting.PullNotFound
	}
}
