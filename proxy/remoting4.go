package proxy

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/acl"
	"rocketraft/remoting"
)

// The remoting listener: RocketMQ 4.x clients (remoting protocol) use the proxy as their name
// server and as every broker group's address. Route answers name the proxy (the address the
// client reached it at) as each group's master (remoting4_routes.go), so a client never learns a
// broker's own address and never notices a failover: the proxy sends each request on to the
// group's current master, found by the same leader book and callMaster as the gRPC side
// (leaders.go, failover.go). The group a request is for is named in its header (bname, or n for
// SEND_MESSAGE_V2) by the 4.x clients for every per-queue code; the rest are handled by code
// (remoting4_forward.go). Requests are passed on unchanged, headers and body, so a client's ACL
// signature is checked by the broker exactly as if the client had sent it there. Requests the
// brokers send to clients arrive on the proxy's connections to them and are passed to the
// connection of the client they are for (remoting4_clients.go).

// front4 serves the remoting listener.
type front4 struct {
	cfg *Config
	log hclog.Logger
	srv *remoting.Server
	// m is a messaging of its own: its remoting client, leader book and route cache serve the
	// 4.x clients only, so that requests the brokers send back on these connections (check-backs,
	// consumer notices) are known to be for 4.x clients.
	m       *messaging
	own     *remoting.Client // the proxy's own name server requests
	clients *clients4
	cluster *clusterCache
	stop    chan struct{}
}

// startFront4 listens on cfg.RemotingListenPort and serves 4.x clients; nil when it is -1.
func startFront4(cfg *Config, log hclog.Logger) (*front4, error) {
	if cfg.RemotingListenPort < 0 {
		return nil, nil
	}
	serverTLS, clientTLS, err := cfg.remotingTLS()
	if err != nil {
		return nil, err
	}
	f := &front4{cfg: cfg, log: log, stop: make(chan struct{})}
	f.clients = newClients4()
	m := &messaging{cfg: cfg, log: log, clients: newClientRegistry(), stopping: f.stop}
	var leaders *leaderBook
	rc := remoting.ClientConfig{Logger: log.Named("remoting"), Handlers: f.brokerCallbacks(),
		OnConnClose: func(addr string) { f.clients.connLost(); leaders.lost(addr) }, TLS: clientTLS,
		BinaryHeaders: true} // to the brokers; each client is answered in its own encoding
	own := remoting.ClientConfig{Logger: log.Named("namesrv"), TLS: clientTLS, BinaryHeaders: true}
	m.cl = remoting.NewClient(rc)
	// The proxy's own questions to the name servers (routes, the cluster table) are signed with
	// its account when it has one; what clients send is passed on with their own signature, on
	// m.cl, which signs nothing.
	if cfg.AccessKey != "" {
		own.BeforeRequest = func(req *remoting.Command) { acl.Sign(req.Fields(), req.Body, cfg.AccessKey, cfg.SecretKey) }
	}
	f.own = remoting.NewClient(own)
	leaders = newLeaderBook(cfg, f.own, log.Named("leaders"))
	m.leaders = leaders
	m.routes = newRouteCache(cfg, f.own, leaders)
	f.m = m
	f.cluster = &clusterCache{cfg: cfg, cl: f.own, leaders: leaders}
	f.srv = remoting.NewServer(remoting.ServerConfig{
		Addr:           net.JoinHostPort(cfg.ListenHost, strconv.Itoa(cfg.RemotingListenPort)),
		Logger:         log.Named("remoting-server"),
		TLS:            serverTLS,
		MaxConnections: cfg.MaxConnections,
	})
	f.register()
	f.srv.OnDisconnect(f.clientGone)
	if err := f.srv.Start(); err != nil {
		_ = m.cl.Close()
		_ = f.own.Close()
		return nil, fmt.Errorf("remotingListenPort %d: %w", cfg.RemotingListenPort, err)
	}
	go f.heartbeatFollower()
	log.Info("proxy serving RocketMQ 4.x remoting clients", "addr", f.srv.Addr(), "tls.server.mode", cfg.TLSServerMode)
	return f, nil
}

// Addr is the remoting listener's address.
func (f *front4) Addr() string { return f.srv.Addr() }

