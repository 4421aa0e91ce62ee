package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"rocketraft/remoting"
)

func TestClassifySend(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		err  error
		want sendFailure
	}{
		{refused, failDeadAddress},
		{fmt.Errorf("send: %w", refused), failDeadAddress},
		{fmt.Errorf("write: %w", syscall.EPIPE), failDeadAddress},
		{remoting.ErrConnClosed, failDeadAddress},
		{errors.New("dial tcp 127.0.0.1:10911: connect: connection refused"), failDeadAddress},
		{errors.New("send failed: SERVICE_NOT_AVAILABLE (code 14) from broker-a: service not available now"), failDeadAddress},
		{errors.New("CODE: 14  DESC: service not available now: broker broker-a node n1 is a follower"), failDeadAddress},
		{errors.New("the topic=TopicTest route info not found"), failNoRoute},
		{fmt.Errorf("route: %w", errNoRoute), failNoRoute},
		{context.DeadlineExceeded, failOther},
		{errors.New("send failed: SYSTEM_BUSY (code 2)"), failOther},
	} {
		if got := classifySend(c.err); got != c.want {
			t.Errorf("classifySend(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

func TestRerouteBackoffIsBounded(t *testing.T) {
	var total time.Duration
	for a := 1; a <= DefaultRouteRetries; a++ {
		d := rerouteBackoff(a)
		if d < rerouteFirstBackoff || d > rerouteMaxBackoff {
			t.Fatalf("backoff %d = %s", a, d)
		}
		total += d
	}
	if total > 3*time.Second {
		t.Errorf("%d retries wait %s in all", DefaultRouteRetries, total)
	}
}

// A dead address renews the route of the generation that failed and the send is tried again; a
// failure that is not about the address is returned at once; retries are bounded.
func TestRetrier(t *testing.T) {
	var stopped atomic.Bool
	var retried atomic.Uint64
	var gen atomic.Uint64
	var renewed []uint64
	r := &retrier{max: 3, stopped: &stopped, retried: &retried, renew: func(g uint64) {
		renewed = append(renewed, g)
		gen.CompareAndSwap(g, g+1)
	}}
	refused := os.NewSyscallError("connect", syscall.ECONNREFUSED)

	calls := 0
	err := r.do(func() (uint64, error) {
		calls++
		if g := gen.Load(); g < 1 {
			return g, refused
		}
		return gen.Load(), nil
	})
	if err != nil || calls != 2 || retried.Load() != 1 || len(renewed) != 1 || renewed[0] != 0 {
		t.Fatalf("err %v calls %d retried %d renewed %v", err, calls, retried.Load(), renewed)
	}

	calls = 0
	err = r.do(func() (uint64, error) { calls++; return gen.Load(), errors.New("SYSTEM_BUSY") })
	if err == nil || calls != 1 {
		t.Fatalf("not retried: err %v calls %d", err, calls)
	}

	calls = 0
	err = r.do(func() (uint64, error) { calls++; return gen.Load(), refused })
	if !errors.Is(err, syscall.ECONNREFUSED) || calls != 4 || retried.Load() != 2 {
		t.Fatalf("bounded: err %v calls %d retried %d", err, calls, retried.Load())
	}

	stopped.Store(true)
	calls = 0
	_ = r.do(func() (uint64, error) { calls++; return gen.Load(), refused })
	if calls != 1 {
		t.Fatalf("retried after the run stopped: %d calls", calls)
	}
}

func TestGapMeter(t *testing.T) {
	var g gapMeter
	t0 := time.Unix(1000, 0)
	g.success(t0)
	g.success(t0.Add(10 * time.Millisecond))
	g.success(t0.Add(10*time.Millisecond + 100*time.Microsecond)) // within the resolution
	g.failure(t0.Add(20 * time.Millisecond))
	g.success(t0.Add(810 * time.Millisecond))
	g.success(t0.Add(820 * time.Millisecond))
	if got := g.Longest(t0.Add(900 * time.Millisecond)); got != 800*time.Millisecond {
		t.Fatalf("longest %s, want 800ms", got)
	}
	// Failing at the end: the gap runs to the end of the run.
	g.failure(t0.Add(830 * time.Millisecond))
	if got := g.Longest(t0.Add(2820 * time.Millisecond)); got != 2*time.Second {
		t.Fatalf("longest %s, want 2s", got)
	}
}

// A native producer whose route names a dead address fetches a fresh route from the name server
// and sends there (the route renewal runNativeProduce uses).
func TestNativeRoutesRecoverFromDeadAddress(t *testing.T) {
	tb := realBroker(t)
	topic := uniqTopic("T_reroute")
	cl := remoting.NewClient(remoting.ClientConfig{})
	defer cl.Close()
	ctx := context.Background()
	stale := []nativeQueue{{broker: "broker-gone", addr: deadAddr(t), id: 0, idStr: "0"}}
	fetches := 0
	routes := newNativeRoutes(stale, func() ([]nativeQueue, error) {
		fetches++
		qs, _, err := resolvePublishQueues(ctx, cl, []string{tb.nsAddr}, topic, 0, os.Stderr)
		return qs, err
	}, os.Stderr)
	cfg := ProduceConfig{Common: Common{Topic: topic}, Size: 8, Batch: 1, Group: "g", SendTimeout: 3 * time.Second}
	single, batch := sendTemplates(&cfg)
	s := &nativeSender{cfg: &cfg, body: make([]byte, 8), ids: newUniqIDs(), single: single, batch: batch}
	var stopped atomic.Bool
	var retried atomic.Uint64
	r := &retrier{max: DefaultRouteRetries, stopped: &stopped, retried: &retried, renew: routes.renew}
	var sentTo string
	err := r.do(func() (uint64, error) {
		qs, gen := routes.get()
		q := qs[0]
		req, err := s.request(q, 1)
		if err != nil {
			return gen, err
		}
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		resp, err := cl.Invoke(rctx, q.addr, req)
		sentTo = q.addr
		return gen, sendOutcome(resp, err, q)
	})
	if err != nil {
		t.Fatalf("send after a fresh route: %v", err)
	}
	if retried.Load() != 1 || fetches != 1 || strings.HasPrefix(sentTo, stale[0].addr) {
		t.Fatalf("retried %d fetches %d sent to %s", retried.Load(), fetches, sentTo)
	}
	if n := tb.waitStored(t, topic, 1); n != 1 {
		t.Fatalf("stored %d", n)
	}
}
