package proxy

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// The gRPC port serves TLS and plaintext HTTP/2 on one port, as Apache's proxy does: the official
// Go client always dials TLS, the Node client dials plaintext by default. A connection whose
// first byte is a TLS handshake record (0x16) is served through TLS; any other as h2c.

const tlsHandshake = 0x16

// sniffListener hands out connections already unwrapped from TLS where the client spoke TLS.
type sniffListener struct {
	net.Listener
	tls *tls.Config
	// enforce (tls.server.mode=enforcing) closes connections that do not open with TLS.
	enforce bool
	log     hclog.Logger
}

// peekedConn is a connection with its first bytes read ahead.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// Accept returns the next connection, TLS or not. Reading its first byte happens in the
// connection's first Read (by gRPC's own goroutine), so a silent client never holds up Accept.
func (l *sniffListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &lazySniffConn{peekedConn: peekedConn{Conn: c, r: bufio.NewReader(c)}, tls: l.tls, enforce: l.enforce, log: l.log}, nil
}

// lazySniffConn decides between TLS and plaintext at its first Read or Write (gRPC's server
// writes its preface first; a TLS server's first write waits for the client's hello anyway).
type lazySniffConn struct {
	peekedConn
	tls     *tls.Config
	enforce bool
	log     hclog.Logger
	once    sync.Once
	decided net.Conn
	err     error
}

func (c *lazySniffConn) decide() { c.once.Do(c.sniff) }

func (c *lazySniffConn) sniff() {
	_ = c.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := c.r.Peek(1)
	_ = c.Conn.SetReadDeadline(time.Time{})
	if err != nil {
		c.err = err
		return
	}
	if b[0] == tlsHandshake {
		c.decided = tls.Server(&c.peekedConn, c.tls)
		return
	}
	if c.enforce {
		if c.log != nil {
			c.log.Info("closing plaintext gRPC connection: tls.server.mode=enforcing", "remote", c.RemoteAddr().String())
		}
		_ = c.Conn.Close()
		c.err = errors.New("proxy: plaintext connection refused (tls.server.mode=enforcing)")
		return
	}
	c.decided = &c.peekedConn
}

func (c *lazySniffConn) Read(p []byte) (int, error) {
	c.decide()
	if c.err != nil {
		return 0, c.err
	}
	return c.decided.Read(p)
}

func (c *lazySniffConn) Write(p []byte) (int, error) {
	c.decide()
	if c.err != nil {
		return 0, c.err
	}
	return c.decided.Write(p)
}

// tlsConfig loads certFile/keyFile, or makes a self-signed certificate when none is configured
// (Apache's test mode: clients that verify certificates need a real one).
func tlsConfig(certFile, keyFile string) (*tls.Config, error) {
	var cert tls.Certificate
	var err error
	if certFile != "" || keyFile != "" {
		if cert, err = tls.LoadX509KeyPair(certFile, keyFile); err != nil {
			return nil, fmt.Errorf("tlsCertPath/tlsKeyPath: %w", err)
		}
	} else if cert, err = selfSigned(); err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}, nil
}

func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed certificate: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "rocketraft mqproxy (self-signed)"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
