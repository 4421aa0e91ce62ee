package proxy

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"rocketraft/protocol"
	"rocketraft/proxy/rmqpb"
)

// Message types and FIFO on the proxy's side.
//
// A topic's message.type attribute (configs.go) is what QueryRoute offers as each queue's
// accept_message_types, and a send of another type is refused in-band with
// MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, as Apache's proxy does. A topic without the attribute
// keeps the proxy's earlier behaviour: NORMAL and DELAY, no type check.
//
// A FIFO message (message_group set) carries its group in the __SHARDINGKEY property, as
// Apache's proxy stores it, and always goes to the same queue: a stable hash of the group over
// the topic's writable queues (every queue of a writable broker group, whether or not its master
// is known right now, so a failover never moves a message group to another queue). With the
// queue held by orderly POP while one of its messages is in flight (broker/pop.go), consumers of
// an orderly group see each message group in send order.

// propertyShardingKey is the stored property holding a FIFO message's group.
const propertyShardingKey = "__SHARDINGKEY"

// defaultAcceptTypes is what a topic without a message.type takes.
var defaultAcceptTypes = []rmqpb.MessageType{rmqpb.MessageType_NORMAL, rmqpb.MessageType_FIFO, rmqpb.MessageType_DELAY, rmqpb.MessageType_TRANSACTION}

// acceptTypes maps a topic's message.type to the types its queues accept.
func acceptTypes(topicType string) []rmqpb.MessageType {
	switch topicType {
	case protocol.MessageTypeNormal:
		return []rmqpb.MessageType{rmqpb.MessageType_NORMAL}
	case protocol.MessageTypeFIFO:
		return []rmqpb.MessageType{rmqpb.MessageType_FIFO}
	case protocol.MessageTypeDelay:
		return []rmqpb.MessageType{rmqpb.MessageType_DELAY}
	case protocol.MessageTypeTransaction:
		return []rmqpb.MessageType{rmqpb.MessageType_TRANSACTION}
	case protocol.MessageTypeMixed:
		return []rmqpb.MessageType{rmqpb.MessageType_NORMAL, rmqpb.MessageType_FIFO, rmqpb.MessageType_DELAY, rmqpb.MessageType_TRANSACTION}
	}
	return defaultAcceptTypes
}

// topicAcceptTypes is acceptTypes of topic's config; a config that cannot be read gives the
// default (the send is then not type-checked either).
func (m *messaging) topicAcceptTypes(ctx context.Context, topic string) []rmqpb.MessageType {
	tc, err := m.topicConfig(ctx, topic)
	if err != nil {
		m.log.Debug("topic config unknown; default message types", "topic", topic, "error", err)
	}
	return acceptTypes(tc.TopicMessageType())
}

// messageType is the type a message declares, or, unspecified, the one its fields imply.
func messageType(sp *rmqpb.SystemProperties) rmqpb.MessageType {
	switch t := sp.GetMessageType(); {
	case t != rmqpb.MessageType_MESSAGE_TYPE_UNSPECIFIED:
		return t
	case sp.GetMessageGroup() != "":
		return rmqpb.MessageType_FIFO
	case sp.GetDeliveryTimestamp() != nil:
		return rmqpb.MessageType_DELAY
	}
	return rmqpb.MessageType_NORMAL
}

// checkMessageType refuses (non-nil status) a message whose type the topic does not take or
// whose fields contradict its type.
func (m *messaging) checkMessageType(ctx context.Context, topic string, sp *rmqpb.SystemProperties) *rmqpb.Status {
	t := messageType(sp)
	if t == rmqpb.MessageType_FIFO && sp.GetMessageGroup() == "" {
		return fail(rmqpb.Code_ILLEGAL_MESSAGE_GROUP, "a FIFO message needs a message group")
	}
	if g := sp.GetMessageGroup(); g != "" && t != rmqpb.MessageType_FIFO {
		return fail(rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "message group %q set on a %s message; only FIFO messages have one", g, t)
	}
	if len(sp.GetMessageGroup()) > 64 {
		return fail(rmqpb.Code_ILLEGAL_MESSAGE_GROUP, "message group longer than 64 characters")
	}
	tc, err := m.topicConfig(ctx, topic)
	if err != nil || tc.TopicMessageType() == "" {
		return nil // unknown or untyped topic: no check (the broker still refuses what it cannot store)
	}
	if !slices.Contains(acceptTypes(tc.TopicMessageType()), t) {
		return fail(rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
			"topic %s takes %s messages, not %s (topic attribute message.type)", topic, tc.TopicMessageType(), t)
	}
	return nil
}

// pickQueueFor is pickQueue for a message of group ("" for none): a FIFO message's queue is a
// stable hash of its group over the topic's writable queues.
func (m *messaging) pickQueueFor(ctx context.Context, topic, group string) (brokerName string, qid int32, err error) {
	if group == "" {
		return m.pickQueue(ctx, topic)
	}
	r, err := m.routes.get(ctx, topic)
	if err != nil {
		return "", 0, err
	}
	qds := slices.Clone(r.QueueDatas)
	slices.SortFunc(qds, func(a, b *protocol.QueueData) int { return strings.Compare(a.BrokerName, b.BrokerName) })
	type cand struct {
		name string
		id   int32
	}
	var cands []cand
	for _, qd := range qds {
		if qd.Perm&2 == 0 {
			continue
		}
		for id := int32(0); id < qd.WriteQueueNums; id++ {
			cands = append(cands, cand{qd.BrokerName, id})
		}
	}
	if len(cands) == 0 {
		return "", 0, fmt.Errorf("topic %s: no writable queue", topic)
	}
	h := fnv.New64a()
	h.Write([]byte(group))
	c := cands[h.Sum64()%uint64(len(cands))]
	// Sent to c's group's master as the leader book knows it (callMaster), waiting within the
	// call's budget while a failover leaves it unknown: never to another group's queue.
	return c.name, c.id, nil
}
