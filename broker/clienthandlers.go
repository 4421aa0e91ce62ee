package broker

// The client codes: HEARTBEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP,
// CHECK_CLIENT_CONFIG (the connection lists mqadmin reads: handle_connections.go).

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/clients"
	"rocketraft/broker/meta"
	"rocketraft/config"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/sqlfilter"
)

// maxGroupsCreatedPerHeartbeat bounds how many subscription groups (each with its %RETRY%
// topic) one heartbeat may create: a real client has a handful of consumer groups, and one
// heartbeat naming thousands would otherwise hold this handler for as long as thousands of
// metadata writes take. Groups beyond it are not created now (logged); the client is still
// recorded, and its later heartbeats, pulls or POPs create them.
const maxGroupsCreatedPerHeartbeat = 64

// clientHandlers answers the codes clients send about themselves. It records them in the
// clients manager and, on a heartbeat, creates their groups and %RETRY% topics through
// groupOrCreate/ensureTopic (metachange.go); the place says whether this node may create them.
type clientHandlers struct {
	cfg     *config.Broker
	groups  *meta.Groups
	clients *clients.Manager
	place   place
	logger  hclog.Logger
	// groupOrCreate and ensureTopic create a consumer's group and its retry topic when missing.
	groupOrCreate func(name string) (*protocol.SubscriptionGroupConfig, error)
	ensureTopic   func(tc *protocol.TopicConfig) (*protocol.TopicConfig, bool, error)
	// triggerRegister tells the name servers about a created retry topic.
	triggerRegister func()
	// refuseBadName logs and answers one invalid name (names.go).
	refuseBadName func(req *remoting.Command, field string, err error) *remoting.Command
}

// handleHeartbeat records the client's groups and subscriptions, creating
// subscription groups and their %RETRY% topics as RocketMQ does. Every name is checked first
// (names.go): one invalid name refuses the whole heartbeat.
func (h *clientHandlers) handleHeartbeat(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var hb protocol.HeartbeatData
	if err := protocol.Decode(req.Body, &hb); err != nil {
		return req.NewResponse(remoting.SystemError, "bad heartbeat body: "+err.Error())
	}
	if err := hb.ValidateNames(); err != nil {
		return h.refuseBadName(req, "heartbeat", err)
	}
	created, skipped := 0, 0
	for _, cd := range hb.ConsumerDataSet {
		if !h.place.decides() {
			// A DLedger follower writes no metadata: the consumer heartbeats the leader too
			// (clients heartbeat every broker of their route), which creates the group and its
			// retry topic through Raft; forwarding each heartbeat would only repeat that.
			continue
		}
		if h.groups.Get(cd.GroupName) == nil {
			if created >= maxGroupsCreatedPerHeartbeat {
				skipped++
				continue
			}
			created++
		}
		gc, err := h.groupOrCreate(cd.GroupName)
		if err != nil {
			if h.place.forwardsWrites() {
				// Leadership may have moved under the proposal: the client must still be
				// recorded here; its next heartbeat to the leader creates the group.
				h.logger.Warn("subscription group not created", "group", cd.GroupName, "error", err)
				continue
			}
			return req.NewResponse(remoting.SystemError, "subscription group "+cd.GroupName+": "+err.Error())
		}
		if gc == nil {
			continue
		}
		if cd.MessageModel != protocol.Broadcasting && gc.RetryQueueNums > 0 {
			retry := message.RetryTopicPrefix + cd.GroupName
			_, created, err := h.ensureTopic(&protocol.TopicConfig{TopicName: retry, ReadQueueNums: gc.RetryQueueNums,
				WriteQueueNums: gc.RetryQueueNums, Perm: protocol.PermRead | protocol.PermWrite, TopicFilterType: protocol.FilterSingleTag})
			if err != nil && h.place.forwardsWrites() { // as above: the leader creates it
				h.logger.Warn("retry topic not created", "topic", retry, "error", err)
				continue
			}
			if err != nil {
				return req.NewResponse(remoting.SystemError, "create retry topic "+retry+": "+err.Error())
			}
			if created {
				h.triggerRegister()
			}
		}
	}
	if skipped > 0 {
		h.logger.Warn("heartbeat names more new consumer groups than one heartbeat may create; the rest were not created now",
			"client", hb.ClientID, "remote", conn.RemoteAddr(), "created", created, "not_created", skipped, "limit", maxGroupsCreatedPerHeartbeat)
	}
	h.clients.Heartbeat(conn, &hb, req.Language, req.Version, time.Now())
	return req.NewResponse(remoting.Success, "")
}

// handleUnregisterClient serves UNREGISTER_CLIENT: the client leaves its groups on this broker.
func (h *clientHandlers) handleUnregisterClient(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	h.clients.Unregister(conn, req.Ext("clientID"), req.Ext("producerGroup"), req.Ext("consumerGroup"))
	return req.NewResponse(remoting.Success, "")
}

// handleGetConsumerList serves GET_CONSUMER_LIST_BY_GROUP: the client ids a consumer rebalances
// its queues among.
func (h *clientHandlers) handleGetConsumerList(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group := req.Ext("consumerGroup")
	ids := h.clients.ConsumerIDs(group)
	if len(ids) == 0 {
		return req.NewResponse(remoting.SystemError, "no consumer for this group, "+group)
	}
	resp := req.NewResponse(remoting.Success, "")
	resp.Body = protocol.MustEncode(protocol.ConsumerListBody{ConsumerIDList: ids})
	return resp
}

// ownQueues keeps the queues that belong to brokerName (this broker's); a client may
// list another broker's queues when it batches lock requests.
func ownQueues(brokerName string, mqs []protocol.MessageQueue) []protocol.MessageQueue {
	out := mqs[:0:0]
	for _, mq := range mqs {
		if mq.BrokerName == "" || strings.EqualFold(mq.BrokerName, brokerName) {
			out = append(out, mq)
		}
	}
	return out
}

// handleCheckClientConfig serves CHECK_CLIENT_CONFIG: whether this broker can filter by the
// consumer's subscription (tags always; SQL92 with enablePropertyFilter, and only if it parses).
func (h *clientHandlers) handleCheckClientConfig(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var body protocol.CheckClientConfigBody
	if err := protocol.Decode(req.Body, &body); err != nil {
		return req.NewResponse(remoting.SystemError, "bad body: "+err.Error())
	}
	switch t := body.SubscriptionData.ExpressionType; {
	case t == protocol.ExpressionSQL92 && h.cfg.EnablePropertyFilter:
		if _, err := sqlfilter.Parse(body.SubscriptionData.SubString); err != nil {
			return req.NewResponse(remoting.SubscriptionParseFailed, "parse the SQL92 subscription failed: "+err.Error())
		}
	case t != "" && t != protocol.ExpressionTag:
		return req.NewResponse(remoting.SystemError, fmt.Sprintf("the broker does not support consumer to filter message by %s", t))
	}
	return req.NewResponse(remoting.Success, "")
}
