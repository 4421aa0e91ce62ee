package proxy

import (
	"cmp"
	"context"
	"slices"
	"strconv"

	"rocketraft/broker/pop"
	"rocketraft/protocol"
	"rocketraft/proxy/rmqpb"
	"rocketraft/remoting"
)

// ackEntries acks the entries of one AckMessage and returns each one's status, in order. The
// entries of one broker group go as one BATCH_ACK_MESSAGE (200151) when there are several; if
// that group's master acks them all, each is OK. Otherwise (a stale or unknown handle among
// them, or the batch failed) each entry of the group is acked on its own, which gives its own
// status: one the batch acked answers "already acked", which is OK.
func (m *messaging) ackEntries(ctx context.Context, group, topic string, entries []*rmqpb.AckMessageEntry) []*rmqpb.Status {
	out := make([]*rmqpb.Status, len(entries))
	byBroker := map[string][]int{}
	infos := make([]pop.ExtraInfo, len(entries))
	for i, e := range entries {
		ei, err := pop.ParseExtraInfo(e.GetReceiptHandle())
		if err != nil {
			out[i] = fail(rmqpb.Code_INVALID_RECEIPT_HANDLE, "receipt handle: %v", err)
			continue
		}
		infos[i] = ei
		byBroker[ei.BrokerName] = append(byBroker[ei.BrokerName], i)
	}
	for brokerName, idx := range byBroker {
		if len(idx) > 1 && m.batchAck(ctx, group, topic, brokerName, idx, infos) {
			for _, i := range idx {
				out[i] = ok()
			}
			continue
		}
		for _, i := range idx {
			out[i] = m.checkpointOp(ctx, remoting.AckMessage, group, topic, entries[i].GetReceiptHandle(), nil)
		}
	}
	return out
}

// batchAck sends the checkpoints idx of infos (one broker group's) as one BATCH_ACK_MESSAGE to
// its master and reports whether every one of them was acked by it.
func (m *messaging) batchAck(ctx context.Context, group, topic, brokerName string, idx []int, infos []pop.ExtraInfo) bool {
	// One BatchAck per (queue, popTime): a checkpoint is named by both.
	type ck struct {
		qid     int32
		popTime int64
	}
	offs := map[ck][]int64{}
	for _, i := range idx {
		ei := infos[i]
		if ei.MsgQueueOffset < 0 {
			return false // an old handle without its offset: acked singly
		}
		k := ck{ei.QueueID, ei.PopTime}
		offs[k] = append(offs[k], ei.MsgQueueOffset)
	}
	keys := make([]ck, 0, len(offs))
	for k := range offs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b ck) int { return cmp.Or(cmp.Compare(a.qid, b.qid), cmp.Compare(a.popTime, b.popTime)) })
	body := protocol.BatchAckBody{BrokerName: brokerName}
	for _, k := range keys {
		o := offs[k]
		body.Acks = append(body.Acks, protocol.NewBatchAck(group, topic, k.qid, k.popTime, slices.Min(o), o))
	}
	data, err := protocol.Encode(body)
	if err != nil {
		return false
	}
	res := m.callMaster(ctx, topic, brokerName, m.cfg.SendTimeout, func() *remoting.Command {
		return remoting.NewRequest(remoting.BatchAckMessage, nil, data)
	})
	if res.err != nil || res.resp.Code != remoting.Success {
		return false // the acks are made one by one
	}
	r := res.resp
	acked, err := strconv.Atoi(r.Ext("ackedNum"))
	return err == nil && acked == len(idx)
}
