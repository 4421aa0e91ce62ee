package namesrv

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/acl"
	"rocketraft/metrics"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// Config configures a name server. The zero value of every field means its default.
type Config struct {
	// ListenAddr is the remoting listen address; "127.0.0.1:0" picks a free port (see Addr).
	// Default 127.0.0.1:9876.
	ListenAddr string
	// BrokerExpiry removes a broker whose last registration is older than this, unless the
	// broker announced its own timeout (heartbeatTimeoutMillis). Default 120 s.
	BrokerExpiry time.Duration
	// ScanInterval is how often expired brokers are looked for. Default 5 s.
	ScanInterval time.Duration
	// KvConfigPath is the KV config file; "" keeps KV config in memory only.
	KvConfigPath string
	// OrderMessageEnable fills a route's orderTopicConf from KV namespace ORDER_TOPIC_CONFIG.
	OrderMessageEnable bool
	// HTTPAddr, if set, serves Prometheus metrics on /metrics there (metrics.go) and the
	// cluster status page on / and /cluster (statuspage.go); "" = off.
	HTTPAddr string
	// HTTPAuthToken, when set, is required on /metrics and /cluster (internal/opshttp).
	HTTPAuthToken string
	// ACL, when set, turns access control on: see acl.go.
	ACL *acl.Store
	// AllowBrokerTakeover turns off, without ACL, the guard that refuses a registration
	// replacing a live broker from another address and an unregistration of a live broker from
	// another connection (takeover.go). Without ACL and with this false the guard is on.
	AllowBrokerTakeover bool
	// TLS is the remoting port's TLS (tls.server.mode); nil serves plaintext.
	TLS *remoting.ServerTLS
	// ClientTLS (tls.enable) is the TLS of the status page's connections to brokers; nil is
	// plaintext.
	ClientTLS *tls.Config
	// MaxConnections bounds the open remoting connections (maxConnections); 0 means
	// remoting.DefaultMaxConnections.
	MaxConnections int
	// Logger; nil discards logs.
	Logger hclog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// DefaultListenAddr is the name server's default address (RocketMQ's port 9876).
const DefaultListenAddr = "127.0.0.1:9876"

func (c *Config) setDefaults() {
	if c.ListenAddr == "" {
		c.ListenAddr = DefaultListenAddr
	}
	if c.BrokerExpiry <= 0 {
		c.BrokerExpiry = DefaultBrokerExpiry
	}
	if c.ScanInterval <= 0 {
		c.ScanInterval = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Server is one name server: a remoting server, the route table and the KV store.
type Server struct {
	cfg    Config
	log    hclog.Logger
	routes *RouteTable
	kv     *KVStore
	remote *remoting.Server
	rpc    *metrics.RPC // request latency, fed by remote's OnRequest
	http   *http.Server // nil unless HTTPAddr is set
	httpLn net.Listener
	page   *statusPage // the status page's broker client; nil unless HTTPAddr is set

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// New builds a name server and loads its KV config; Start makes it serve.
func New(cfg Config) (*Server, error) {
	cfg.setDefaults()
	kv, err := OpenKVStore(cfg.KvConfigPath)
	if err != nil {
		return nil, err
	}
	rpc := metrics.NewRPC()
	s := &Server{
		cfg:    cfg,
		log:    cfg.Logger,
		routes: NewRouteTable(cfg.Now, cfg.BrokerExpiry),
		kv:     kv,
		rpc:    rpc,
		stop:   make(chan struct{}),
	}
	s.routes.GuardTakeover(cfg.ACL == nil && !cfg.AllowBrokerTakeover) // takeover.go
	rc := remoting.ServerConfig{Addr: cfg.ListenAddr, Logger: cfg.Logger.Named("remoting"), OnRequest: rpc.Observe,
		TLS: cfg.TLS, MaxConnections: cfg.MaxConnections}
	if cfg.ACL != nil {
		rc.Intercept = s.checkACL
	}
	s.remote = remoting.NewServer(rc)
	for code, h := range s.handlers() {
		s.remote.Handle(code, h)
	}
	s.remote.OnDisconnect(s.onDisconnect)
	return s, nil
}

// handlers is the one table of request codes this server answers; everything else gets
// REQUEST_CODE_NOT_SUPPORTED from the remoting layer.
func (s *Server) handlers() map[int32]remoting.Handler {
	return map[int32]remoting.Handler{
		remoting.RegisterBroker:                s.handleRegisterBroker,
		remoting.UnregisterBroker:              s.handleUnregisterBroker,
		remoting.QueryDataVersion:              s.handleQueryDataVersion,
		remoting.BrokerHeartbeat:               s.handleBrokerHeartbeat,
		remoting.GetRouteInfoByTopic:           s.handleGetRouteInfo,
		remoting.GetBrokerClusterInfo:          s.handleGetBrokerClusterInfo,
		remoting.GetAllTopicListFromNameserver: s.handleGetAllTopicList,
		remoting.GetTopicsByCluster:            s.handleGetTopicsByCluster,
		remoting.GetSystemTopicListFromNS:      s.handleGetSystemTopicList,
		remoting.DeleteTopicInNamesrv:          s.handleDeleteTopic,
		remoting.RegisterTopicInNamesrv:        s.handleRegisterTopic,
		remoting.WipeWritePermOfBroker:         s.handleWipeWritePerm,
		remoting.AddWritePermOfBroker:          s.handleAddWritePerm,
		remoting.PutKVConfig:                   s.handlePutKVConfig,
		remoting.GetKVConfig:                   s.handleGetKVConfig,
		remoting.DeleteKVConfig:                s.handleDeleteKVConfig,
		remoting.GetKVListByNamespace:          s.handleGetKVList,
	}
}

// Start binds the listen address and starts the expiry scan.
func (s *Server) Start() error {
	if err := s.remote.Start(); err != nil {
		return err
	}
	if err := s.startHTTP(); err != nil {
		_ = s.remote.Close()
		return err
	}
	s.wg.Add(1)
	go s.scanLoop()
	if s.cfg.ACL != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.cfg.ACL.Watch(aclReloadInterval, s.stop)
		}()
	}
	s.log.Info("name server started", "addr", s.remote.Addr())
	return nil
}

// Addr is the actual listen address (useful after listening on port 0).
func (s *Server) Addr() string { return s.remote.Addr() }

// Routes exposes the route table (tests, diagnostics).
func (s *Server) Routes() *RouteTable { return s.routes }

// KV exposes the KV store (tests, diagnostics).
func (s *Server) KV() *KVStore { return s.kv }

// Close stops the scan and the remoting server. It is safe to call more than once.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.stop)
		s.stopHTTP()
		err = s.remote.Close()
		s.wg.Wait()
	})
	return err
}

