package broker

// The broker's request table: every request code it answers, the file that handles it, and how
// the remoting server dispatches it. Handlers are thin adapters (decode the request, call the
// part that owns the behaviour, encode the answer). Codes the broker knows but does not serve
// answer REQUEST_CODE_NOT_SUPPORTED with a reason (unsupported.go); any other code gets the
// remoting layer's REQUEST_CODE_NOT_SUPPORTED.

import (
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// dispatch is how the remoting server runs a code's handler.
type dispatch int

const (
	// concurrent: on a worker, alongside the connection's other requests (Server.Handle).
	concurrent dispatch = iota
	// inOrder: in arrival order among the connection's inOrder requests (Server.HandleInOrder).
	inOrder
	// inlineSend: on the connection's read goroutine when sendsInline says it cannot block
	// (Server.HandleInline, send.go).
	inlineSend
)

// route is one entry of the request table.
type route struct {
	handle remoting.Handler
	how    dispatch
	// flat: the handler, the interceptor and everything they call read the request's fields
	// through Command's methods (Ext, ExtSeq, Fields), so the server decodes them as a flat
	// list instead of a map (remoting.ServerConfig.FlatExtCodes): the sends, read once into a
	// typed header.
	flat bool
}

// handlers is the one table of request codes this broker serves.
func (b *Broker) handlers() map[int32]route {
	c := func(h remoting.Handler) route { return route{handle: h} }
	send := route{handle: b.sender.handleSend, how: inlineSend, flat: true}
	return map[int32]route{
		// Producing (send.go, sendback.go) and transactions (transaction.go).
		remoting.SendMessage:         send,
		remoting.SendMessageV2:       send,
		remoting.SendBatchMessage:    send,
		remoting.ConsumerSendMsgBack: c(b.sender.handleSendBack),
		remoting.EndTransaction:      c(b.sender.handleEndTransaction),

		// Consuming: pull (pull.go), POP (pop.go, batchack.go), orderly locks (locks.go).
		remoting.PullMessage:                c(b.puller.handlePull),
		remoting.LitePullMessage:            c(b.puller.handlePull),
		remoting.PopMessage:                 c(b.pop.handlePopMessage),
		remoting.AckMessage:                 c(b.pop.handleAckMessage),
		remoting.ChangeMessageInvisibleTime: c(b.pop.handleChangeInvisibleTime),
		remoting.BatchAckMessage:            c(b.pop.handleBatchAck),
		remoting.LockBatchMQ:                c(b.locks.handleLockBatch),
		remoting.UnlockBatchMQ:              c(b.locks.handleUnlockBatch),

		// Consumer offsets (offsets.go, resetoffset.go). In order: a client reads back the
		// offset it has just committed (the Go client does when it applies a reset), and a
		// oneway update must not be overtaken by that query.
		remoting.QueryConsumerOffset:       {handle: b.offsetH.handleQueryConsumerOffset, how: inOrder},
		remoting.UpdateConsumerOffset:      {handle: b.offsetH.handleUpdateConsumerOffset, how: inOrder},
		remoting.GetMaxOffset:              c(b.offsetH.queueOffsetHandler(lookupMaxOffset)),
		remoting.GetMinOffset:              c(b.offsetH.queueOffsetHandler(lookupMinOffset)),
		remoting.GetEarliestMsgStoreTime:   c(b.offsetH.queueOffsetHandler(lookupEarliestStoreTime)),
		remoting.SearchOffsetByTimestamp:   c(b.offsetH.queueOffsetHandler(lookupOffsetByTimestamp)),
		remoting.GetAllConsumerOffset:      c(b.groupH.handleGetAllConsumerOffset), // handle_groups.go
		remoting.InvokeBrokerToResetOffset: c(b.offsetH.handleResetOffset),

		// Clients (clienthandlers.go, handle_connections.go).
		remoting.HeartBeat:                 c(b.clientH.handleHeartbeat),
		remoting.UnregisterClient:          c(b.clientH.handleUnregisterClient),
		remoting.GetConsumerListByGroup:    c(b.clientH.handleGetConsumerList),
		remoting.CheckClientConfig:         c(b.clientH.handleCheckClientConfig),
		remoting.GetConsumerConnectionList: c(b.clientH.handleConsumerConnections),
		remoting.GetProducerConnectionList: c(b.clientH.handleProducerConnections),

		// Messages by key or id (query.go).
		remoting.QueryMessage:    c(b.queryH.handleQueryMessage),
		remoting.ViewMessageByID: c(b.queryH.handleViewMessageByID),

		// Topics (handle_topics.go, topicattr.go).
		remoting.UpdateAndCreateTopic: c(b.topicH.handleUpdateTopic),
		remoting.DeleteTopicInBroker:  c(b.topicH.handleDeleteTopic),
		remoting.GetTopicConfig:       c(b.topicH.handleGetTopicConfig),
		remoting.GetAllTopicConfig:    c(b.topicH.handleGetAllTopicConfig),
		remoting.GetTopicStatsInfo:    c(b.topicH.handleTopicStats),

		// Subscription groups and consumption progress (handle_groups.go, topicattr.go).
		remoting.UpdateAndCreateSubscriptionGroup: c(b.groupH.handleUpdateGroup),
		remoting.DeleteSubscriptionGroup:          c(b.groupH.handleDeleteGroup),
		remoting.GetSubscriptionGroupConfig:       c(b.groupH.handleGetSubscriptionGroupConfig),
		remoting.GetAllSubscriptionGroupConfig:    c(b.groupH.handleGetAllGroupConfig),
		remoting.GetConsumeStats:                  c(b.groupH.handleConsumeStats),
		remoting.QueryTopicConsumeByWho:           c(b.groupH.handleConsumedByWho),
		remoting.ViewBrokerStatsData:              c(b.runtimeH.handleViewStatsData), // statsdata.go

		// The broker itself: runtime info (handle_runtime.go), HA (ha.go), delay progress
		// (schedule.go), configuration (brokerconfig.go: allow-listed keys only;
		// getbrokerconfig.go: secrets redacted).
		remoting.GetBrokerRuntimeInfo: c(b.runtimeH.handleRuntimeInfo),
		remoting.GetBrokerHAStatus:    c(b.handleHAStatus),
		remoting.GetAllDelayOffset:    c(b.handleGetAllDelayOffset),
		remoting.UpdateBrokerConfig:   c(b.configH.handleUpdateBrokerConfig),
		remoting.GetBrokerConfig:      c(b.configH.handleGetBrokerConfig),

		// Raft group administration (raftadmin.go); the changes need an admin (raftAdmin.guard).
		remoting.GetRaftStatus:      c(b.raftAdmin.handleGetRaftStatus),
		remoting.TransferRaftLeader: c(b.raftAdmin.guard(b.raftAdmin.handleTransferRaftLeader)),
		remoting.AddRaftPeer:        c(b.raftAdmin.guard(b.raftAdmin.handleAddRaftPeer)),
		remoting.RemoveRaftPeer:     c(b.raftAdmin.guard(b.raftAdmin.handleRemoveRaftPeer)),
	}
}

// registerHandlers registers the table on s, after the known but unsupported codes (a code in
// both is served: its handler replaces the refusal).
func (b *Broker) registerHandlers(s *remoting.Server) {
	registerUnsupported(s)
	for code, r := range b.handlers() {
		switch r.how {
		case inOrder:
			s.HandleInOrder(code, r.handle)
		case inlineSend:
			s.HandleInline(code, r.handle, b.sender.sendsInline)
		default:
			s.Handle(code, r.handle)
		}
	}
}

// flatExtCodes are the codes whose route reads its fields flat.
func (b *Broker) flatExtCodes() []int32 {
	var codes []int32
	for code, r := range b.handlers() {
		if r.flat {
			codes = append(codes, code)
		}
	}
	return codes
}

// jsonResponse answers SUCCESS with v as the JSON body.
func jsonResponse(req *remoting.Command, v any) *remoting.Command {
	body, err := protocol.Encode(v)
	if err != nil {
		return req.NewResponse(remoting.SystemError, "encode body: "+err.Error())
	}
	resp := req.NewResponse(remoting.Success, "")
	resp.Body = body
	return resp
}

// fastjsonResponse answers SUCCESS with v in fastjson's layout (the non-string map keys some
// Java clients need).
func fastjsonResponse(req *remoting.Command, v protocol.FastjsonEncoder) *remoting.Command {
	body, err := v.EncodeFastjson()
	if err != nil {
		return req.NewResponse(remoting.SystemError, "encode body: "+err.Error())
	}
	resp := req.NewResponse(remoting.Success, "")
	resp.Body = body
	return resp
}
