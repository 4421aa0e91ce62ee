package broker

import (
	"fmt"
	"strings"
	"time"

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

// handleHeartbeat records the client's groups and subscriptions, creating
// subscription groups and their %RETRY% topics as RocketMQ does. Every name is checked first
// (names.go): one invalid name refuses the whole heartbeat.
func (b *Broker) handleHeartbeat(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var hb protocol.HeartbeatData
	if err := protocol.Decode(req.Body, &hb); err != nil {
		return req.NewResponse(remoting.SystemError, "bad heartbeat body: "+err.Error())
	}
	if err := hb.ValidateNames(); err != nil {
		return b.refuseBadName(req, "heartbeat", err)
	}
	created, skipped := 0, 0
	for _, cd := range hb.ConsumerDataSet {
		if !b.place.decides() {
			// A DLedger follower writes no metadata: the consumer heartbeats the leader too
			// (clients heartbeat every broker of their route), which creates the group and its
			// retry topic through Raft; forwarding each heartbeat would only repeat that.
			continue
		}
		if b.groups.Get(cd.GroupName) == nil {
			if created >= maxGroupsCreatedPerHeartbeat {
				skipped++
				continue
			}
			created++
		}
		gc, err := b.tables.groupOrCreate(cd.GroupName)
		if err != nil {
			if b.place.forwardsWrites() {
				// Leadership may have moved under the proposal: the client must still be
				// recorded here; its next heartbeat to the leader creates the group.
				b.logger.Warn("subscription group not created", "group", cd.GroupName, "error", err)
				continue
			}
			return req.NewResponse(remoting.SystemError, "subscription group "+cd.GroupName+": "+err.Error())
		}
		if gc == nil {
			continue
		}
		if cd.MessageModel != protocol.Broadcasting && gc.RetryQueueNums > 0 {
			retry := message.RetryTopicPrefix + cd.GroupName
			_, created, err := b.tables.ensureTopic(&protocol.TopicConfig{TopicName: retry, ReadQueueNums: gc.RetryQueueNums,
				WriteQueueNums: gc.RetryQueueNums, Perm: protocol.PermRead | protocol.PermWrite, TopicFilterType: protocol.FilterSingleTag})
			if err != nil && b.place.forwardsWrites() { // as above: the leader creates it
				b.logger.Warn("retry topic not created", "topic", retry, "error", err)
				continue
			}
			if err != nil {
				return req.NewResponse(remoting.SystemError, "create retry topic "+retry+": "+err.Error())
			}
			if created {
				b.triggerRegister()
			}
		}
	}
	if skipped > 0 {
		b.logger.Warn("heartbeat names more new consumer groups than one heartbeat may create; the rest were not created now",
			"client", hb.ClientID, "remote", conn.RemoteAddr(), "created", created, "not_created", skipped, "limit", maxGroupsCreatedPerHeartbeat)
	}
	b.clients.Heartbeat(conn, &hb, req.Language, req.Version, time.Now())
	return req.NewResponse(remoting.Success, "")
}

func (b *Broker) handleUnregisterClient(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	b.clients.Unregister(conn, req.Ext("clientID"), req.Ext("producerGroup"), req.Ext("consumerGroup"))
	return req.NewResponse(remoting.Success, "")
}

func (b *Broker) handleGetConsumerList(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group := req.Ext("consumerGroup")
	ids := b.clients.ConsumerIDs(group)
	if len(ids) == 0 {
		return req.NewResponse(remoting.SystemError, "no consumer for this group, "+group)
	}
	resp := req.NewResponse(remoting.Success, "")
	resp.Body = protocol.MustEncode(protocol.ConsumerListBody{ConsumerIDList: ids})
	return resp
}

// ownQueues keeps the queues that belong to this broker name; a client may
// list another broker's queues when it batches lock requests.
func (b *Broker) ownQueues(mqs []protocol.MessageQueue) []protocol.MessageQueue {
	out := mqs[:0:0]
	for _, mq := range mqs {
		if mq.BrokerName == "" || strings.EqualFold(mq.BrokerName, b.cfg.BrokerName) {
			out = append(out, mq)
		}
	}
	return out
}

// handleCheckClientConfig serves CHECK_CLIENT_CONFIG: whether this broker can filter by the
// consumer's subscription (tags always; SQL92 with enablePropertyFilter, and only if it parses).
func (b *Broker) handleCheckClientConfig(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var body protocol.CheckClientConfigBody
	if err := protocol.Decode(req.Body, &body); err != nil {
		return req.NewResponse(remoting.SystemError, "bad body: "+err.Error())
	}
	switch t := body.SubscriptionData.ExpressionType; {
	case t == protocol.ExpressionSQL92 && b.cfg.EnablePropertyFilter:
		if _, err := sqlfilter.Parse(body.SubscriptionData.SubString); err != nil {
			return req.NewResponse(remoting.SubscriptionParseFailed, "parse the SQL92 subscription failed: "+err.Error())
		}
	case t != "" && t != protocol.ExpressionTag:
		return req.NewResponse(remoting.SystemError, fmt.Sprintf("the broker does not support consumer to filter message by %s", t))
	}
	return req.NewResponse(remoting.Success, "")
}
