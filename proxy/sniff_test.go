package proxy

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"
)

// TestSniffListener: one port serves a TLS client (self-signed certificate, ALPN h2) and a
// plaintext one; each reads back what it wrote.
func TestSniffListener(t *testing.T) {
	testSniffListener(t, false)
}

// TestSniffListenerEnforcing: with tls.server.mode=enforcing the TLS client is served and the
// plaintext one closed unanswered.
func TestSniffListenerEnforcing(t *testing.T) {
	testSniffListener(t, true)
}

func testSniffListener(t *testing.T, enforce bool) {
	tc, err := tlsConfig("", "")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl := &sniffListener{Listener: ln, tls: tc, enforce: enforce}
	defer sl.Close()
	go func() {
		for {
			c, err := sl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := make([]byte, 5)
				if _, err := io.ReadFull(c, b); err == nil {
					c.Write(b)
				}
			}()
		}
	}()
	echo := func(t *testing.T, c net.Conn, msg string) {
		t.Helper()
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, len(msg))
		if _, err := io.ReadFull(c, b); err != nil || string(b) != msg {
			t.Fatalf("echo %q: got %q, %v", msg, b, err)
		}
	}
	tlsConn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatalf("TLS handshake: %v", err)
	}
	if p := tlsConn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN %q, want h2 (gRPC clients require it)", p)
	}
	echo(t, tlsConn, "hello")
	plain, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if !enforce {
		echo(t, plain, "plain")
		return
	}
	defer plain.Close()
	plain.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = plain.Write([]byte("plain"))
	if n, err := plain.Read(make([]byte, 5)); err == nil {
		t.Fatalf("plaintext connection to an enforcing port read %d bytes back", n)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("plaintext connection to an enforcing port left open")
	}
}
