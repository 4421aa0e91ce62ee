package remoting

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// TestOnConnCloseAndNotSent: a client's OnConnClose hears of a connection its peer closed; a
// refused dial and a request on a connection already closed are ErrNotSent, a request whose
// connection breaks while it waits for the answer is not.
func TestOnConnCloseAndNotSent(t *testing.T) {
	hold := make(chan struct{})
	s := startServer(t, func(s *Server) {
		s.Handle(HeartBeat, echo)
		s.Handle(PullMessage, func(conn *Conn, req *Command) *Command {
			<-hold
			return nil
		})
	})
	closed := make(chan string, 4)
	cl := NewClient(ClientConfig{OnConnClose: func(addr string) { closed <- addr }})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cl.Invoke(ctx, s.Addr(), NewRequest(HeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	conn := cl.Open(s.Addr())
	waiting := make(chan error, 1)
	go func() {
		_, err := cl.Invoke(ctx, s.Addr(), NewRequest(PullMessage, nil, nil))
		waiting <- err
	}()
	time.Sleep(100 * time.Millisecond)
	_ = s.Close() // the peer goes away with a request in flight
	close(hold)
	select {
	case addr := <-closed:
		if addr != s.Addr() {
			t.Fatalf("OnConnClose(%q), want %q", addr, s.Addr())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnConnClose not called after the peer closed")
	}
	if err := <-waiting; err == nil || errors.Is(err, ErrNotSent) || !errors.Is(err, ErrConnClosed) {
		t.Fatalf("request in flight when the connection broke: %v (want ErrConnClosed, not ErrNotSent)", err)
	}
	if _, err := conn.Invoke(ctx, NewRequest(HeartBeat, nil, nil)); !errors.Is(err, ErrNotSent) {
		t.Fatalf("request on a closed connection: %v, want ErrNotSent", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := ln.Addr().String()
	ln.Close()
	if _, err := cl.Invoke(ctx, free, NewRequest(HeartBeat, nil, nil)); !errors.Is(err, ErrNotSent) {
		t.Fatalf("refused dial: %v, want ErrNotSent", err)
	}
}
