package broker

// POP consumption (RocketMQ 5.x): POP_MESSAGE (200050), ACK_MESSAGE
// (200051), CHANGE_MESSAGE_INVISIBLETIME (200053).
//
// Instead of RocketMQ's checkpoint messages, revive topic and %RETRY% copies, the broker keeps
// an in-flight table per (group, topic, queue) (broker/pop, replicated in DLedger mode through
// popstate.go). A POP first hands out the queue's in-flight messages whose invisible time has
// passed (revived, reconsumeTimes raised), then new messages from the queue's next offset,
// skipping those the tag filter rejects; it answers the records in stored format, each with the
// POP_CK property the client would build (extraInfo), and the response header of §2.9. An ACK
// removes the message from the table; the group's POP offset (the lowest in-flight offset) is
// committed as its consumer offset, so consumerProgress shows it. Only the leader (classic:
// the master) serves POP: a DLedger follower forwards these requests to the leader.
//
// Orderly POP (order=true, a FIFO consumer): a queue with any message of the group still in
// flight and invisible gives nothing (the queue, hence each message group on it, is held);
// when the invisible time of its in-flight messages is over, the same messages (same offsets) are
// handed out again with reconsumeTimes raised, before anything after them; once they are all
// acked the next POP continues after them. It is the same table and the same replicated ops as
// unordered POP, only the choice differs (pop.Table.OrderlyRedeliver), so it survives a
// failover and behaves alike in classic mode. BATCH_ACK_MESSAGE: batchack.go.
//
// Not served: SQL92 filters, PEEK/NOTIFICATION/POLLING_INFO (still answered unsupported). Long
// polling checks the queues every popPollInterval until pollTime ends rather than being woken
// by the store.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"rocketraft/broker/clients"
	"rocketraft/broker/longpoll"
	"rocketraft/broker/pop"
	"rocketraft/fsm"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// POP limits and markers (the request codes are remoting.PopMessage and its family).
const (
	popMaxMsgNums                   = 32 // RocketMQ's limit per POP
	popPollInterval                 = 50 * time.Millisecond
	popForwardedPollLimit           = 3 * time.Second // under forwardTimeout
	popPropertyCK                   = "POP_CK"
	popBornTimeSlack                = 500 // ms: POLLING_TIMEOUT when now - bornTime - pollTime exceeds it
	popMaxInvisibleTimeMillis int64 = 24 * 3600 * 1000
	popOrderReviveQid               = 999999 // RocketMQ's reviveQid marking an orderly POP's checkpoint
)

// popRequest is a parsed POP_MESSAGE header.
type popRequest struct {
	group, topic  string
	queueID       int32
	maxNums       int
	invisibleTime int64
	pollTime      int64
	bornTime      int64
	initMode      int
	order         bool // orderly POP: hold a queue while any of its messages is in flight
	sub           *clients.Subscription
}

func extInt(req *remoting.Command, name string, def int64) (int64, error) {
	v := req.Ext(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, errors.New("bad " + name + " " + strconv.Quote(v))
	}
	return n, nil
}