// close stops the listener and drops the connections to the brokers.
func (f *front4) close() {
	close(f.stop)
	_ = f.srv.Close()
	_ = f.m.cl.Close()
	_ = f.own.Close()
}

// register installs a handler for every code the listener serves; others are answered
// REQUEST_CODE_NOT_SUPPORTED by the server.
func (f *front4) register() {
	s := f.srv
	// Name server codes.
	s.Handle(remoting.GetRouteInfoByTopic, f.handleRoute)
	s.Handle(remoting.GetBrokerClusterInfo, f.handleClusterInfo)
	for _, c := range []int32{remoting.GetAllTopicListFromNameserver, remoting.GetTopicsByCluster,
		remoting.GetSystemTopicListFromNS, remoting.GetKVConfig, remoting.GetKVListByNamespace} {
		s.Handle(c, f.handleNamesrv)
	}
	// Per-group codes: the header names the group.
	for _, c := range []int32{remoting.SendMessage, remoting.SendMessageV2, remoting.SendBatchMessage,
		remoting.ConsumerSendMsgBack, remoting.GetMaxOffset, remoting.GetMinOffset,
		remoting.SearchOffsetByTimestamp, remoting.GetEarliestMsgStoreTime} {
		s.Handle(c, f.handleToGroup)
	}
	// A client's offset update, the query it may send right after and its pulls (which carry a
	// commit offset too) are written to the broker in the order the client sent them
	// (remoting.Server.HandleInOrder): a pull overtaking an older update in the proxy would let
	// that update move the committed offset back. None of them waits in the lane for the
	// broker's answer (oneway updates, asynchronous pulls) unless the group has no known master.
	s.HandleInOrder(remoting.UpdateConsumerOffset, f.handleToGroup)
	s.HandleInOrder(remoting.QueryConsumerOffset, f.handleToGroup)
	s.HandleInOrder(remoting.PullMessage, f.handlePull)
	s.HandleInOrder(remoting.LitePullMessage, f.handlePull)
	s.Handle(remoting.EndTransaction, f.handleEndTransaction)
	s.Handle(remoting.LockBatchMQ, f.handleLock)
	s.Handle(remoting.UnlockBatchMQ, f.handleLock)
	// Client membership: every group's master hears it.
	s.Handle(remoting.HeartBeat, f.handleHeartbeat)
	s.Handle(remoting.UnregisterClient, f.handleUnregister)
	s.Handle(remoting.GetConsumerListByGroup, f.handleAnyGroup)
	s.Handle(remoting.CheckClientConfig, f.handleAnyGroup)
	// Queries spanning every group.
	s.Handle(remoting.QueryMessage, f.handleQueryMessage)
	s.Handle(remoting.ViewMessageByID, f.handleViewMessage)
}

// clone copies req for sending on: the same code, header and body (the client's signature
// covers them), with the client's language and version (the broker records them). The copy is
// never oneway: the proxy learns every outcome, even of a client's oneway send.
func clone(req *remoting.Command) *remoting.Command {
	ext := make(map[string]string, len(req.ExtFields))
	for k, v := range req.ExtFields {
		ext[k] = v
	}
	return &remoting.Command{Code: req.Code, Language: req.Language, Version: req.Version,
		Remark: req.Remark, ExtFields: ext, Body: req.Body,
		SerializeType: req.SerializeType}
}

// answerOf turns a broker's answer into the client's: code, remark, header and body as the
// broker gave them, except that a pull's hint to read from a follower is dropped (the client
// knows the proxy alone, as brokerId 0).
func answerOf(req, resp *remoting.Command) *remoting.Command {
	out := req.NewResponse(resp.Code, resp.Remark)
	out.ExtFields = resp.ExtFields
	if _, ok := out.ExtFields["suggestWhichBrokerId"]; ok {
		out.ExtFields["suggestWhichBrokerId"] = "0"
	}
	out.Body = resp.Body
	return out
}

// timeoutOf is how long a forwarded request may take at the broker.
func (f *front4) timeoutOf() time.Duration { return f.cfg.SendTimeout }

// ctx bounds the proxy's work on one request: a remoting request carries no deadline, so the
// proxy answers (in-band) clientMargin before sendTimeout, the 4.x clients' default of 3 s.
func (f *front4) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), f.cfg.SendTimeout-clientMargin)
}
