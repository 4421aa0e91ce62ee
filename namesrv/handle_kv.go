package namesrv

import (
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// KV config requests: PUT_KV_CONFIG (100), GET_KV_CONFIG (101), DELETE_KV_CONFIG (102),
// GET_KVLIST_BY_NAMESPACE (219). Changes are persisted before the answer; a persistence failure
// answers SYSTEM_ERROR (the in-memory value is kept, as Java does).

func (s *Server) handlePutKVConfig(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.PutKVConfigRequestHeader
	if err := h.FromExt(req.ExtFields); err != nil {
		return headerError(req, err)
	}
	if err := s.kv.Put(h.Namespace, h.Key, h.Value); err != nil {
		s.log.Error("kv config put", "error", err)
		return req.NewResponse(remoting.SystemError, err.Error())
	}
	return req.NewResponse(remoting.Success, "")
}

func (s *Server) handleGetKVConfig(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.GetKVConfigRequestHeader
	if err := h.FromExt(req.ExtFields); err != nil {
		return headerError(req, err)
	}
	v, ok := s.kv.Get(h.Namespace, h.Key)
	if !ok {
		return req.NewResponse(remoting.QueryNotFound, "No config item, Namespace: "+h.Namespace+" Key: "+h.Key)
	}
	resp := req.NewResponse(remoting.Success, "")
	resp.ExtFields = (&protocol.GetKVConfigResponseHeader{Value: v}).ToExt()
	return resp
}

func (s *Server) handleDeleteKVConfig(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.DeleteKVConfigRequestHeader
	if err := h.FromExt(req.ExtFields); err != nil {
		return headerError(req, err)
	}
	if err := s.kv.Delete(h.Namespace, h.Key); err != nil {
		s.log.Error("kv config delete", "error", err)
		return req.NewResponse(remoting.SystemError, err.Error())
	}
	return req.NewResponse(remoting.Success, "")
}

func (s *Server) handleGetKVList(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.GetKVListByNamespaceRequestHeader
	if err := h.FromExt(req.ExtFields); err != nil {
		return headerError(req, err)
	}
	kv, ok := s.kv.List(h.Namespace)
	if !ok {
		return req.NewResponse(remoting.QueryNotFound, "No config item, Namespace: "+h.Namespace)
	}
	return withBody(req, protocol.KVTable{Table: kv})
}