func parsePopRequest(req *remoting.Command) (*popRequest, error) {
	p := &popRequest{group: req.Ext("consumerGroup"), topic: req.Ext("topic")}
	if p.group == "" || p.topic == "" {
		return nil, errors.New("consumerGroup and topic are required")
	}
	if err := message.ValidateGroup(p.group); err != nil {
		return nil, fmt.Errorf("consumerGroup: %w", err)
	}
	if err := message.ValidateTopic(p.topic); err != nil {
		return nil, fmt.Errorf("topic: %w", err)
	}
	var vals [6]int64
	for i, f := range []struct {
		name string
		def  int64
	}{{"queueId", -1}, {"maxMsgNums", 1}, {"invisibleTime", -1}, {"pollTime", 0}, {"bornTime", 0}, {"initMode", 0}} {
		v, err := extInt(req, f.name, f.def)
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	p.queueID, p.maxNums, p.invisibleTime, p.pollTime, p.bornTime, p.initMode = int32(vals[0]), int(vals[1]), vals[2], vals[3], vals[4], int(vals[5])
	switch {
	case p.queueID < -1:
		return nil, errors.New("queueId must be -1 (any queue) or a queue id")
	case p.maxNums <= 0 || p.maxNums > popMaxMsgNums:
		return nil, errors.New("maxMsgNums must be 1.." + strconv.Itoa(popMaxMsgNums))
	case p.invisibleTime <= 0 || p.invisibleTime > popMaxInvisibleTimeMillis:
		return nil, errors.New("invisibleTime must be positive (ms, at most a day)")
	case p.pollTime < 0:
		return nil, errors.New("pollTime must not be negative")
	case p.initMode != 0 && p.initMode != 1:
		return nil, errors.New("initMode must be 0 (MIN) or 1 (MAX)")
	}
	p.order = req.Ext("order") == "true"
	exp, expType := req.Ext("exp"), req.Ext("expType")
	if exp == "" {
		exp = "*"
	}
	sub, err := clients.ParseSubscription(p.topic, exp, expType)
	if err != nil {
		return nil, err
	}
	if !sub.IsTag() {
		return nil, errors.New("only TAG filters are supported, not " + expType)
	}
	p.sub = sub
	return p, nil
}

func (b *Broker) handlePopMessage(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if fwd := b.forwardOrRefuse(conn, req); fwd != nil {
		return fwd
	}
	p, err := parsePopRequest(req)
	if err != nil {
		return req.NewResponse(remoting.InvalidParameter, "bad POP_MESSAGE header: "+err.Error())
	}
	now := time.Now().UnixMilli()
	if p.bornTime > 0 && now-p.bornTime-p.pollTime > popBornTimeSlack {
		return req.NewResponse(remoting.PollingTimeout, "POLLING_TIMEOUT: the request is older than its pollTime")
	}
	queues, resp := b.popQueues(req, p)
	if resp != nil {
		return resp
	}
	resp = b.popOnce(req, p, queues)
	if resp.Code != remoting.PullNotFound || p.pollTime == 0 {
		return resp
	}
	hold := longpoll.CapSuspend(p.pollTime, b.cfg.LongPollingMaxMillis)
	if req.Ext(extForwarded) != "" {
		hold = min(hold, popForwardedPollLimit)
	}
	go b.popLongPoll(conn, req, p, queues, time.Now().Add(hold))
	return nil
}

// popLongPoll retries a POP that found nothing until a message is available (new or revived)
// or the deadline passes, then answers it.
func (b *Broker) popLongPoll(conn *remoting.Conn, req *remoting.Command, p *popRequest, queues []int32, deadline time.Time) {
	t := time.NewTicker(popPollInterval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-conn.Done():
			return
		case now := <-t.C:
			resp := b.popOnce(req, p, queues)
			if resp.Code != remoting.PullNotFound || now.After(deadline) {
				_ = conn.Reply(resp)
				return
			}
		}
	}
}

// popQueues checks permissions and lists the queues a POP reads, in the order it tries them.
func (b *Broker) popQueues(req *remoting.Command, p *popRequest) ([]int32, *remoting.Command) {
	if !protocol.IsReadable(int32(b.cfg.BrokerPermission)) {
		return nil, req.NewResponse(remoting.NoPermission, "the broker["+b.cfg.BrokerName+"] pop message is forbidden")
	}
	gc, err := b.tables.groupOrCreate(p.group)
	if err != nil {
		code, remark := errorCode(err)
		return nil, req.NewResponse(code, "subscription group "+p.group+": "+remark)
	}
	if gc == nil {
		return nil, req.NewResponse(remoting.SubscriptionGroupNotExist, "subscription group ["+p.group+"] does not exist")
	}
	if !gc.ConsumeEnable {
		return nil, req.NewResponse(remoting.NoPermission, "subscription group no permission, "+p.group)
	}
	tc := b.topics.Get(p.topic)
	if tc == nil {
		return nil, req.NewResponse(remoting.TopicNotExist, "topic["+p.topic+"] not exist, apply first please!")
	}
	if !protocol.IsReadable(tc.Perm) {
		return nil, req.NewResponse(remoting.NoPermission, "the topic["+p.topic+"] pop message is forbidden")
	}
	if p.queueID >= tc.ReadQueueNums {
		return nil, req.NewResponse(remoting.InvalidParameter, "queueId["+strconv.Itoa(int(p.queueID))+"] is illegal, topic "+p.topic+" has "+strconv.Itoa(int(tc.ReadQueueNums))+" read queues")
	}
	if p.queueID >= 0 {
		return []int32{p.queueID}, nil
	}
	n := tc.ReadQueueNums
	if n <= 0 {
		return nil, req.NewResponse(remoting.PullNotFound, "topic "+p.topic+" has no read queues")
	}
	first := int32(b.pop.rr.Add(1) % uint32(n))
	qs := make([]int32, n)
	for i := range qs {
		qs[i] = (first + int32(i)) % n
	}
	return qs, nil
}