func (s *Server) scanLoop() {
	defer s.wg.Done()
	tick := time.NewTicker(s.cfg.ScanInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			for _, b := range s.routes.ScanExpired() {
				s.log.Warn("broker expired", "cluster", b.ClusterName, "broker", b.BrokerName, "id", b.ID, "addr", b.BrokerAddr)
			}
		}
	}
}

func (s *Server) onDisconnect(c *remoting.Conn) {
	for _, b := range s.routes.RemoveConn(c.ID()) {
		s.log.Info("broker connection closed, broker removed", "cluster", b.ClusterName, "broker", b.BrokerName,
			"id", b.ID, "addr", b.BrokerAddr, "remote", c.RemoteAddr())
	}
}

// connID is the id of c, or 0 for handlers invoked without a connection (unit tests).
func connID(c *remoting.Conn) uint64 {
	if c == nil {
		return 0
	}
	return c.ID()
}

// headerError answers a request whose custom header cannot be decoded, as Java does when
// decodeCommandCustomHeader throws: SYSTEM_ERROR with the reason.
func headerError(req *remoting.Command, err error) *remoting.Command {
	return req.NewResponse(remoting.SystemError, err.Error())
}

// withBody answers SUCCESS with v encoded as the body.
func withBody(req *remoting.Command, v any) *remoting.Command {
	body, err := protocol.Encode(v)
	if err != nil {
		return req.NewResponse(remoting.SystemError, fmt.Sprintf("encode response: %v", err))
	}
	resp := req.NewResponse(remoting.Success, "")
	resp.Body = body
	return resp
}
