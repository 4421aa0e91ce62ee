package remoting

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Addr is the listen address; "127.0.0.1:0" picks a free port (see Server.Addr).
	Addr string
	// Logger receives connection-level problems; nil discards them.
	Logger hclog.Logger
	// MaxFrameSize bounds an incoming frame, length field included; 0 means 16 MiB.
	MaxFrameSize int
	// IdleTimeout closes a connection that sent nothing for this long; 0 means 120 s,
	// as Java's serverChannelMaxIdleTimeSeconds.
	IdleTimeout time.Duration
	// OnRequest, if set, is called after each request is answered with its code, the response
	// code and the time from reading the request to its answer (the handler's, and any wait for
	// a worker or behind the connection's ordered requests): the hook rpc latency metrics hang
	// on, so this package knows nothing of Prometheus. It runs on the serving goroutine and must be cheap. Requests
	// answered later through Conn.Defer are reported when answered; those answered through
	// Conn.Reply (long polling) and oneway requests are not reported.
	OnRequest func(code, respCode int32, elapsed time.Duration)
	// Intercept, when set, sees every request before its handler (access control): a non-nil
	// result is sent as the answer and the handler is not run.
	Intercept Handler
	// MaxConnections bounds the open connections: one more is closed at accept, with a log
	// line at most every few seconds. 0 means DefaultMaxConnections, negative unbounded.
	MaxConnections int
	// MaxPendingRequests, MaxPendingBytes and MaxQueuedBytes bound what one connection can make
	// the server hold (flow.go); at a bound the connection stops being read until answers
	// leave. 0 means the Default of each.
	MaxPendingRequests int
	MaxPendingBytes    int64
	MaxQueuedBytes     int64
	// ReadBudget bounds the bytes of requests being read, decoded and handled across all
	// connections (at least MaxFrameSize); a frame that waits ReadBudgetWait for budget closes
	// its connection. 0 means the Defaults.
	ReadBudget     int64
	ReadBudgetWait time.Duration
	// TLS, when set, is how the listener treats TLS (tls.go): permissive accepts TLS and
	// plaintext on the one port, enforcing only TLS. Nil serves plaintext.
	TLS *ServerTLS
	// FlatExtCodes are request codes whose extFields are decoded as a flat list instead of a
	// map (flatext.go): their handlers, and Intercept, read fields through Command's methods
	// (Ext, ExtSeq, Fields), never through ExtFields.
	FlatExtCodes []int32
}

// Server accepts remoting connections and serves registered handlers.
type Server struct {
	cfg      ServerConfig
	handlers handlerTable
	ordered  orderedCodes
	inline   inlineCodes
	ln       net.Listener

	budget *budget
	// refused counts connections closed at accept since the last log line about them.
	refused      int
	refusedLogAt time.Time

	mu           sync.Mutex
	conns        map[*Conn]struct{}
	onDisconnect []func(*Conn)
	closed       bool
	wg           sync.WaitGroup
}