// popped is what one POP took from one queue.
type popped struct {
	qid     int32
	records []*message.Message
	restNum int64
}

// popOnce runs one POP attempt over queues: SUCCESS with messages or PULL_NOT_FOUND.
func (b *Broker) popOnce(req *remoting.Command, p *popRequest, queues []int32) *remoting.Command {
	s := b.pop
	s.mu.Lock()
	defer s.mu.Unlock()
	popTime := time.Now().UnixMilli()
	var got []popped
	var restNum int64
	left := p.maxNums
	for _, qid := range queues {
		if left == 0 {
			break
		}
		pq, err := b.popQueue(p, qid, popTime, left)
		if err != nil {
			code, remark := errorCode(err)
			if errors.Is(err, errPopStore) {
				return storeUnavailable(req, err)
			}
			return req.NewResponse(code, "pop "+p.topic+"/"+strconv.Itoa(int(qid))+": "+remark)
		}
		restNum += pq.restNum
		if len(pq.records) > 0 {
			got = append(got, pq)
			left -= len(pq.records)
		}
	}
	if len(got) == 0 {
		resp := req.NewResponse(remoting.PullNotFound, "no new message, or all in flight")
		resp.SetExt("restNum", strconv.FormatInt(restNum, 10))
		return resp
	}
	return b.popResponse(req, p, got, popTime, restNum)
}

var errPopStore = errors.New("store unavailable")

// popQueue takes up to max messages of one queue (revived first, then new) and commits the
// POP op. The caller holds pop.mu.
func (b *Broker) popQueue(p *popRequest, qid int32, popTime int64, limit int) (popped, error) {
	k := pop.Key{Group: p.group, Topic: p.topic, QueueID: qid}
	st, release, err := b.acquireStore()
	if err != nil {
		return popped{}, errors.Join(errPopStore, err)
	}
	defer release()
	out := popped{qid: qid}
	op := &fsm.PopOp{Group: p.group, Topic: p.topic, QueueID: qid, PopTime: popTime, InvisibleTime: p.invisibleTime}
	// Revived: in-flight messages whose invisible time is over. Orderly: all of the queue's
	// in-flight messages once none is invisible any more, and nothing while one is.
	revive := b.pop.table.Expired(k, popTime, limit)
	if p.order {
		var held bool
		if revive, held = b.pop.table.OrderlyRedeliver(k, popTime, limit); held {
			return out, nil
		}
	}
	for _, e := range revive {
		res := st.GetMessages(p.topic, qid, e.Offset, 1, 0, nil)
		var m *message.Message
		if res.Status == storage.Found && len(res.Records) > 0 {
			m, _, _ = message.DecodeRecord(res.Records[0])
		}
		if m == nil || m.QueueOffset != e.Offset {
			op.Dropped = append(op.Dropped, e.Offset) // gone (retention) or unreadable
			continue
		}
		m.ReconsumeTimes = e.Deliveries
		out.records = append(out.records, m)
		op.Offsets = append(op.Offsets, e.Offset)
	}
	// New messages from the queue's next offset (orderly: only when nothing is in flight).
	_, next, known := b.pop.table.Offsets(k)
	if !known {
		next = b.popInitialOffset(st, p, qid)
		op.From = next
	}
	op.Next = next
	if n := limit - len(out.records); n > 0 && (!p.order || len(revive) == 0) {
		res := st.GetMessages(p.topic, qid, next, n, maxPullBytes, p.sub.Match)
		switch res.Status {
		case storage.Found, storage.NoMatchedMessage, storage.OffsetTooSmall:
			op.Next = max(next, res.NextBeginOffset)
		}
		for _, r := range res.Records {
			m, _, err := message.DecodeRecord(r)
			if err != nil {
				continue // the store checked it; skipped like a filtered one
			}
			out.records = append(out.records, m)
			op.Offsets = append(op.Offsets, m.QueueOffset)
		}
		out.restNum = max(0, res.MaxOffset-op.Next)
	}
	if len(op.Offsets) == 0 && len(op.Dropped) == 0 && op.Next == next && known {
		return out, nil // nothing changed
	}
	if err := b.pop.commit(&fsm.MetaOp{Op: fsm.OpPopMessages, Now: popTime, Pop: op}); err != nil {
		return popped{}, err
	}
	return out, nil
}

