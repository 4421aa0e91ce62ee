package remoting

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"rocketraft/internal/testcert"
)

// startTLSServer starts an echo server whose port is in mode.
func startTLSServer(t *testing.T, mode string) *Server {
	t.Helper()
	cert, key, err := testcert.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st, err := NewServerTLS(mode, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, func(s *Server) {
		s.cfg.TLS = st
		s.Handle(10, echo)
	})
}

func echoOnce(t *testing.T, c *Client, addr string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := c.Conn(ctx, addr)
	if err != nil {
		return err
	}
	resp, err := conn.Invoke(ctx, NewRequest(10, map[string]string{"v": "hi"}, nil))
	if err != nil {
		return err
	}
	if resp.Ext("echo") != "hi" {
		t.Fatalf("echo answered %+v", resp)
	}
	return nil
}

func tlsClient(t *testing.T) *Client {
	cfg, err := NewClientTLS(false, "")
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(ClientConfig{TLS: cfg})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Permissive serves TLS and plaintext clients on the one port.
func TestTLSPermissiveServesBoth(t *testing.T) {
	s := startTLSServer(t, TLSPermissive)
	if err := echoOnce(t, tlsClient(t), s.Addr()); err != nil {
		t.Fatalf("TLS client: %v", err)
	}
	plain := NewClient(ClientConfig{})
	defer plain.Close()
	if err := echoOnce(t, plain, s.Addr()); err != nil {
		t.Fatalf("plaintext client: %v", err)
	}
}

// Enforcing serves TLS clients and closes plaintext ones before reading a request.
func TestTLSEnforcingRefusesPlaintext(t *testing.T) {
	s := startTLSServer(t, TLSEnforcing)
	if err := echoOnce(t, tlsClient(t), s.Addr()); err != nil {
		t.Fatalf("TLS client: %v", err)
	}
	plain := NewClient(ClientConfig{})
	defer plain.Close()
	if err := echoOnce(t, plain, s.Addr()); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("plaintext client: %v, want the connection closed", err)
	}
	// A client verifying the server against another certificate is refused by its own check.
	cert, _, _ := testcert.Write(t.TempDir())
	cfg, err := NewClientTLS(true, cert)
	if err != nil {
		t.Fatal(err)
	}
	strict := NewClient(ClientConfig{TLS: cfg})
	defer strict.Close()
	if err := echoOnce(t, strict, s.Addr()); err == nil {
		t.Fatal("a client verifying against another CA connected")
	}
}

// TLS on without a certificate is a configuration error, not a plaintext port.
func TestTLSNeedsCertificate(t *testing.T) {
	if _, err := NewServerTLS(TLSEnforcing, "", ""); err == nil {
		t.Fatal("enforcing without a certificate accepted")
	}
	if _, err := NewServerTLS("sometimes", "a", "b"); err == nil {
		t.Fatal("an unknown mode accepted")
	}
	if st, err := NewServerTLS("disabled", "", ""); st != nil || err != nil {
		t.Fatalf("disabled: %v %v", st, err)
	}
}

// A peer that connects and says nothing does not stop the accept loop of a TLS port.
func TestTLSSilentPeerDoesNotBlockAccept(t *testing.T) {
	s := startTLSServer(t, TLSPermissive)
	silent, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if err := echoOnce(t, tlsClient(t), s.Addr()); err != nil {
		t.Fatalf("TLS client behind a silent one: %v", err)
	}
}