// NewServer returns a server; register handlers with Handle before Start.
func NewServer(cfg ServerConfig) *Server {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.MaxFrameSize <= 0 {
		cfg.MaxFrameSize = DefaultMaxFrameSize
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 120 * time.Second
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.MaxPendingRequests <= 0 {
		cfg.MaxPendingRequests = DefaultMaxPendingRequests
	}
	if cfg.MaxPendingBytes <= 0 {
		cfg.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if cfg.MaxQueuedBytes <= 0 {
		cfg.MaxQueuedBytes = DefaultMaxQueuedBytes
	}
	if cfg.ReadBudget <= 0 {
		cfg.ReadBudget = DefaultReadBudget
	}
	cfg.ReadBudget = max(cfg.ReadBudget, int64(cfg.MaxFrameSize))
	if cfg.ReadBudgetWait <= 0 {
		cfg.ReadBudgetWait = DefaultReadBudgetWait
	}
	return &Server{cfg: cfg, handlers: handlerTable{}, ordered: orderedCodes{}, inline: inlineCodes{},
		conns: map[*Conn]struct{}{}, budget: newBudget(cfg.ReadBudget, cfg.ReadBudgetWait)}
}

// Handle registers h for a request code. Codes without a handler are answered
// REQUEST_CODE_NOT_SUPPORTED.
func (s *Server) Handle(code int32, h Handler) {
	s.handlers[code] = h
	delete(s.ordered, code)
	delete(s.inline, code)
}

// HandleInOrder registers h for a request code whose requests, on one connection, must take
// effect in the order they were sent. Requests are otherwise served concurrently, so a client's
// oneway UPDATE_CONSUMER_OFFSET could be overtaken by the QUERY_CONSUMER_OFFSET it sends right
// after (the Go client does exactly that when it applies a reset) and read the offset before the
// update. Requests of all in-order codes of a connection share one queue; they never wait for
// other codes' requests, nor other connections'.
func (s *Server) HandleInOrder(code int32, h Handler) {
	s.handlers[code] = h
	s.ordered[code] = true
	delete(s.inline, code)
}

// HandleInline registers h for a request code whose requests may be served on the connection's
// read goroutine instead of being handed to a worker: for each request, when inline(req) is true.
// Handing a request to a worker wakes another goroutine (and often another OS thread); for a
// request that costs a few microseconds, such as a send a Raft leader only queues for its next
// entry and answers later through Conn.Defer, the hand-off costs more than the work. While h
// runs, the connection reads nothing, so inline must say no whenever h could block. Requests of
// a connection served inline are also served in arrival order.
func (s *Server) HandleInline(code int32, h Handler, inline func(req *Command) bool) {
	s.handlers[code] = h
	s.inline[code] = inline
	delete(s.ordered, code)
}

// OnDisconnect registers a callback run when a connection closes, so owners of
// per-connection state (client tables, broker liveness) can drop it at once.
func (s *Server) OnDisconnect(f func(*Conn)) {
	s.mu.Lock()
	s.onDisconnect = append(s.onDisconnect, f)
	s.mu.Unlock()
}

// Start binds the listen address and starts accepting.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Addr, err)
	}
	if s.cfg.TLS != nil {
		if ln, err = s.cfg.TLS.wrap(ln, s.cfg.Logger); err != nil {
			return fmt.Errorf("listen on %s: %w", s.cfg.Addr, err)
		}
	}
	s.ln = ln
	s.wg.Add(1)
	go s.acceptLoop()
	return nil
}

// Addr is the actual listen address, useful after listening on port 0.
func (s *Server) Addr() string {
	if s.ln == nil {
		return s.cfg.Addr
	}
	return s.ln.Addr().String()
}

// Conns returns the open connections.
func (s *Server) Conns() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	var delay time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off, keep serving.
			if delay == 0 {
				delay = 5 * time.Millisecond
			} else if delay < time.Second {
				delay *= 2
			}
			s.cfg.Logger.Warn("accept failed", "error", err, "retry_in", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		if s.overLimit(nc) {
			continue
		}
		c := newConn(nc, s.handlers, s.cfg.Logger, s.cfg.MaxFrameSize, s.cfg.IdleTimeout)
		c.limits = limits{
			maxPending:      int64(s.cfg.MaxPendingRequests),
			maxPendingBytes: s.cfg.MaxPendingBytes,
			maxQueuedBytes:  s.cfg.MaxQueuedBytes,
			writeTimeout:    s.cfg.IdleTimeout,
			budget:          s.budget,
		}
		c.onRequest = s.cfg.OnRequest
		c.keep = flatRule{codes: s.cfg.FlatExtCodes}
		c.intercept = s.cfg.Intercept
		c.ordered = s.ordered
		c.inline = s.inline
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = nc.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			callbacks := append([]func(*Conn){}, s.onDisconnect...)
			s.mu.Unlock()
			for _, f := range callbacks {
				f(c)
			}
		}()
	}
}

// refusedLogEvery is the most often a server logs the connections it refused at accept.
const refusedLogEvery = 10 * time.Second

// overLimit closes nc when the server already has MaxConnections open, logging (at most every
// refusedLogEvery) how many it refused.
func (s *Server) overLimit(nc net.Conn) bool {
	if s.cfg.MaxConnections < 0 {
		return false
	}
	s.mu.Lock()
	full := len(s.conns) >= s.cfg.MaxConnections
	s.mu.Unlock()
	if !full {
		return false
	}
	_ = nc.Close()
	s.refused++
	if now := time.Now(); now.Sub(s.refusedLogAt) >= refusedLogEvery {
		s.cfg.Logger.Warn("refusing connections: maxConnections reached", "max_connections", s.cfg.MaxConnections,
			"refused", s.refused, "last_remote", nc.RemoteAddr().String())
		s.refused, s.refusedLogAt = 0, now
	}
	return true
}

// Close stops accepting, closes every connection and waits for them to end.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	var err error
	if s.ln != nil {
		err = s.ln.Close()
	}
	for _, c := range conns {
		_ = c.Close()
	}
	s.wg.Wait()
	return err
}