// popInitialOffset is where a group starts a queue it never popped: its committed consumer
// offset if any, else the queue's min (initMode 0) or max (1) offset.
func (b *Broker) popInitialOffset(st *storage.Store, p *popRequest, qid int32) int64 {
	if off, ok := b.tables.committedOffset(p.group, p.topic, qid); ok && off >= 0 {
		return off
	}
	if p.initMode == 1 {
		return st.MaxOffset(p.topic, qid)
	}
	return st.MinOffset(p.topic, qid)
}

// popResponse builds the SUCCESS answer: records in stored format with POP_CK, and the header
// the client derives each message's extraInfo from.
func (b *Broker) popResponse(req *remoting.Command, p *popRequest, got []popped, popTime, restNum int64) *remoting.Command {
	resp := req.NewResponse(remoting.Success, "FOUND")
	var body []byte
	var startInfo, msgInfo, orderInfo []string
	reviveQid := int32(0)
	if p.order {
		reviveQid = popOrderReviveQid
	}
	n := 0
	for _, pq := range got {
		slices.SortFunc(pq.records, func(a, c *message.Message) int { return cmp.Compare(a.QueueOffset, c.QueueOffset) })
		start := pq.records[0].QueueOffset
		offs := make([]string, 0, len(pq.records))
		for _, m := range pq.records {
			ei := pop.ExtraInfo{CkQueueOffset: start, PopTime: popTime, InvisibleTime: p.invisibleTime, ReviveQid: reviveQid,
				BrokerName: b.cfg.BrokerName, QueueID: pq.qid, MsgQueueOffset: m.QueueOffset}
			if p.order {
				// RocketMQ's per-message order count: "0 qo<queueId>%<offset> <reconsumeTimes>".
				orderInfo = append(orderInfo, "0 qo"+strconv.Itoa(int(pq.qid))+"%"+strconv.FormatInt(m.QueueOffset, 10)+" "+strconv.Itoa(int(m.ReconsumeTimes)))
			}
			props := message.ParseProperties(m.Properties)
			props[popPropertyCK] = ei.String()
			m.Properties = message.FormatProperties(props)
			var err error
			if body, err = message.AppendRecord(body, m); err != nil {
				return req.NewResponse(remoting.SystemError, "encode popped message: "+err.Error())
			}
			offs = append(offs, strconv.FormatInt(m.QueueOffset, 10))
			n++
		}
		qs := strconv.Itoa(int(pq.qid))
		startInfo = append(startInfo, "0 "+qs+" "+strconv.FormatInt(start, 10))
		msgInfo = append(msgInfo, "0 "+qs+" "+strings.Join(offs, ","))
	}
	resp.SetExt("popTime", strconv.FormatInt(popTime, 10))
	resp.SetExt("invisibleTime", strconv.FormatInt(p.invisibleTime, 10))
	resp.SetExt("reviveQid", strconv.Itoa(int(reviveQid)))
	resp.SetExt("restNum", strconv.FormatInt(restNum, 10))
	resp.SetExt("startOffsetInfo", strings.Join(startInfo, ";"))
	resp.SetExt("msgOffsetInfo", strings.Join(msgInfo, ";"))
	resp.SetExt("orderCountInfo", strings.Join(orderInfo, ";"))
	resp.Body = body
	b.stats.recordGet(p.topic, p.group, n, len(body))
	return resp
}

// ackTarget parses the header ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME share.
func ackTarget(req *remoting.Command) (pop.Key, int64, pop.ExtraInfo, error) {
	k := pop.Key{Group: req.Ext("consumerGroup"), Topic: req.Ext("topic")}
	if k.Group == "" || k.Topic == "" {
		return k, 0, pop.ExtraInfo{}, errors.New("consumerGroup and topic are required")
	}
	if err := message.ValidateGroup(k.Group); err != nil {
		return k, 0, pop.ExtraInfo{}, fmt.Errorf("consumerGroup: %w", err)
	}
	if err := message.ValidateTopic(k.Topic); err != nil {
		return k, 0, pop.ExtraInfo{}, fmt.Errorf("topic: %w", err)
	}
	qid, err := extInt(req, "queueId", -1)
	if err != nil {
		return k, 0, pop.ExtraInfo{}, err
	}
	ei, err := pop.ParseExtraInfo(req.Ext("extraInfo"))
	if err != nil {
		return k, 0, pop.ExtraInfo{}, err
	}
	if qid < 0 {
		qid = int64(ei.QueueID)
	}
	off, err := extInt(req, "offset", ei.MsgQueueOffset)
	if err != nil {
		return k, 0, pop.ExtraInfo{}, err
	}
	if off < 0 || qid < 0 || qid > 1<<31-1 {
		return k, 0, pop.ExtraInfo{}, errors.New("offset and queueId are required")
	}
	k.QueueID = int32(qid)
	return k, off, ei, nil
}

