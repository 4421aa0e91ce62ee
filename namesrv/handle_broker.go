package namesrv

import (
	"errors"
	"time"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// Broker-facing requests: REGISTER_BROKER (103), UNREGISTER_BROKER (104), QUERY_DATA_VERSION
// (322) and BROKER_HEARTBEAT (904). See §2.3 and §10.
//
// Version quirks:
//   - Brokers older than V3_0_11 (request version < 37) send a bare TopicConfigSerializeWrapper
//     instead of a RegisterBrokerBody.
//   - compressed=true bodies use the zlib layout of protocol.DecodeCompressedRegisterBrokerBody.
//   - bodyCrc32 ≠ 0 is verified over the body as received (compressed or not).
//   - The response body is the KV namespace ORDER_TOPIC_CONFIG (Java's default
//     returnOrderTopicConfigToBroker=true), absent when that namespace is empty.

// versionV3011 is MQVersion V3_0_11: from it on brokers send RegisterBrokerBody.
const versionV3011 = 37

// crcMismatchRemark is Java's remark for a REGISTER_BROKER body failing its bodyCrc32.
const crcMismatchRemark = "crc32 not match"

func (s *Server) handleRegisterBroker(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.RegisterBrokerRequestHeader
	if err := h.FromExt(req.ExtFields); err != nil {
		return headerError(req, err)
	}
	if h.BodyCrc32 != 0 && protocol.CRC32(req.Body) != h.BodyCrc32 {
		s.log.Warn("register broker: body crc32 mismatch", "broker", h.BrokerName, "addr", h.BrokerAddr)
		return req.NewResponse(remoting.SystemError, crcMismatchRemark)
	}
	body, err := decodeRegisterBody(req, h.Compressed)
	if err != nil {
		return req.NewResponse(remoting.SystemError, "decode register broker body: "+err.Error())
	}
	reg := Registration{
		ClusterName:        h.ClusterName,
		BrokerName:         h.BrokerName,
		BrokerAddr:         h.BrokerAddr,
		HaServerAddr:       h.HaServerAddr,
		BrokerID:           h.BrokerID,
		EnableActingMaster: h.EnableActingMaster,
		ConnID:             connID(conn),
		ForwardsWrites:     h.ForwardsWrites,
	}
	if h.HeartbeatTimeoutMillis != nil && *h.HeartbeatTimeoutMillis > 0 {
		reg.Timeout = time.Duration(*h.HeartbeatTimeoutMillis) * time.Millisecond
	}
	if body != nil {
		reg.Topics = &body.TopicConfigSerializeWrapper
		reg.FilterServerList = body.FilterServerList
	}
	res, err := s.routes.Register(reg)
	if errors.Is(err, ErrTakeoverRefused) {
		s.log.Warn("register broker refused", "cluster", h.ClusterName, "broker", h.BrokerName, "id", h.BrokerID, "addr", h.BrokerAddr, "remote", conn.RemoteAddr(), "reason", err)
		return req.NewResponse(remoting.NoPermission, err.Error())
	}
	if errors.Is(err, ErrRegisterRefused) {
		return req.NewResponse(remoting.SystemError, ErrRegisterRefused.Error())
	}
	if err != nil {
		return req.NewResponse(remoting.SystemError, err.Error())
	}
	s.log.Debug("broker registered", "cluster", h.ClusterName, "broker", h.BrokerName, "id", h.BrokerID, "addr", h.BrokerAddr)
	resp := req.NewResponse(remoting.Success, "")
	resp.ExtFields = (&protocol.RegisterBrokerResponseHeader{HaServerAddr: res.HaServerAddr, MasterAddr: res.MasterAddr}).ToExt()
	if kv, ok := s.kv.List(protocol.OrderTopicConfigNamespace); ok {
		resp.Body = protocol.MustEncode(protocol.KVTable{Table: kv})
	}
	return resp
}

// decodeRegisterBody returns nil for an empty body.
func decodeRegisterBody(req *remoting.Command, compressed bool) (*protocol.RegisterBrokerBody, error) {
	if len(req.Body) == 0 {
		return nil, nil
	}
	if compressed {
		return protocol.DecodeCompressedRegisterBrokerBody(req.Body)
	}
	var body protocol.RegisterBrokerBody
	if req.Version < versionV3011 {
		if err := protocol.Decode(req.Body, &body.TopicConfigSerializeWrapper); err != nil {
			return nil, err
		}
		return &body, nil
	}
	if err := protocol.Decode(req.Body, &body); err != nil {
		return nil, err
	}
	return &body, nil
}

func (s *Server) handleUnregisterBroker(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.UnregisterBrokerRequestHeader
	if err := h.FromExt(req.ExtFields); err != nil {
		return headerError(req, err)
	}
	if err := s.routes.UnregisterFrom(BrokerID{ClusterName: h.ClusterName, BrokerName: h.BrokerName, BrokerAddr: h.BrokerAddr, ID: h.BrokerID}, connID(conn)); err != nil {
		s.log.Warn("unregister broker refused", "cluster", h.ClusterName, "broker", h.BrokerName, "id", h.BrokerID, "addr", h.BrokerAddr, "remote", conn.RemoteAddr(), "reason", err)
		return req.NewResponse(remoting.NoPermission, err.Error())
	}
	s.log.Info("broker unregistered", "cluster", h.ClusterName, "broker", h.BrokerName, "id", h.BrokerID, "addr", h.BrokerAddr)
	return req.NewResponse(remoting.Success, "")
}

// handleQueryDataVersion answers whether the broker's topic table differs from what it last
// registered; an unchanged broker counts as alive.
func (s *Server) handleQueryDataVersion(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.QueryDataVersionRequestHeader
	if err := h.FromExt(req.ExtFields); err != nil {
		return headerError(req, err)
	}
	var theirs protocol.DataVersion
	if len(req.Body) > 0 {
		if err := protocol.Decode(req.Body, &theirs); err != nil {
			return req.NewResponse(remoting.SystemError, "decode data version: "+err.Error())
		}
	}
	ours, known := s.routes.DataVersionOf(h.ClusterName, h.BrokerAddr)
	changed := !known || ours != theirs
	if !changed {
		s.routes.Touch(h.ClusterName, h.BrokerAddr)
	}
	resp := req.NewResponse(remoting.Success, "")
	resp.ExtFields = (&protocol.QueryDataVersionResponseHeader{Changed: changed}).ToExt()
	if known {
		resp.Body = protocol.MustEncode(ours)
	}
	return resp
}

func (s *Server) handleBrokerHeartbeat(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.BrokerHeartbeatRequestHeader
	if err := h.FromExt(req.ExtFields); err != nil {
		return headerError(req, err)
	}
	s.routes.Touch(h.ClusterName, h.BrokerAddr)
	return req.NewResponse(remoting.Success, "")
}
