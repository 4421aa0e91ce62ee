package proxy

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"rocketraft/acl"
	"rocketraft/proxy/rmqpb"
	"rocketraft/remoting"
)

// aclReloadInterval is how often the accounts file is checked for changes.
const aclReloadInterval = 2 * time.Second

// streamWorkers is how many gRPC calls run on reused goroutines at once.
const streamWorkers = 512

// Server is a running proxy: the gRPC listener and the remoting client to the cluster.
type Server struct {
	cfg         Config
	ln          net.Listener
	grpc        *grpc.Server
	cl          *remoting.Client
	log         hclog.Logger
	done        chan error
	acl         *acl.Store // nil: ACL off
	metrics     *proxyMetrics
	metricsAddr string
	// stopping is cancelled when a shutdown starts: streams end (interceptors.go) and long polls
	// give up (messaging.stopping).
	stopping  context.Context
	stop      context.CancelFunc
	closeOnce sync.Once
	closeErr  error
	// registrar keeps the proxy registered at the brokers as a producer (txnregister.go).
	registrar *producerRegistrar
	// front4 serves RocketMQ 4.x clients on remotingListenPort (remoting4.go); nil when off.
	front4 *front4
	// page is the status page on the metrics port (statuspage.go); nil when that is off.
	page *proxyStatus
}

// New listens on the gRPC port (port 0: a free one, see Addr) and starts serving.
func New(cfg Config, log hclog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	s := &Server{cfg: cfg, log: log, done: make(chan error, 1)}
	s.stopping, s.stop = context.WithCancel(context.Background())
	if err := s.openACL(); err != nil {
		s.stop()
		return nil, err
	}
	tc, err := tlsConfig(cfg.TLSCertPath, cfg.TLSKeyPath)
	if err != nil {
		s.stop()
		return nil, err
	}
	_, clientTLS, err := cfg.remotingTLS()
	if err != nil {
		s.stop()
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.ListenHost, strconv.Itoa(cfg.GrpcServerPort)))
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("grpcServerPort %d: %w", cfg.GrpcServerPort, err)
	}
	s.ln = ln
	s.metrics = newProxyMetrics(cfg.RocketMQClusterName, ln.Addr().String())
	if cfg.MetricsExporterType == MetricsProm {
		host := cfg.MetricsPromExporterHost
		if host == "" {
			host = cfg.ListenHost
		}
		s.page = newProxyStatus(s)
		go s.page.run(s.stopping.Done())
		if s.metricsAddr, err = s.metrics.serveMetrics(host, cfg.MetricsPromExporterPort, cfg.MetricsAuthToken, s.page, s.stopping.Done(), log); err != nil {
			ln.Close()
			s.stop()
			return nil, fmt.Errorf("metricsPromExporterPort %d: %w", cfg.MetricsPromExporterPort, err)
		}
	}
	m := &messaging{cfg: &s.cfg, log: log, clients: newClientRegistry(), stopping: s.stopping.Done()}
	// Brokers call back on the proxy's connections with transaction check-backs (transaction.go).
	var leaders *leaderBook
	rc := remoting.ClientConfig{Logger: log.Named("remoting"),
		Handlers:    map[int32]remoting.Handler{remoting.CheckTransactionState: m.onCheckTransaction},
		OnConnClose: func(addr string) { leaders.lost(addr) }, TLS: clientTLS,
		BinaryHeaders: true} // the brokers and name servers read RocketMQ's binary header
	if cfg.AccessKey != "" {
		rc.BeforeRequest = s.signRequest
	}
	s.cl = remoting.NewClient(rc)
	m.cl = s.cl
	leaders = newLeaderBook(&s.cfg, s.cl, log.Named("leaders"))
	m.leaders = leaders
	m.routes = newRouteCache(&s.cfg, s.cl, leaders)
	if s.page != nil {
		s.page.attach(m)
	}
	m.registrar = newProducerRegistrar(fmt.Sprintf("mqproxy@%s@%d", ln.Addr(), os.Getpid()), s.cl, m.routes, m.clients, log.Named("txn"))
	s.registrar = m.registrar
	go m.registrar.run()
	// Stream workers: calls run on long-lived goroutines whose stacks have grown already, instead
	// of a new goroutine per call growing its stack again (about 8 % of the proxy's CPU per send
	// when measured, scripts/proxybench.sh). A worker waits with its call for the broker's
	// answer, so there are as many as the sends in flight the proxy is sized for; beyond that a
	// call gets its own goroutine.
	s.grpc = grpc.NewServer(grpc.ChainUnaryInterceptor(s.unary), grpc.ChainStreamInterceptor(s.stream),
		grpc.StatsHandler(&connLog{log: log, metrics: s.metrics}), grpc.NumStreamWorkers(streamWorkers))
	rmqpb.RegisterMessagingServiceServer(s.grpc, m)
	if s.front4, err = startFront4(&s.cfg, log.Named("remoting4")); err != nil {
		ln.Close()
		s.stop()
		s.registrar.close()
		_ = s.cl.Close()
		return nil, err
	}
	if s.page != nil {
		s.page.attachRemoting(s.RemotingAddr())
	}
	enforce := cfg.TLSServerMode == remoting.TLSEnforcing
	go func() { s.done <- s.grpc.Serve(&sniffListener{Listener: ln, tls: tc, enforce: enforce, log: log}) }()
	transport := "TLS and plaintext on one port"
	if enforce {
		transport = "TLS only (tls.server.mode=enforcing)"
	}
	log.Info("proxy serving RocketMQ 5 gRPC, "+transport, "addr", ln.Addr().String(), "namesrv", cfg.NamesrvAddr,
		"certificate", map[bool]string{true: "self-signed", false: cfg.TLSCertPath}[cfg.TLSCertPath == ""],
		"acl", cfg.AclEnable, "metrics", map[bool]string{true: "off", false: s.metricsAddr}[s.metricsAddr == ""])
	return s, nil
}

