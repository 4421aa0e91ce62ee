package namesrv

// Access control on the name server (Config.ACL). What changes the routes clients are given
// needs a request signed by an admin account: REGISTER_BROKER and UNREGISTER_BROKER (so nobody
// can register a rogue broker for a topic or drop a real one), BROKER_HEARTBEAT, topic
// registration and deletion, write-permission changes and KV writes. Reads are not checked:
// a client asks for routes first and the route data is not secret. A refusal is
// NO_PERMISSION (16) with the reason as remark.

import (
	"errors"
	"time"

	"rocketraft/acl"
	"rocketraft/remoting"
)

// aclReloadInterval is how often the accounts file is checked for changes.
const aclReloadInterval = 2 * time.Second

// adminCodes are the requests that need an admin account when ACL is on.
var adminCodes = map[int32]bool{
	remoting.RegisterBroker:         true,
	remoting.UnregisterBroker:       true,
	remoting.BrokerHeartbeat:        true,
	remoting.RegisterTopicInNamesrv: true,
	remoting.DeleteTopicInNamesrv:   true,
	remoting.WipeWritePermOfBroker:  true,
	remoting.AddWritePermOfBroker:   true,
	remoting.PutKVConfig:            true,
	remoting.DeleteKVConfig:         true,
}

// checkACL is the remoting interceptor: nil lets the request through.
func (s *Server) checkACL(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if !adminCodes[req.Code] {
		return nil
	}
	_, err := s.cfg.ACL.Current().Check(acl.Request{
		Code: req.Code, RemoteAddr: conn.RemoteAddr(), Ext: req.ExtFields, Body: req.Body, NeedAdmin: true,
	})
	if err == nil {
		return nil
	}
	if !errors.Is(err, acl.ErrDenied) {
		s.log.Error("ACL check failed", "code", req.Code, "error", err)
	}
	s.log.Warn("request refused by ACL", "code", req.Code, "remote", conn.RemoteAddr(), "reason", err)
	return req.NewResponse(remoting.NoPermission, err.Error())
}
