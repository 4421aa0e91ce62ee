package broker

// The client connections mqadmin lists: GET_CONSUMER_CONNECTION_LIST, GET_PRODUCER_CONNECTION_LIST.

import (
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// handleConsumerConnections serves GET_CONSUMER_CONNECTION_LIST: a group's online consumers.
func (h *clientHandlers) handleConsumerConnections(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group := req.Ext("consumerGroup")
	info, ok := h.clients.ConsumerGroup(group)
	if !ok || len(info.Connections) == 0 {
		return req.NewResponse(remoting.ConsumerNotOnline, "the consumer group["+group+"] not online")
	}
	return jsonResponse(req, info.ConsumerConnection())
}

// handleProducerConnections serves GET_PRODUCER_CONNECTION_LIST: a group's connected producers.
func (h *clientHandlers) handleProducerConnections(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group := req.Ext("producerGroup")
	conns := h.clients.ProducerConnections(group)
	if len(conns) == 0 {
		return req.NewResponse(remoting.SystemError, "the producer group["+group+"] not exist")
	}
	return jsonResponse(req, protocol.ProducerConnection{ConnectionSet: conns})
}
