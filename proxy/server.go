package proxy

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"rocketraft/proxy/rmqpb"
	"rocketraft/remoting"
)

// streamWorkers is how many gRPC calls run on reused goroutines at once.
const streamWorkers = 512

// Server is a running proxy: the gRPC listener and the remoting client to the cluster.
type Server struct {
	cfg  Config
	ln   net.Listener
	grpc *grpc.Server
	cl   *remoting.Client
	log  hclog.Logger
	done chan error
}

// New listens on the gRPC port (port 0: a free one, see Addr) and starts serving.
func New(cfg Config, log hclog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.ListenHost, strconv.Itoa(cfg.GrpcServerPort)))
	if err != nil {
		return nil, fmt.Errorf("grpcServerPort %d: %w", cfg.GrpcServerPort, err)
	}
	tc, err := tlsConfig(cfg.TLSCertPath, cfg.TLSKeyPath)
	if err != nil {
		ln.Close()
		return nil, err
	}
	s := &Server{cfg: cfg, ln: ln, log: log, done: make(chan error, 1)}
	var leaders *leaderBook
	s.cl = remoting.NewClient(remoting.ClientConfig{Logger: log.Named("remoting"),
		OnConnClose: func(addr string) { leaders.lost(addr) }})
	leaders = newLeaderBook(&s.cfg, s.cl, log.Named("leaders"))
	m := &messaging{cfg: &s.cfg, cl: s.cl, log: log, leaders: leaders}
	m.routes = newRouteCache(&s.cfg, s.cl, leaders)
	// Stream workers: calls run on long-lived goroutines whose stacks have grown already, instead
	// of a new goroutine per call growing its stack again (about 8 % of the proxy's CPU per send
	// when measured, scripts/proxybench.sh). A worker waits with its call for the broker's
	// answer, so there are as many as the sends in flight the proxy is sized for; beyond that a
	// call gets its own goroutine.
	s.grpc = grpc.NewServer(grpc.NumStreamWorkers(streamWorkers))
	rmqpb.RegisterMessagingServiceServer(s.grpc, m)
	go func() { s.done <- s.grpc.Serve(&sniffListener{Listener: ln, tls: tc}) }()
	log.Info("proxy serving RocketMQ 5 gRPC, TLS and plaintext on one port", "addr", ln.Addr().String(), "namesrv", cfg.NamesrvAddr,
		"certificate", map[bool]string{true: "self-signed", false: cfg.TLSCertPath}[cfg.TLSCertPath == ""])
	return s, nil
}

// Addr is the gRPC listener's address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops accepting, lets calls in flight finish for up to grace (streams are then cut), and
// closes the connections to the brokers.
func (s *Server) Close(grace time.Duration) error {
	stopped := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(grace):
		s.grpc.Stop()
	}
	return s.cl.Close()
}
