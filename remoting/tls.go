package remoting

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// TLS modes of a server port, named as RocketMQ's tls.server.mode values.
const (
	TLSDisabled   = "disabled"
	TLSPermissive = "permissive"
	TLSEnforcing  = "enforcing"
)

// ParseTLSMode checks a tls.server.mode value ("" is disabled).
func ParseTLSMode(s string) (string, error) {
	switch m := strings.ToLower(strings.TrimSpace(s)); m {
	case "", TLSDisabled:
		return TLSDisabled, nil
	case TLSPermissive, TLSEnforcing:
		return m, nil
	default:
		return "", fmt.Errorf("tls.server.mode %q: want disabled, permissive or enforcing", s)
	}
}

// ServerTLS is how a server port treats TLS: Mode permissive serves TLS and plaintext on the one
// port (told apart by the first byte, 0x16 opening a TLS handshake record), enforcing serves
// only TLS and closes a connection whose first byte is anything else.
type ServerTLS struct {
	Mode   string
	Config *tls.Config
}

// NewServerTLS loads the certificate and key a server presents, for mode; it returns nil for
// disabled, and an error naming the missing setting when TLS is on without a certificate, so a
// node refuses to start rather than serve plaintext where TLS was asked for.
func NewServerTLS(mode, certPath, keyPath string) (*ServerTLS, error) {
	m, err := ParseTLSMode(mode)
	if err != nil {
		return nil, err
	}
	if m == TLSDisabled {
		return nil, nil
	}
	if certPath == "" || keyPath == "" {
		return nil, fmt.Errorf("tls.server.mode=%s needs tls.server.certPath and tls.server.keyPath (a PEM certificate chain and its private key)", m)
	}
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return nil, fmt.Errorf("load tls.server.certPath %s / tls.server.keyPath %s: %w", certPath, keyPath, err)
	}
	return &ServerTLS{Mode: m, Config: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}, nil
}

// NewClientTLS is the TLS configuration of outgoing remoting connections (RocketMQ's tls.enable):
// with authServer the peer's certificate is verified against trustCertPath (the system roots
// when empty); without, it is not verified, as RocketMQ clients do by default (tls.test.mode).
func NewClientTLS(authServer bool, trustCertPath string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: !authServer} //nolint:gosec // RocketMQ's default, see above
	if authServer && trustCertPath != "" {
		pem, err := os.ReadFile(trustCertPath)
		if err != nil {
			return nil, fmt.Errorf("read tls.client.trustCertPath: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.client.trustCertPath %s holds no PEM certificate", trustCertPath)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// tlsHandshakeByte opens every TLS record of the handshake type, the first a client sends.
const tlsHandshakeByte = 0x16

// errPlaintextRefused ends a plaintext connection to an enforcing port.
var errPlaintextRefused = errors.New("remoting: plaintext connection refused (tls.server.mode=enforcing)")

// wrap returns ln whose connections are sniffed (sniffConn): accepting never waits for a
// peer's first byte, so a silent peer cannot stall the accept loop.
func (t *ServerTLS) wrap(ln net.Listener, logger hclog.Logger) (net.Listener, error) {
	if t.Mode != TLSPermissive && t.Mode != TLSEnforcing {
		return nil, fmt.Errorf("tls mode %q cannot serve", t.Mode)
	}
	return &tlsListener{Listener: ln, t: t, logger: logger}, nil
}

type tlsListener struct {
	net.Listener
	t      *ServerTLS
	logger hclog.Logger
}

func (l *tlsListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: nc, l: l}, nil
}

// sniffConn decides on its first Read (on the connection's read goroutine, under its read
// deadline) whether the peer speaks TLS, and from then on reads and writes through the TLS
// connection or the plain one. Nothing is written on a server connection before a request has
// been read, so writes always find the decision made.
type sniffConn struct {
	net.Conn // the TCP connection: addresses, deadlines, Close
	l        *tlsListener
	active   atomic.Pointer[net.Conn]
}

func (c *sniffConn) Read(p []byte) (int, error) {
	if a := c.active.Load(); a != nil {
		return (*a).Read(p)
	}
	br := bufio.NewReaderSize(c.Conn, 1024)
	first, err := br.Peek(1)
	if err != nil {
		return 0, err
	}
	var a net.Conn = &peekedConn{Conn: c.Conn, r: br}
	switch {
	case first[0] == tlsHandshakeByte:
		a = tls.Server(a, c.l.t.Config)
	case c.l.t.Mode == TLSEnforcing:
		c.l.logger.Info("closing plaintext connection: this port only accepts TLS", "remote", c.RemoteAddr().String())
		_ = c.Conn.Close()
		return 0, errPlaintextRefused
	}
	c.active.Store(&a)
	return a.Read(p)
}

func (c *sniffConn) Write(p []byte) (int, error) {
	if a := c.active.Load(); a != nil {
		return (*a).Write(p)
	}
	return 0, fmt.Errorf("remoting: write before the peer's first byte: %w", ErrConnClosed)
}

// peekedConn reads through the reader that holds the sniffed byte.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
