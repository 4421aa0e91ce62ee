package remoting

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// DialTimeout bounds connection set-up; 0 means 3 s.
	DialTimeout time.Duration
	// Logger receives connection problems; nil discards them.
	Logger hclog.Logger
	// Handlers serve requests the peer sends back on the connection (for
	// example a broker calling a client); codes without one are refused.
	Handlers map[int32]Handler
	// BeforeRequest, when set, is applied to every request just before it is encoded, on every
	// connection of the client (signing with an ACL account).
	BeforeRequest func(*Command)
	// OnConnClose, when set, is called with the address of every connection this client dialed
	// once that connection has closed (the peer went away, a read or write failed, or CloseAddr),
	// except after Close. It runs on the connection's own goroutine, after every request waiting
	// on it has failed; it must not block. The proxy uses it to look for a group's new leader the
	// moment the connection to the old one breaks.
	OnConnClose func(addr string)
	// TLS, when set, makes every connection a TLS client connection with this configuration
	// (RocketMQ's tls.enable; NewClientTLS builds it). ServerName defaults to the host dialled.
	TLS *tls.Config
	// FlatExtResponses decodes the extFields of responses as a flat list instead of a map
	// (flatext.go), for a caller that reads them through Command's methods (Ext, ExtSeq, Fields)
	// or not at all: a load generator spares the map per answer.
	FlatExtResponses bool
	// BinaryHeaders sends every request with RocketMQ's binary header (ROCKETMQ serialization)
	// whatever its SerializeType, for peers known to read it (this project's brokers and name
	// servers, and Apache's): a header is a quarter of the CPU to read that JSON is, and the peer
	// answers in the same encoding. The proxy's hop to its brokers uses it.
	BinaryHeaders bool
}

// Client keeps one connection per remote address, as RocketMQ clients do, and
// pipelines requests over it.
type Client struct {
	cfg ClientConfig

	mu     sync.Mutex
	conns  map[string]*Conn
	closed bool
}

// NewClient returns a client with no connections yet.
func NewClient(cfg ClientConfig) *Client {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 3 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Client{cfg: cfg, conns: map[string]*Conn{}}
}

// Conn returns the open connection to addr, dialling it if needed.
func (c *Client) Conn(ctx context.Context, addr string) (*Conn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrConnClosed
	}
	if conn, ok := c.conns[addr]; ok {
		select {
		case <-conn.Done():
			delete(c.conns, addr)
		default:
			c.mu.Unlock()
			return conn, nil
		}
	}
	c.mu.Unlock()

	d := net.Dialer{Timeout: c.cfg.DialTimeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w: %w", addr, ErrNotSent, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if c.cfg.TLS != nil {
		cfg := c.cfg.TLS
		if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(nc, cfg)
		hctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("tls handshake with %s: %w: %w", addr, ErrNotSent, err)
		}
		nc = tc
	}
	conn := newConn(nc, handlerTable(c.cfg.Handlers), c.cfg.Logger, DefaultMaxFrameSize, 0)
	conn.beforeRequest = c.cfg.BeforeRequest
	conn.keep = flatRule{responses: c.cfg.FlatExtResponses}
	conn.binaryRequests = c.cfg.BinaryHeaders
	c.mu.Lock()
	if existing, ok := c.conns[addr]; ok && !isDone(existing) {
		c.mu.Unlock()
		_ = nc.Close()
		return existing, nil
	}
	if c.closed {
		c.mu.Unlock()
		_ = nc.Close()
		return nil, ErrConnClosed
	}
	c.conns[addr] = conn
	c.mu.Unlock()
	go func() {
		conn.serve()
		if c.cfg.OnConnClose != nil && !c.isClosed() {
			c.cfg.OnConnClose(addr)
		}
	}()
	return conn, nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func isDone(c *Conn) bool {
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}

// Invoke sends req to addr and waits for the response or ctx's end.
func (c *Client) Invoke(ctx context.Context, addr string, req *Command) (*Command, error) {
	conn, err := c.Conn(ctx, addr)
	if err != nil {
		return nil, err
	}
	return conn.Invoke(ctx, req)
}

// InvokeAsync sends req to addr and returns at once; done gets the outcome (see
// Conn.InvokeAsync, also for what done may do). ctx bounds only a dial, which happens on the
// caller's goroutine when addr has no open connection: a callback that sends again should use
// Open first.
func (c *Client) InvokeAsync(ctx context.Context, addr string, req *Command, deadline time.Time, done func(*Command, error)) error {
	conn, err := c.Conn(ctx, addr)
	if err != nil {
		return err
	}
	return conn.InvokeAsync(req, deadline, done)
}

// Open returns the open connection to addr, or nil when there is none (it never dials).
func (c *Client) Open(addr string) *Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if conn, ok := c.conns[addr]; ok && !c.closed && !isDone(conn) {
		return conn
	}
	return nil
}

// InvokeOneway sends req to addr without waiting for an answer.
func (c *Client) InvokeOneway(ctx context.Context, addr string, req *Command) error {
	conn, err := c.Conn(ctx, addr)
	if err != nil {
		return err
	}
	return conn.InvokeOneway(req)
}

// CloseAddr drops the connection to addr, if any.
func (c *Client) CloseAddr(addr string) {
	c.mu.Lock()
	conn := c.conns[addr]
	delete(c.conns, addr)
	c.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}

// Close closes every connection; later calls fail.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	conns := c.conns
	c.conns = map[string]*Conn{}
	c.mu.Unlock()
	for _, conn := range conns {
		_ = conn.Close()
	}
	return nil
}
