package dledger

import (
	"net"
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
// (a host name stays a host name), where raft.NewTCPTransport insists on a resolved IP.
type streamLayer struct {
	net.Listener
	advertise peerAddr
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
