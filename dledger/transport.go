package dledger

import (
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Transport tuning: a few pooled connections per peer, and an I/O deadline long enough for a
// multi-MiB AppendEntries or a snapshot chunk on a slow link.
const (
	transportMaxPool = 3
	transportTimeout = 10 * time.Second
)

// streamLayer is raft.StreamLayer over TCP that advertises the configured peer address verbatim
// (a host name stays a host name), where raft.NewTCPTransport insists on a resolved IP. Closing
// it also closes the connections it accepted (the library leaves them to their readers), so a
// node that shuts down looks to its peers exactly like a dead process: their connections end and
// new dials are refused, which their leader probes act on (liveness.go).
type streamLayer struct {
	net.Listener
	advertise peerAddr

	mu       sync.Mutex
	closed   bool
	accepted map[net.Conn]struct{}
}

// Accept tracks each accepted connection until it is closed.
func (s *streamLayer) Accept() (net.Conn, error) {
	c, err := s.Listener.Accept()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	if s.accepted == nil {
		s.accepted = map[net.Conn]struct{}{}
	}
	tc := &trackedConn{Conn: c, s: s}
	s.accepted[tc] = struct{}{}
	return tc, nil
}

// Close closes the listener and every accepted connection still open.
func (s *streamLayer) Close() error {
	err := s.Listener.Close()
	s.mu.Lock()
	s.closed = true
	conns := s.accepted
	s.accepted = nil
	s.mu.Unlock()
	for c := range conns {
		c.(*trackedConn).Conn.Close()
	}
	return err
}

// trackedConn removes itself from its stream layer's set when closed.
type trackedConn struct {
	net.Conn
	s *streamLayer
}

func (c *trackedConn) Close() error {
	c.s.mu.Lock()
	delete(c.s.accepted, c)
	c.s.mu.Unlock()
	return c.Conn.Close()
}

type peerAddr string

func (a peerAddr) Network() string { return "tcp" }
func (a peerAddr) String() string  { return string(a) }

func (s *streamLayer) Addr() net.Addr { return s.advertise }

func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(address), timeout)
}

// newTransport listens on addr (or uses ln) and advertises addr.
func newTransport(addr string, ln net.Listener, logger hclog.Logger) (*raft.NetworkTransport, error) {
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return nil, err
		}
	}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  &streamLayer{Listener: ln, advertise: peerAddr(addr)},
		MaxPool: transportMaxPool,
		Timeout: transportTimeout,
		Logger:  logger.Named("transport"),
	}), nil
}
