package broker

// Topic attributes and the single-config reads the 5.x proxy needs.
//
// UPDATE_AND_CREATE_TOPIC's header "attributes" ("+message.type=FIFO,-key") changes the topic's
// Attributes map (protocol.AlterTopicAttributes); an update without it keeps the attributes the
// topic has. The new config goes through the same path as the rest of the topic config (a Raft
// entry in DLedger mode, topics.json in classic mode). GET_TOPIC_CONFIG (351) and
// GET_SUBSCRIPTIONGROUP_CONFIG (352) answer one config as JSON, from any member of a group
// (followers hold the replicated tables), so the proxy learns a topic's message type and a
// group's consumeMessageOrderly.

import (
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// topicAttributes sets tc.Attributes from the topic's current attributes and the request's
// modifications; a bad modification is answered with INVALID_PARAMETER. DLedger mode: the
// caller holds the topic's metaMu lock (handleUpdateTopic), so the current config read here is the one the
// proposal replaces.
func (h *topicHandlers) topicAttributes(req *remoting.Command, tc *protocol.TopicConfig) *remoting.Command {
	old := h.topics.Get(tc.TopicName)
	var current map[string]string
	if old != nil {
		current = old.Attributes
	}
	attrs, err := protocol.AlterTopicAttributes(current, req.Ext("attributes"), old == nil)
	if err != nil {
		return req.NewResponse(remoting.InvalidParameter, "topic "+tc.TopicName+": "+err.Error())
	}
	tc.Attributes = attrs
	return nil
}

// handleGetTopicConfig serves GET_TOPIC_CONFIG: the topic's config as JSON, TOPIC_NOT_EXIST when
// this broker lacks it.
func (h *topicHandlers) handleGetTopicConfig(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic := req.Ext("topic")
	tc := h.topics.Get(topic)
	if tc == nil {
		return req.NewResponse(remoting.TopicNotExist, "No topic in this broker. topic: "+topic)
	}
	return jsonResponse(req, tc)
}

// handleGetSubscriptionGroupConfig serves GET_SUBSCRIPTIONGROUP_CONFIG: the group's config as
// JSON, SUBSCRIPTION_GROUP_NOT_EXIST when this broker lacks it.
func (h *groupHandlers) handleGetSubscriptionGroupConfig(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group := req.Ext("group")
	gc := h.groups.Get(group)
	if gc == nil {
		return req.NewResponse(remoting.SubscriptionGroupNotExist, "No group in this broker: "+group)
	}
	return jsonResponse(req, gc)
}