func (b *Broker) handleAckMessage(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if fwd := b.forwardOrRefuse(conn, req); fwd != nil {
		return fwd
	}
	k, off, ei, err := ackTarget(req)
	if err != nil {
		return req.NewResponse(ackErrorCode(err), "bad ACK_MESSAGE: "+err.Error())
	}
	s := b.pop
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.table.Check(k, off, ei.PopTime) {
	case pop.AlreadyDone:
		return req.NewResponse(remoting.Success, "already acked")
	case pop.Stale:
		return req.NewResponse(remoting.NoMessage, "the checkpoint expired: the message was popped again since")
	case pop.Unknown:
		return req.NewResponse(remoting.NoMessage, "no such checkpoint: the group never popped this offset")
	}
	before, _, _ := s.table.Offsets(k)
	op := &fsm.MetaOp{Op: fsm.OpPopAck, Pop: &fsm.PopOp{Group: k.Group, Topic: k.Topic, QueueID: k.QueueID, Offsets: []int64{off}, PopTime: ei.PopTime}}
	if err := s.commit(op); err != nil {
		return metaErrorResponse(req, "ack", err)
	}
	if after, _, _ := s.table.Offsets(k); after > before {
		b.tables.commitOffset(k.Group, k.Topic, k.QueueID, after)
	}
	return req.NewResponse(remoting.Success, "")
}

func (b *Broker) handleChangeInvisibleTime(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if fwd := b.forwardOrRefuse(conn, req); fwd != nil {
		return fwd
	}
	k, off, ei, err := ackTarget(req)
	if err != nil {
		return req.NewResponse(ackErrorCode(err), "bad CHANGE_MESSAGE_INVISIBLETIME: "+err.Error())
	}
	inv, err := extInt(req, "invisibleTime", -1)
	if err != nil || inv <= 0 || inv > popMaxInvisibleTimeMillis {
		return req.NewResponse(remoting.InvalidParameter, "bad CHANGE_MESSAGE_INVISIBLETIME: invisibleTime must be positive (ms, at most a day)")
	}
	s := b.pop
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.table.Check(k, off, ei.PopTime) {
	case pop.AlreadyDone:
		return req.NewResponse(remoting.NoMessage, "the message was acked already")
	case pop.Stale:
		return req.NewResponse(remoting.NoMessage, "the checkpoint expired: the message was popped again since")
	case pop.Unknown:
		return req.NewResponse(remoting.NoMessage, "no such checkpoint: the group never popped this offset")
	}
	now := time.Now().UnixMilli()
	op := &fsm.MetaOp{Op: fsm.OpPopChange, Now: now, Pop: &fsm.PopOp{Group: k.Group, Topic: k.Topic, QueueID: k.QueueID, Offsets: []int64{off}, PopTime: ei.PopTime, InvisibleTime: inv}}
	if err := s.commit(op); err != nil {
		return metaErrorResponse(req, "change invisible time", err)
	}
	resp := req.NewResponse(remoting.Success, "")
	resp.SetExt("popTime", strconv.FormatInt(now, 10))
	resp.SetExt("invisibleTime", strconv.FormatInt(inv, 10))
	resp.SetExt("reviveQid", "0")
	return resp
}

// ackErrorCode is the answer to a bad ACK_MESSAGE or CHANGE_MESSAGE_INVISIBLETIME header:
// INVALID_PARAMETER for an invalid group or topic name (as on every path, names.go), else
// MESSAGE_ILLEGAL.
func ackErrorCode(err error) int32 {
	if errors.Is(err, message.ErrInvalidName) {
		return remoting.InvalidParameter
	}
	return remoting.MessageIllegal
}
