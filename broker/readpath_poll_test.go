package broker

import (
	"context"
	"testing"
	"time"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// serveLoopback serves handlers on a loopback remoting server and returns a function that
// invokes one request on it (the parked answers need a real connection); both close when the
// test ends.
func serveLoopback(t *testing.T, handlers map[int32]remoting.Handler) func(req *remoting.Command) (*remoting.Command, error) {
	t.Helper()
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"})
	for code, h := range handlers {
		srv.Handle(code, h)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	c := remoting.NewClient(remoting.ClientConfig{DialTimeout: 3 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return func(req *remoting.Command) (*remoting.Command, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.Invoke(ctx, srv.Addr(), req)
	}
}

// TestPullerLongPolling: a pull that finds nothing waits in long polling and is answered by
// the message that arrives (the store's dispatch notifies the holder), or with
// PULL_NOT_FOUND when its suspend time ends.
func TestPullerLongPolling(t *testing.T) {
	f := newPullFixture(t)
	invoke := serveLoopback(t, map[int32]remoting.Handler{remoting.PullMessage: f.pl.handlePull})
	stop := make(chan struct{})
	defer close(stop)
	go f.pl.longPoll.Run(stop)

	parked := func(off int64, suspendMillis int64) *remoting.Command {
		h := protocol.PullMessageRequestHeader{ConsumerGroup: "G", Topic: "T", QueueOffset: off, MaxMsgNums: 32,
			SysFlag: protocol.PullSubscription | protocol.PullSuspend, Subscription: "*", ExpressionType: protocol.ExpressionTag,
			SuspendTimeoutMillis: suspendMillis}
		return remoting.NewRequest(remoting.PullMessage, h.ToExt(), nil)
	}
	done := make(chan *remoting.Command, 1)
	go func() {
		resp, err := invoke(parked(0, 5000))
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	waitFor(t, 5*time.Second, "the pull is parked", func() bool { return f.pl.longPoll.Len() == 1 })
	f.put("T", 0, tagged("a", ""))
	f.pl.longPoll.Notify("T", 0, 0, 0)
	resp := <-done
	if resp == nil || resp.Code != remoting.Success || resp.Ext("nextBeginOffset") != "1" {
		t.Fatalf("woken pull: %+v", resp)
	}

	start := time.Now()
	resp, err := invoke(parked(1, 200))
	if err != nil || resp.Code != remoting.PullNotFound {
		t.Fatalf("expired pull: %+v, %v", resp, err)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Fatalf("answered after %v, before its suspend time", waited)
	}
}

// TestPopServiceLongPolling: a POP with a pollTime that finds nothing is answered by the
// message that arrives while it polls, or with PULL_NOT_FOUND when its pollTime ends.
func TestPopServiceLongPolling(t *testing.T) {
	f := newPopFixture(t)
	invoke := serveLoopback(t, map[int32]remoting.Handler{remoting.PopMessage: f.s.handlePopMessage})
	done := make(chan *remoting.Command, 1)
	go func() {
		resp, err := invoke(popReq(map[string]string{"pollTime": "5000"}))
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	time.Sleep(2 * popPollInterval)
	f.put("T", 0, tagged("a", ""))
	resp := <-done
	if resp == nil || resp.Code != remoting.Success {
		t.Fatalf("woken POP: %+v", resp)
	}
	if msgs, err := message.DecodeRecords(resp.Body); err != nil || len(msgs) != 1 {
		t.Fatalf("woken POP: %d messages, %v", len(msgs), err)
	}

	start := time.Now()
	resp, err := invoke(popReq(map[string]string{"pollTime": "300"}))
	if err != nil || resp.Code != remoting.PullNotFound {
		t.Fatalf("expired POP: %+v, %v", resp, err)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("answered after %v, before its pollTime", waited)
	}
}
