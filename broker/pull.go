package broker

import (
	"strconv"
	"time"

	"rocketraft/broker/clients"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// Pull sysFlag bits (PullSysFlag).
const (
	pullFlagCommitOffset = 0x1
	pullFlagSuspend      = 0x2
	pullFlagSubscription = 0x4
)

// maxPullBytes bounds one pull response, as the Java store does for data
// still in the page cache.
const maxPullBytes = 256 * 1024

// pullRequest is PullMessageRequestHeader (protocol doc §2.5).
type pullRequest struct {
	group          string
	topic          string
	queueID        int32
	offset         int64
	maxNums        int32
	sysFlag        int32
	commitOffset   int64
	suspendTimeout int64
	subscription   string
	expressionType string
}

func parsePull(req *remoting.Command) (*pullRequest, error) {
	p := &pullRequest{group: req.Ext("consumerGroup"), topic: req.Ext("topic"), subscription: req.Ext("subscription"), expressionType: req.Ext("expressionType")}
	var err error
	if p.queueID, err = req.ExtInt32("queueId"); err != nil {
		return nil, err
	}
	if p.offset, err = req.ExtInt64("queueOffset"); err != nil {
		return nil, err
	}
	if p.maxNums, err = req.ExtInt32("maxMsgNums"); err != nil {
		return nil, err
	}
	if p.sysFlag, err = req.ExtInt32("sysFlag"); err != nil {
		return nil, err
	}
	p.commitOffset = req.ExtInt64Or("commitOffset", 0)
	p.suspendTimeout = req.ExtInt64Or("suspendTimeoutMillis", 0)
	return p, nil
}

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
	p, err := parsePull(req)
	if err != nil {
		return fail(remoting.SystemError, "bad pull header: "+err.Error())
	}
	if p.group == "" || p.topic == "" {
		return fail(remoting.SystemError, "bad pull header: consumerGroup and topic are required")
	}
	if !protocol.IsReadable(int32(b.cfg.BrokerPermission)) {
		return fail(remoting.NoPermission, "the broker["+b.cfg.BrokerName+"] pulling message is forbidden")
	}
	gc, _, err := b.groups.GetOrCreate(p.group, b.cfg.AutoCreateSubscriptionGroup)
	if err != nil {
		return fail(remoting.SystemError, "subscription group "+p.group+": "+err.Error())
	}
	if gc == nil {
		return fail(remoting.SubscriptionGroupNotExist, "subscription group ["+p.group+"] does not exist")
	}
	if !gc.ConsumeEnable {
		return fail(remoting.NoPermission, "subscription group no permission, "+p.group)
	}
	tc := b.topics.Get(p.topic)
	if tc == nil {
		return fail(remoting.TopicNotExist, "topic["+p.topic+"] not exist, apply first please!")
	}
	if !protocol.IsReadable(tc.Perm) {
		return fail(remoting.NoPermission, "the topic["+p.topic+"] pulling message is forbidden")
	}
	if p.queueID < 0 || p.queueID >= tc.ReadQueueNums {
		return fail(remoting.InvalidParameter, "queueId["+strconv.Itoa(int(p.queueID))+"] is illegal, topic "+p.topic+" has "+strconv.Itoa(int(tc.ReadQueueNums))+" read queues")
	}
	var sub *clients.Subscription
	if p.sysFlag&pullFlagSubscription != 0 {
		if sub, err = clients.ParseSubscription(p.topic, p.subscription, p.expressionType); err != nil {
			return fail(remoting.SubscriptionParseFailed, "parse the consumer's subscription failed: "+err.Error())
		}
	} else {
		var ok bool
		if sub, ok = b.clients.Subscription(p.group, p.topic); !ok {
			return fail(remoting.SubscriptionNotExist, "the consumer's subscription not exist, group "+p.group+" topic "+p.topic)
		}
	}
	if !sub.IsTag() {
		return fail(remoting.SystemError, "The broker does not support consumer to filter message by "+sub.ExpressionType)
	}
	if p.sysFlag&pullFlagCommitOffset != 0 && allowSuspend {
		b.offsets.Commit(p.group, p.topic, p.queueID, p.commitOffset)
	}

	maxNums := int(p.maxNums)
	if maxNums <= 0 {
		maxNums = 1
	}
	res := b.store.GetMessages(p.topic, p.queueID, p.offset, maxNums, maxPullBytes, sub.Match)
	resp.SetExt("suggestWhichBrokerId", "0")
	resp.SetExt("nextBeginOffset", strconv.FormatInt(res.NextBeginOffset, 10))
	resp.SetExt("minOffset", strconv.FormatInt(res.MinOffset, 10))
	resp.SetExt("maxOffset", strconv.FormatInt(res.MaxOffset, 10))
	resp.Remark = res.Status.String()
	resp.Code = pullCode(res.Status)
	if (res.Status == storage.NoMessageInQueue || res.Status == storage.NoMatchedLogicQueue) && p.offset != 0 {
		resp.Code = remoting.PullOffsetMoved
	}
	b.offsets.SetPullOffset(p.group, p.topic, p.queueID, res.NextBeginOffset)
	if resp.Code == remoting.Success {
		resp.Body = res.Body
		b.stats.recordGet(p.topic, len(res.Records))
		return resp
	}
	if resp.Code == remoting.PullNotFound && allowSuspend && p.sysFlag&pullFlagSuspend != 0 {
		hold := time.Duration(p.suspendTimeout) * time.Millisecond
		if !b.cfg.LongPollingEnable {
			hold = time.Duration(b.cfg.ShortPollingTimeMills) * time.Millisecond
		}
		if hold > 0 {
			b.longPoll.suspend(&waiter{conn: conn, req: req, topic: p.topic, queueID: p.queueID, offset: p.offset, sub: sub, deadline: time.Now().Add(hold)})
			return nil
		}
	}
	return resp
}

// pullCode maps a store lookup status to the pull response code (protocol doc
// §2.5 result table).
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
