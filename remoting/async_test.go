package remoting

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// asyncOutcome is what one InvokeAsync callback received.
type asyncOutcome struct {
	resp *Command
	err  error
}

// InvokeAsync: every callback runs exactly once with its own answer, answers out of order over
// one connection, and a callback may send the next request (a closed loop, as the benchmark's
// async producer runs), and a panicking callback does not stop the connection.
func TestInvokeAsyncClosedLoop(t *testing.T) {
	s := startServer(t, func(s *Server) {
		s.Handle(PullMessage, func(conn *Conn, req *Command) *Command {
			d, _ := strconv.Atoi(req.Ext("v"))
			time.Sleep(time.Duration(d%7) * time.Millisecond)
			return echo(conn, req)
		})
	})
	cl := NewClient(ClientConfig{})
	defer cl.Close()
	const slots, rounds = 32, 20
	var (
		wg      sync.WaitGroup
		calls   atomic.Int64
		mu      sync.Mutex
		bad     []string
		panicky atomic.Bool
	)
	var send func(slot, round int)
	send = func(slot, round int) {
		v := strconv.Itoa(slot*1000 + round)
		conn := cl.Open(s.Addr())
		if conn == nil {
			mu.Lock()
			bad = append(bad, "no open connection inside a callback")
			mu.Unlock()
			wg.Done()
			return
		}
		err := conn.InvokeAsync(NewRequest(PullMessage, map[string]string{"v": v}, nil), time.Now().Add(5*time.Second), func(resp *Command, err error) {
			calls.Add(1)
			if err != nil || resp.Ext("echo") != v {
				mu.Lock()
				bad = append(bad, "slot "+strconv.Itoa(slot)+": got "+resp.Ext("echo")+" want "+v)
				mu.Unlock()
			}
			if slot == 3 && round == 5 && panicky.CompareAndSwap(false, true) {
				defer send(slot, round+1) // the loop goes on despite the panic
				panic("callback bug")
			}
			if round+1 < rounds {
				send(slot, round+1)
				return
			}
			wg.Done()
		})
		if err != nil {
			t.Error(err)
			wg.Done()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cl.Conn(ctx, s.Addr()); err != nil {
		t.Fatal(err)
	}
	wg.Add(slots)
	for i := 0; i < slots; i++ {
		send(i, 0)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("%d of %d callbacks after 20 s", calls.Load(), slots*rounds)
	}
	if len(bad) > 0 || calls.Load() != slots*rounds {
		t.Fatalf("%d callbacks (want %d); wrong: %v", calls.Load(), slots*rounds, bad)
	}
}

// A callback whose answer does not come in time gets DeadlineExceeded, about asyncSweep after
// its deadline, and exactly once: the late answer is dropped. Calls still pending when the
// connection dies get ErrConnClosed.
func TestInvokeAsyncDeadlineAndClose(t *testing.T) {
	release := make(chan struct{})
	s := startServer(t, func(s *Server) {
		s.Handle(PullMessage, func(conn *Conn, req *Command) *Command {
			<-release
			return echo(conn, req)
		})
		s.Handle(HeartBeat, func(conn *Conn, req *Command) *Command {
			_ = conn.Close()
			return nil
		})
	})
	defer close(release)
	cl := NewClient(ClientConfig{})
	defer cl.Close()
	outcomes := make(chan asyncOutcome, 4)
	record := func(resp *Command, err error) { outcomes <- asyncOutcome{resp, err} }
	ctx := context.Background()
	start := time.Now()
	if err := cl.InvokeAsync(ctx, s.Addr(), NewRequest(PullMessage, nil, nil), start.Add(100*time.Millisecond), record); err != nil {
		t.Fatal(err)
	}
	o := <-outcomes
	if waited := time.Since(start); !errors.Is(o.err, context.DeadlineExceeded) || waited < 100*time.Millisecond || waited > 2*time.Second {
		t.Fatalf("after %v: %+v", waited, o)
	}
	// one more pending call, then a request that makes the server drop the connection
	if err := cl.InvokeAsync(ctx, s.Addr(), NewRequest(PullMessage, nil, nil), time.Now().Add(time.Minute), record); err != nil {
		t.Fatal(err)
	}
	if err := cl.InvokeAsync(ctx, s.Addr(), NewRequest(HeartBeat, nil, nil), time.Now().Add(time.Minute), record); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case o := <-outcomes:
			if !errors.Is(o.err, ErrConnClosed) {
				t.Fatalf("pending call when the connection died: %+v", o)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a pending callback was not called when the connection died")
		}
	}
	select {
	case o := <-outcomes:
		t.Fatalf("a callback ran twice: %+v", o)
	case <-time.After(200 * time.Millisecond):
	}
}
