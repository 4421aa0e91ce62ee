package remoting

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

func startServer(t *testing.T, register func(s *Server)) *Server {
	t.Helper()
	s := NewServer(ServerConfig{Addr: "127.0.0.1:0"})
	register(s)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func echo(conn *Conn, req *Command) *Command {
	resp := req.NewResponse(Success, "")
	resp.SetExt("echo", req.Ext("v"))
	resp.Body = req.Body
	return resp
}

func TestClientServerInvoke(t *testing.T) {
	s := startServer(t, func(s *Server) { s.Handle(HeartBeat, echo) })
	cl := NewClient(ClientConfig{})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, s.Addr(), NewRequest(HeartBeat, map[string]string{"v": "1"}, []byte("b")))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != Success || resp.Ext("echo") != "1" || string(resp.Body) != "b" || !resp.IsResponse() {
		t.Fatalf("%+v", resp)
	}
	resp, err = cl.Invoke(ctx, s.Addr(), NewRequest(9999, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != RequestCodeNotSupported || resp.Remark == "" {
		t.Fatalf("unknown code answered %+v", resp)
	}
}

// TestManyInFlightOutOfOrder checks pipelining: slow and fast requests share
// one connection and each caller gets its own answer.
func TestManyInFlightOutOfOrder(t *testing.T) {
	s := startServer(t, func(s *Server) {
		s.Handle(PullMessage, func(conn *Conn, req *Command) *Command {
			d, _ := strconv.Atoi(req.Ext("v"))
			time.Sleep(time.Duration(d) * time.Millisecond)
			return echo(conn, req)
		})
	})
	cl := NewClient(ClientConfig{})
	defer cl.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			v := strconv.Itoa((200 - i) % 20)
			resp, err := cl.Invoke(ctx, s.Addr(), NewRequest(PullMessage, map[string]string{"v": v}, nil))
			if err != nil {
				errs <- err
				return
			}
			if resp.Ext("echo") != v {
				errs <- errors.New("mismatched response " + resp.Ext("echo") + " for " + v)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestDeferredReplyAndServerToClientCall(t *testing.T) {
	got := make(chan *Conn, 1)
	s := startServer(t, func(s *Server) {
		s.Handle(PullMessage, func(conn *Conn, req *Command) *Command {
			go func() {
				time.Sleep(20 * time.Millisecond)
				resp := req.NewResponse(Success, "later")
				_ = conn.Reply(resp)
			}()
			got <- conn
			return nil
		})
	})
	cl := NewClient(ClientConfig{Handlers: map[int32]Handler{NotifyConsumerIDsChanged: func(conn *Conn, req *Command) *Command {
		return req.NewResponse(Success, "client saw "+req.Ext("consumerGroup"))
	}}})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, s.Addr(), NewRequest(PullMessage, nil, nil))
	if err != nil || resp.Remark != "later" {
		t.Fatalf("%v %+v", err, resp)
	}
	srvConn := <-got
	back, err := srvConn.Invoke(ctx, NewRequest(NotifyConsumerIDsChanged, map[string]string{"consumerGroup": "G"}, nil))
	if err != nil || back.Remark != "client saw G" {
		t.Fatalf("%v %+v", err, back)
	}
}

func TestHandlerPanicAnswersSystemError(t *testing.T) {
	s := startServer(t, func(s *Server) {
		s.Handle(SendMessage, func(conn *Conn, req *Command) *Command { panic("boom") })
		s.Handle(HeartBeat, echo)
	})
	cl := NewClient(ClientConfig{})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, s.Addr(), NewRequest(SendMessage, nil, nil))
	if err != nil || resp.Code != SystemError {
		t.Fatalf("%v %+v", err, resp)
	}
	if resp, err = cl.Invoke(ctx, s.Addr(), NewRequest(HeartBeat, nil, nil)); err != nil || resp.Code != Success {
		t.Fatalf("server unusable after a panic: %v %+v", err, resp)
	}
}

// TestBadInputClosesOnlyThatConnection sends each kind of broken frame on its
// own connection and checks the server closes it and keeps serving others.
func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	s := startServer(t, func(s *Server) { s.Handle(HeartBeat, echo) })
	oversized := make([]byte, 8)
	binary.BigEndian.PutUint32(oversized, 16*1024*1024+1)
	badJSON := append([]byte{0, 0, 0, 9, 0, 0, 0, 5}, "{nope"...)
	truncated := []byte{0, 0, 0, 100, 0, 0, 0, 2, '{', '}'}
	headerOverrun := []byte{0, 0, 0, 6, 0, 0, 0, 60, '{', '}'}
	for name, payload := range map[string][]byte{"oversized": oversized, "bad json": badJSON, "truncated": truncated, "header overrun": headerOverrun} {
		nc, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(payload); err != nil {
			t.Fatal(err)
		}
		if name == "truncated" {
			_ = nc.(*net.TCPConn).CloseWrite()
		}
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 1)
		if _, err := nc.Read(buf); err == nil {
			t.Errorf("%s: server answered instead of closing", name)
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("%s: server kept the connection open", name)
		}
		_ = nc.Close()

		cl := NewClient(ClientConfig{})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := cl.Invoke(ctx, s.Addr(), NewRequest(HeartBeat, nil, nil))
		cancel()
		_ = cl.Close()
		if err != nil || resp.Code != Success {
			t.Fatalf("%s: server stopped serving: %v", name, err)
		}
	}
}

