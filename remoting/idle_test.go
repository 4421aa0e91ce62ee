package remoting

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// A connection that keeps sending outlives IdleTimeout many times over; one that goes quiet is
// closed after IdleTimeout (and at most a sixteenth more, plus scheduling slack).
func TestServerIdleTimeout(t *testing.T) {
	const idle = 400 * time.Millisecond
	var received atomic.Int64 // the last request's Received, Unix nanoseconds
	s := NewServer(ServerConfig{Addr: "127.0.0.1:0", IdleTimeout: idle})
	s.Handle(HeartBeat, func(_ *Conn, req *Command) *Command {
		received.Store(req.Received().UnixNano())
		return req.NewResponse(Success, "")
	})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	nc, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req := NewRequest(HeartBeat, nil, nil)
	frame, err := Encode(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	busyUntil := time.Now().Add(3 * idle)
	for time.Now().Before(busyUntil) {
		before := time.Now()
		if _, err := nc.Write(frame); err != nil {
			t.Fatalf("a busy connection was closed: %v", err)
		}
		if _, err := nc.Read(buf); err != nil {
			t.Fatalf("a busy connection was closed: %v", err)
		}
		if r := time.Unix(0, received.Load()); r.Before(before.Add(-time.Millisecond)) || r.After(time.Now()) {
			t.Fatalf("Received %v outside the request's round trip [%v, %v]", r, before, time.Now())
		}
		time.Sleep(idle / 8)
	}
	quiet := time.Now()
	if _, err := nc.Read(buf); err == nil {
		t.Fatal("read data on a connection that sent nothing")
	}
	waited := time.Since(quiet)
	if waited < idle-idle/8 || waited > idle+idle/16+2*time.Second {
		t.Fatalf("a quiet connection was closed after %v, want about %v", waited, idle)
	}
	if (&Command{}).Received() != (time.Time{}) {
		t.Fatal("a command no connection read has a Received time")
	}
}
