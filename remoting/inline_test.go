package remoting

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestInlineAndDeferred: requests a HandleInline predicate accepts are served on the read
// goroutine in arrival order and may be answered later, from another goroutine, through Defer
// (OnRequest reporting the time until the answer); requests it refuses go to workers, so one
// that blocks does not hold the connection up; a deferred answer that panics is answered
// SYSTEM_ERROR.
func TestInlineAndDeferred(t *testing.T) {
	const n = 100
	var mu sync.Mutex
	var order []int
	var deferred []*Deferred
	var reported []time.Duration
	allIn := make(chan struct{})
	release := make(chan struct{})
	s := NewServer(ServerConfig{Addr: "127.0.0.1:0", OnRequest: func(code, _ int32, d time.Duration) {
		if code == SendMessageV2 {
			mu.Lock()
			reported = append(reported, d)
			mu.Unlock()
		}
	}})
	s.HandleInline(SendMessageV2, func(conn *Conn, req *Command) *Command {
		if req.Ext("block") != "" {
			<-release // only ever on a worker: the predicate refuses it
			return req.NewResponse(Success, "unblocked")
		}
		seq, _ := strconv.Atoi(req.Ext("seq"))
		mu.Lock()
		defer mu.Unlock()
		order = append(order, seq)
		deferred = append(deferred, conn.Defer(req))
		if len(deferred) == n {
			close(allIn)
		}
		return nil
	}, func(req *Command) bool { return req.Ext("block") == "" })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	reqs := []*Command{sendV2(1000, map[string]string{"block": "1"})}
	for i := range n {
		reqs = append(reqs, sendV2(int32(i), map[string]string{"seq": strconv.Itoa(i)}))
	}
	nc := writeRaw(t, s.Addr(), reqs)
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	select {
	case <-allIn:
	case <-time.After(10 * time.Second):
		t.Fatal("inline requests were not served while a refused one blocked its worker")
	}
	time.Sleep(20 * time.Millisecond) // measurable time until the answers
	mu.Lock()
	for i, seq := range order {
		if seq != i {
			mu.Unlock()
			t.Fatalf("inline requests served in order %v, want arrival order", order)
		}
	}
	answers := deferred
	mu.Unlock()
	// Answer from other goroutines, last first; the 7th panics.
	var wg sync.WaitGroup
	for i := len(answers) - 1; i >= 0; i-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i].Answer(func() *Command {
				if i == 7 {
					panic("boom")
				}
				resp := NewRequest(0, map[string]string{"seq": strconv.Itoa(i)}, nil)
				resp.Code = Success
				return resp
			})
		}()
	}
	wg.Wait()
	close(release)

	r := bufio.NewReader(nc)
	seen := map[int32]bool{}
	for range n + 1 {
		frame, err := ReadFrame(r, DefaultMaxFrameSize)
		if err != nil {
			t.Fatalf("reading answers (%d so far): %v", len(seen), err)
		}
		resp, err := Decode(frame)
		if err != nil {
			t.Fatal(err)
		}
		if !resp.IsResponse() || seen[resp.Opaque] {
			t.Fatalf("answer %+v: not a response, or a second one for its opaque", resp)
		}
		seen[resp.Opaque] = true
		switch {
		case resp.Opaque == 1000:
			if resp.Remark != "unblocked" {
				t.Fatalf("blocked request answered %+v", resp)
			}
		case resp.Opaque == 7:
			if resp.Code != SystemError {
				t.Fatalf("panicking deferred answer: %+v, want SYSTEM_ERROR", resp)
			}
		default:
			if resp.Code != Success || resp.Ext("seq") != strconv.Itoa(int(resp.Opaque)) {
				t.Fatalf("answer %+v does not match its request", resp)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != n+1 {
		t.Fatalf("OnRequest saw %d sends, want %d", len(reported), n+1)
	}
	for _, d := range reported {
		if d < 20*time.Millisecond {
			t.Fatalf("OnRequest reported %v for a request answered after at least 20ms", d)
		}
	}
}

// A deferred answer never blocks its caller, even to a peer that stopped reading: the goroutine
// that answers a Raft entry's sends answers other connections too.
func TestDeferredAnswerToStuckPeerDoesNotBlock(t *testing.T) {
	const n = 1500 // more answers than the connection queues, whose bodies overfill the socket
	var mu sync.Mutex
	var deferred []*Deferred
	all := make(chan struct{})
	s := startServer(t, func(s *Server) {
		// Above the default pending bound (which would stop reading before n are deferred), to
		// overfill the write queue itself.
		s.cfg.MaxPendingRequests = 2 * n
		s.HandleInline(SendMessageV2, func(conn *Conn, req *Command) *Command {
			mu.Lock()
			defer mu.Unlock()
			deferred = append(deferred, conn.Defer(req))
			if len(deferred) == n {
				close(all)
			}
			return nil
		}, func(*Command) bool { return true })
	})
	reqs := make([]*Command, n)
	for i := range n {
		reqs[i] = sendV2(int32(i), nil)
	}
	nc := writeRaw(t, s.Addr(), reqs)
	select {
	case <-all:
	case <-time.After(10 * time.Second):
		t.Fatal("requests not served")
	}
	body := make([]byte, 64<<10)
	done := make(chan struct{})
	go func() { // the peer reads nothing meanwhile
		defer close(done)
		for _, d := range deferred {
			d.Answer(func() *Command {
				resp := NewRequest(0, nil, body)
				resp.Code = Success
				return resp
			})
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("answering a peer that does not read blocked the answering goroutine")
	}
	// The answers are not lost: the peer gets every one once it reads.
	_ = nc.SetReadDeadline(time.Now().Add(60 * time.Second)) // 98 MiB under -race on a loaded machine
	r := bufio.NewReaderSize(nc, 256<<10)
	for i := range n {
		if _, err := ReadFrame(r, DefaultMaxFrameSize); err != nil {
			t.Fatalf("answer %d of %d: %v", i+1, n, err)
		}
	}
}

// sendV2 is a SEND_MESSAGE_V2 request with the given opaque, as a peer would number it.
func sendV2(opaque int32, ext map[string]string) *Command {
	req := NewRequest(SendMessageV2, ext, nil)
	req.Opaque = opaque
	return req
}

// writeRaw connects to addr and writes reqs in one write, in order, so the server reads them in
// that order; the connection is closed when the test ends.
func writeRaw(t *testing.T, addr string, reqs []*Command) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	var frames []byte
	for _, req := range reqs {
		f, err := Encode(req)
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, f...)
	}
	if _, err := nc.Write(frames); err != nil {
		t.Fatal(err)
	}
	return nc
}

// panicResponder's Respond panics, as a buggy handler's completion might.
type panicResponder struct{}

func (panicResponder) Respond() *Command { panic("boom") }

// okResponder answers SUCCESS with a field.
type okResponder struct{ req *Command }

func (r okResponder) Respond() *Command {
	resp := r.req.NewResponse(Success, "")
	resp.AppendExt("k", "v")
	return resp
}

// AnswerWith answers a deferred request with what its Responder builds, and a panic there with
// SYSTEM_ERROR, as Answer does.
func TestDeferredAnswerWith(t *testing.T) {
	s := startServer(t, func(s *Server) {
		s.Handle(SendMessageV2, func(c *Conn, req *Command) *Command {
			d := c.Defer(req)
			if req.Ext("panic") != "" {
				go d.AnswerWith(panicResponder{})
			} else {
				go d.AnswerWith(okResponder{req})
			}
			return nil
		})
	})
	cl := NewClient(ClientConfig{})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, s.Addr(), NewRequest(SendMessageV2, nil, nil))
	if err != nil || resp.Code != Success || resp.Ext("k") != "v" {
		t.Fatalf("answer %+v, %v", resp, err)
	}
	resp, err = cl.Invoke(ctx, s.Addr(), NewRequest(SendMessageV2, map[string]string{"panic": "1"}, nil))
	if err != nil || resp.Code != SystemError || !strings.Contains(resp.Remark, "boom") {
		t.Fatalf("panicking responder answered %+v, %v", resp, err)
	}
}