func TestInvokeFailsWhenConnectionDies(t *testing.T) {
	s := startServer(t, func(s *Server) {
		s.Handle(PullMessage, func(conn *Conn, req *Command) *Command {
			_ = conn.Close()
			return nil
		})
	})
	cl := NewClient(ClientConfig{})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cl.Invoke(ctx, s.Addr(), NewRequest(PullMessage, nil, nil)); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("want ErrConnClosed, got %v", err)
	}
}

func TestOnewayGetsNoAnswer(t *testing.T) {
	done := make(chan struct{})
	s := startServer(t, func(s *Server) {
		s.Handle(UpdateConsumerOffset, func(conn *Conn, req *Command) *Command {
			close(done)
			return req.NewResponse(Success, "")
		})
	})
	cl := NewClient(ClientConfig{})
	defer cl.Close()
	if err := cl.InvokeOneway(context.Background(), s.Addr(), NewRequest(UpdateConsumerOffset, nil, nil)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("oneway request not served")
	}
}

func BenchmarkInvoke(b *testing.B) {
	s := NewServer(ServerConfig{Addr: "127.0.0.1:0"})
	s.Handle(SendMessageV2, echo)
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	cl := NewClient(ClientConfig{})
	defer cl.Close()
	body := make([]byte, 1024)
	ext := map[string]string{"a": "g", "b": "BenchTopic", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000", "h": "0", "i": "UNIQ_KEY\x01ABCDEF\x02WAIT\x01true\x02"}
	b.SetBytes(1024)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := cl.Invoke(context.Background(), s.Addr(), NewRequest(SendMessageV2, ext, body)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestInOrderCodesKeepArrivalOrder: oneway updates followed by a query on the same connection
// (how the Go client applies a consumer-offset reset) are served in the order sent even when the
// update's handler is slow, while other codes on that connection are not held up by them.
func TestInOrderCodesKeepArrivalOrder(t *testing.T) {
	var mu sync.Mutex
	stored := map[string]string{}
	gate := make(chan struct{}) // the first update is held until a heartbeat was answered
	var gateOnce sync.Once
	s := startServer(t, func(s *Server) {
		s.HandleInOrder(UpdateConsumerOffset, func(_ *Conn, req *Command) *Command {
			<-gate
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			stored[req.Ext("q")] = req.Ext("v")
			mu.Unlock()
			return req.NewResponse(Success, "")
		})
		s.HandleInOrder(QueryConsumerOffset, func(_ *Conn, req *Command) *Command {
			resp := req.NewResponse(Success, "")
			mu.Lock()
			resp.SetExt("v", stored[req.Ext("q")])
			mu.Unlock()
			return resp
		})
		s.Handle(HeartBeat, echo)
	})
	cl := NewClient(ClientConfig{})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 5 {
		q, v := strconv.Itoa(i), strconv.Itoa(100+i)
		for j := range 3 {
			if err := cl.InvokeOneway(ctx, s.Addr(), NewRequest(UpdateConsumerOffset, map[string]string{"q": q, "v": v + strconv.Itoa(j)}, nil)); err != nil {
				t.Fatal(err)
			}
		}
		// Another code on the connection is answered while the updates wait (the first round's
		// updates cannot finish before this answer).
		if resp, err := cl.Invoke(ctx, s.Addr(), NewRequest(HeartBeat, map[string]string{"v": "hb"}, nil)); err != nil || resp.Ext("echo") != "hb" {
			t.Fatalf("heartbeat behind in-order updates: %v %+v", err, resp)
		}
		gateOnce.Do(func() { close(gate) })
		resp, err := cl.Invoke(ctx, s.Addr(), NewRequest(QueryConsumerOffset, map[string]string{"q": q}, nil))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := resp.Ext("v"), v+"2"; got != want {
			t.Fatalf("query after three oneway updates read %q, want the last update %q", got, want)
		}
	}
}

func TestRequestsCarryTheirArrivalOnTheConnection(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]uint64{}
	s := startServer(t, func(s *Server) {
		s.Handle(HeartBeat, func(_ *Conn, req *Command) *Command {
			mu.Lock()
			seen[req.Ext("v")] = req.Arrival()
			mu.Unlock()
			return req.NewResponse(Success, "")
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, c := range []string{"a", "b"} { // two connections, each counted from 1
		cl := NewClient(ClientConfig{})
		for i := 1; i <= 3; i++ {
			if _, err := cl.Invoke(ctx, s.Addr(), NewRequest(HeartBeat, map[string]string{"v": c + strconv.Itoa(i)}, nil)); err != nil {
				t.Fatal(err)
			}
		}
		cl.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	for _, c := range []string{"a", "b"} {
		for i := 1; i <= 3; i++ {
			if got := seen[c+strconv.Itoa(i)]; got != uint64(i) {
				t.Errorf("request %s%d arrived as %d, want %d", c, i, got, i)
			}
		}
	}
	if got := NewRequest(HeartBeat, nil, nil).Arrival(); got != 0 {
		t.Errorf("a request built locally has arrival %d, want 0", got)
	}
}
