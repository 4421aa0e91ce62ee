package remoting

import (
	"bufio"
	"encoding/binary"
	"io"
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
	nc := heartbeatServer(t, ServerConfig{IdleTimeout: idle}, func(req *Command) {
		received.Store(req.Received().UnixNano())
	})
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

// A connection whose reads this server paused (back-pressure: too many unanswered requests) for
// longer than IdleTimeout is not closed as idle once reads resume: the countdown starts again.
func TestServerIdleTimeoutAfterPause(t *testing.T) {
	const idle = 300 * time.Millisecond
	release := make(chan struct{})
	nc := heartbeatServer(t, ServerConfig{IdleTimeout: idle, MaxPendingRequests: 1}, func(req *Command) {
		if req.Opaque == 1 {
			<-release // the first request holds the only pending slot
		}
	})
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	for _, opaque := range []int32{1, 2} {
		req := NewRequest(HeartBeat, nil, nil)
		req.Opaque = opaque
		frame, err := Encode(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(frame); err != nil {
			t.Fatal(err)
		}
		time.Sleep(idle / 6) // request 2 waits in the socket, not in the reader's buffer
	}
	time.Sleep(3 * idle) // reads paused behind request 1 all along
	close(release)
	r := bufio.NewReader(nc)
	for _, want := range []int32{1, 2} {
		var n [4]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			t.Fatalf("waiting for the answer to request %d: %v (closed as idle after a pause the server made?)", want, err)
		}
		frame := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := io.ReadFull(r, frame); err != nil {
			t.Fatal(err)
		}
		resp, err := Decode(frame)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Opaque != want {
			t.Fatalf("answer to request %d, want %d", resp.Opaque, want)
		}
	}
}

// heartbeatServer starts a server with cfg on a loopback port answering HEART_BEAT with SUCCESS
// after seen, and returns a raw connection to it; both are closed when the test ends.
func heartbeatServer(t *testing.T, cfg ServerConfig, seen func(req *Command)) net.Conn {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	s := NewServer(cfg)
	s.Handle(HeartBeat, func(_ *Conn, req *Command) *Command {
		seen(req)
		return req.NewResponse(Success, "")
	})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	nc, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// Requests pipelined into one write share the time their read returned; a request written later
// gets a later time. (A read from the socket, not every frame, reads the clock.)
func TestReceivedPerRead(t *testing.T) {
	got := make(chan time.Time, 8)
	nc := heartbeatServer(t, ServerConfig{}, func(req *Command) { got <- req.Received() })
	frame, err := Encode(NewRequest(HeartBeat, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	before := time.Now()
	if _, err := nc.Write(append(append([]byte(nil), frame...), frame...)); err != nil {
		t.Fatal(err)
	}
	next := func() time.Time {
		t.Helper()
		select {
		case r := <-got:
			return r
		case <-time.After(5 * time.Second):
			t.Fatal("no request served within 5s")
			return time.Time{}
		}
	}
	a, b := next(), next()
	if !a.Equal(b) {
		t.Fatalf("two frames of one read got Received %v and %v", a, b)
	}
	if a.Before(before) || a.After(time.Now()) {
		t.Fatalf("Received %v outside [%v, now]", a, before)
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Sub(a) < 20*time.Millisecond {
		t.Fatalf("a frame written 20ms later got Received %v, %v after the first", c, c.Sub(a))
	}
}
