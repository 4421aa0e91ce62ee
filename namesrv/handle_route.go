package namesrv

import (
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// Client and admin route queries: GET_ROUTEINFO_BY_TOPIC (105), GET_BROKER_CLUSTER_INFO (106),
// GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206), GET_TOPICS_BY_CLUSTER (224),
// GET_SYSTEM_TOPIC_LIST_FROM_NS (304), and the admin writes DELETE_TOPIC_IN_NAMESRV (216),
// REGISTER_TOPIC_IN_NAMESRV (217), WIPE/ADD_WRITE_PERM_OF_BROKER (205/327).
//
// Version quirks: route JSON is always standard (quoted numeric keys, compact), whatever the
// request version or acceptStandardJsonOnly says; Java ≥ 4.9.4 and the Go client parse it, and the
// Go client needs it compact (§4.1). Java sends the fastjson legacy form to old clients; no client
// needs that form.

// TopicNotExistRemark is the remark of TOPIC_NOT_EXIST for an unknown topic, without Java's FAQ
// link.
const TopicNotExistRemark = "No topic route info in name server for the topic: "

func (s *Server) handleGetRouteInfo(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.GetRouteInfoRequestHeader
	if err := h.FromExt(req.ExtFields); err != nil {
		return headerError(req, err)
	}
	route, ok := s.routes.Route(h.Topic, h.RegisteredOnly)
	if !ok {
		return req.NewResponse(remoting.TopicNotExist, TopicNotExistRemark+h.Topic)
	}
	if s.cfg.OrderMessageEnable {
		if conf, ok := s.kv.Get(protocol.OrderTopicConfigNamespace, h.Topic); ok {
			route.OrderTopicConf = conf
		}
	}
	return withBody(req, route)
}

func (s *Server) handleGetBrokerClusterInfo(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return withBody(req, s.routes.ClusterInfo())
}

func (s *Server) handleGetAllTopicList(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return withBody(req, protocol.TopicList{TopicList: s.routes.Topics()})
}

func (s *Server) handleGetTopicsByCluster(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.GetTopicsByClusterRequestHeader
	if err := h.FromExt(req.ExtFields); err != nil {
		return headerError(req, err)
	}
	return withBody(req, protocol.TopicList{TopicList: s.routes.TopicsByCluster(h.Cluster)})
}

func (s *Server) handleGetSystemTopicList(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return withBody(req, s.routes.SystemTopics())
}

func (s *Server) handleDeleteTopic(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.DeleteTopicFromNamesrvRequestHeader
	if err := h.FromExt(req.ExtFields); err != nil {
		return headerError(req, err)
	}
	s.routes.DeleteTopic(h.Topic, h.ClusterName)
	s.log.Info("topic deleted", "topic", h.Topic, "cluster", h.ClusterName)
	return req.NewResponse(remoting.Success, "")
}

// handleRegisterTopic merges the body's queue data; like Java it answers SUCCESS even when the
// body names an unknown broker (the registration is then ignored and logged).
func (s *Server) handleRegisterTopic(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.RegisterTopicRequestHeader
	if err := h.FromExt(req.ExtFields); err != nil {
		return headerError(req, err)
	}
	// The broker-side admin commands' validator (package message): a topic the route table stores
	// from this request has a name a broker would accept.
	if err := message.ValidateTopic(h.Topic); err != nil {
		return req.NewResponse(remoting.InvalidParameter, "invalid topic: "+err.Error())
	}
	if len(req.Body) > 0 {
		var route protocol.TopicRouteData
		if err := protocol.Decode(req.Body, &route); err != nil {
			return req.NewResponse(remoting.SystemError, "decode topic route: "+err.Error())
		}
		if !s.routes.RegisterTopic(h.Topic, route.QueueDatas) {
			s.log.Warn("register topic ignored: empty or unknown broker", "topic", h.Topic)
		}
	}
	return req.NewResponse(remoting.Success, "")
}

func (s *Server) handleWipeWritePerm(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return s.changeWritePerm(req, protocol.WipeTopicCountKey, s.routes.WipeWritePerm)
}

func (s *Server) handleAddWritePerm(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return s.changeWritePerm(req, protocol.AddTopicCountKey, s.routes.AddWritePerm)
}

func (s *Server) changeWritePerm(req *remoting.Command, key string, op func(string) int) *remoting.Command {
	var h protocol.BrokerNameHeader
	if err := h.FromExt(req.ExtFields); err != nil {
		return headerError(req, err)
	}
	n := op(h.BrokerName)
	s.log.Info("write perm changed", "broker", h.BrokerName, "op", key, "topics", n)
	resp := req.NewResponse(remoting.Success, "")
	resp.ExtFields = (&protocol.WritePermResponseHeader{Key: key, Count: int32(n)}).ToExt()
	return resp
}