// openACL loads the accounts file when aclEnable is set. The proxy's own account, when the file
// has it, must have the configured secret: a mismatch would only show as refused requests at the
// brokers.
func (s *Server) openACL() error {
	if !s.cfg.AclEnable {
		return nil
	}
	store, err := acl.OpenStore(s.cfg.AclConfigFile, s.log.Named("acl"))
	if err != nil {
		return fmt.Errorf("aclEnable: %w", err)
	}
	if ak := s.cfg.AccessKey; ak != "" {
		if a := store.Current().Accounts[ak]; a != nil && a.SecretKey != s.cfg.SecretKey {
			return fmt.Errorf("secretKey: differs from account %q of %s", ak, s.cfg.AclConfigFile)
		}
	}
	s.acl = store
	go store.Watch(aclReloadInterval, s.stopping.Done())
	s.log.Info("ACL on", "file", s.cfg.AclConfigFile, "accounts", len(store.Current().Accounts))
	return nil
}

// signRequest signs a request to a name server or broker with the proxy's account, as a 4.x
// client does (acl.Sign).
func (s *Server) signRequest(req *remoting.Command) {
	acl.Sign(req.Fields(), req.Body, s.cfg.AccessKey, s.cfg.SecretKey)
}

// Addr is the gRPC listener's address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// RemotingAddr is the listener of RocketMQ 4.x clients ("" with remotingListenPort -1).
func (s *Server) RemotingAddr() string {
	if s.front4 == nil {
		return ""
	}
	return s.front4.Addr()
}

// MetricsAddr is where /metrics is served ("" with metricsExporterType DISABLE).
func (s *Server) MetricsAddr() string { return s.metricsAddr }

// Shutdown stops gracefully within grpcShutdownTimeSeconds (Close).
func (s *Server) Shutdown() error { return s.Close(s.cfg.shutdownGrace()) }

// Close stops accepting connections and calls, ends the streams (Telemetry, long polls) with
// OK, lets unary calls in flight finish for up to grace (the rest are then cut), and closes the
// connections to the brokers. Later calls return the first one's result.
func (s *Server) Close(grace time.Duration) error {
	s.closeOnce.Do(func() {
		stopped := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(stopped) }()
		s.stop()
		select {
		case <-stopped:
		case <-time.After(grace):
			s.log.Warn("calls still running after the shutdown grace; cutting them", "grace", grace)
			s.grpc.Stop()
			<-stopped
		}
		s.registrar.close()
		if s.front4 != nil {
			s.front4.close()
		}
		s.closeErr = s.cl.Close()
	})
	return s.closeErr
}

// isClosed reports whether ch is closed (a nil channel never is).
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
