package broker

// BATCH_ACK_MESSAGE (200151): many POP checkpoints acked in one request (body:
// protocol.BatchAckBody).
//
// Each queue's acks are one replicated OpPopAck (popstate.go applies every offset it lists);
// offsets whose checkpoint is stale or unknown are skipped, as the single ACK refuses them. The
// answer is SUCCESS once every queue's op is applied, with "ackedNum" (the offsets acked now)
// and "skippedNum" in the header.

import (
	"strconv"

	"rocketraft/broker/pop"
	"rocketraft/fsm"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// maxBatchAckOffsets bounds the offsets one BatchAck may name (a bit set of 8 KiB).
const maxBatchAckOffsets = 64 << 10

// handleBatchAck serves BATCH_ACK_MESSAGE: a follower forwards it, the leader (or a classic
// broker) acks each queue's offsets as one replicated change, under mu like a single ACK.
func (s *popService) handleBatchAck(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if fwd := s.forwardOrRefuse(conn, req); fwd != nil {
		return fwd
	}
	var body protocol.BatchAckBody
	if err := protocol.Decode(req.Body, &body); err != nil {
		return req.NewResponse(remoting.MessageIllegal, "bad BATCH_ACK_MESSAGE body: "+err.Error())
	}
	for i := range body.Acks {
		a := &body.Acks[i]
		a.Normalize()
		switch {
		case a.ConsumerGroup == "" || a.Topic == "":
			return req.NewResponse(remoting.MessageIllegal, "bad BATCH_ACK_MESSAGE: ack "+strconv.Itoa(i)+" lacks its consumer group or topic")
		case a.QueueID < 0 || a.StartOffset < 0:
			return req.NewResponse(remoting.MessageIllegal, "bad BATCH_ACK_MESSAGE: ack "+strconv.Itoa(i)+" has a negative queue id or start offset")
		case len(a.BitSet) > maxBatchAckOffsets/8:
			return req.NewResponse(remoting.MessageIllegal, "bad BATCH_ACK_MESSAGE: ack "+strconv.Itoa(i)+" names too many offsets")
		}
		n := strconv.Itoa(i)
		if bad := s.refuseBadNames(req, groupName("consumerGroup of ack "+n, a.ConsumerGroup), topicName("topic of ack "+n, a.Topic)); bad != nil {
			return bad
		}
	}
	acked, skipped := 0, 0
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range body.Acks {
		k := pop.Key{Group: a.ConsumerGroup, Topic: a.Topic, QueueID: a.QueueID}
		var offs []int64
		for _, off := range a.Offsets() {
			if s.table.Check(k, off, a.PopTime) == pop.Acked {
				offs = append(offs, off)
			} else {
				skipped++
			}
		}
		if len(offs) == 0 {
			continue
		}
		before, _, _ := s.table.Offsets(k)
		op := &fsm.MetaOp{Op: fsm.OpPopAck, Pop: &fsm.PopOp{Group: k.Group, Topic: k.Topic, QueueID: k.QueueID, Offsets: offs, PopTime: a.PopTime}}
		if err := s.commit(op); err != nil {
			return metaErrorResponse(req, "batch ack", err)
		}
		acked += len(offs)
		if after, _, _ := s.table.Offsets(k); after > before {
			s.commitOffset(k.Group, k.Topic, k.QueueID, after)
		}
	}
	resp := req.NewResponse(remoting.Success, "")
	resp.SetExt("ackedNum", strconv.Itoa(acked))
	resp.SetExt("skippedNum", strconv.Itoa(skipped))
	return resp
}
