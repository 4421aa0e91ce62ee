package broker

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/config"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// nsCalls records the requests a registrar sent, per name server, and answers each with
// answer(addr) (nil answer: success).
type nsCalls struct {
	mu     sync.Mutex
	reqs   map[string][]*remoting.Command
	n      atomic.Int32
	answer func(addr string) (*remoting.Command, error)
}

// invoke is the registrar's name-server call: recorded, then answered.
func (c *nsCalls) invoke(_ context.Context, addr string, req *remoting.Command) (*remoting.Command, error) {
	c.mu.Lock()
	if c.reqs == nil {
		c.reqs = map[string][]*remoting.Command{}
	}
	c.reqs[addr] = append(c.reqs[addr], req)
	c.mu.Unlock()
	c.n.Add(1)
	if c.answer != nil {
		return c.answer(addr)
	}
	return &remoting.Command{Code: remoting.Success}, nil
}

// sent is what addr received so far.
func (c *nsCalls) sent(addr string) []*remoting.Command {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reqs[addr])
}

// testRegistrar is a registrar over an empty topic table in a temporary directory, a node that
// registers (id 0, address 10.0.0.1:10911), talking to calls (nil: every call succeeds).
func testRegistrar(t *testing.T, cfg *config.Broker, calls *nsCalls) *registrar {
	t.Helper()
	topics, _, _ := emptyMetaTables(t)
	if calls == nil {
		calls = &nsCalls{}
	}
	r := newRegistrar()
	r.registrarDeps = registrarDeps{cfg: cfg, logger: hclog.NewNullLogger(), topics: topics,
		place: &placeFake{registersNow: true}, invoke: calls.invoke,
		addr: func() string { return "10.0.0.1:10911" }, perm: func() int32 { return 6 },
		haAddr: func() string { return "10.0.0.1:10912" }, onAnswer: func(*remoting.Command) {},
		draining: func() bool { return false }}
	return r
}

// The coalescing gap: the metadata flush interval, or four times the previous registration when
// that is longer.
func TestRegistrarGap(t *testing.T) {
	cfg := config.NewBroker()
	cfg.MetadataFlushIntervalMs = 1000
	r := testRegistrar(t, cfg, nil)
	for _, c := range []struct {
		took, want time.Duration
	}{{0, time.Second}, {100 * time.Millisecond, time.Second}, {250 * time.Millisecond, time.Second}, {time.Second, 4 * time.Second}} {
		if got := r.gap(c.took); got != c.want {
			t.Errorf("gap after a %s registration = %s, want %s", c.took, got, c.want)
		}
	}
}

// Any number of triggers leave one wake-up pending; triggerNow also marks it urgent.
func TestRegistrarTriggersCoalesce(t *testing.T) {
	r := testRegistrar(t, config.NewBroker(), nil)
	for range 10 {
		r.trigger()
	}
	if len(r.now) != 1 || r.urgent.Load() {
		t.Fatalf("after 10 triggers: %d pending, urgent %v; want 1, false", len(r.now), r.urgent.Load())
	}
	r.triggerNow()
	if len(r.now) != 1 || !r.urgent.Load() {
		t.Fatalf("after triggerNow: %d pending, urgent %v; want 1, true", len(r.now), r.urgent.Load())
	}
}

// A broker whose permission lacks read or write registers every topic with that permission
// (how it is drained); a full permission leaves the topics' own.
func TestRegistrarBodyCarriesPermission(t *testing.T) {
	r := testRegistrar(t, config.NewBroker(), nil)
	tc := protocol.NewTopicConfig("T")
	tc.Perm = 6
	if _, err := r.topics.EnsureTopics([]*protocol.TopicConfig{tc}, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ perm, want int32 }{{6, 6}, {4, 4}, {2, 2}, {0, 0}} {
		r.perm = func() int32 { return c.perm }
		body, compressed := r.body()
		if compressed {
			t.Fatalf("perm %d: a one-topic table was compressed", c.perm)
		}
		var rb protocol.RegisterBrokerBody
		if err := protocol.Decode(body, &rb); err != nil {
			t.Fatal(err)
		}
		got := rb.TopicConfigSerializeWrapper.TopicConfigTable["T"]
		if got == nil || got.Perm != c.want {
			t.Errorf("broker perm %d: topic registered as %+v, want perm %d", c.perm, got, c.want)
		}
	}
	if tc := r.topics.Get("T"); tc == nil || tc.Perm != 6 {
		t.Errorf("the table itself changed: %+v", tc)
	}
}

// The REGISTER_BROKER header names the node as the place and the address funcs say.
func TestRegistrarIdentity(t *testing.T) {
	cfg := config.NewBroker()
	cfg.BrokerClusterName, cfg.BrokerName = "C1", "broker-a"
	r := testRegistrar(t, cfg, nil)
	r.place = &placeFake{registersNow: true, forwards: true, id: 2}
	h := r.identity()
	want := protocol.RegisterBrokerRequestHeader{BrokerName: "broker-a", BrokerAddr: "10.0.0.1:10911", ClusterName: "C1",
		HaServerAddr: "10.0.0.1:10912", BrokerID: 2, ForwardsWrites: true}
	if h != want {
		t.Fatalf("identity %+v, want %+v", h, want)
	}
}

// registerAll sends the same body to every name server, reports false when one of
// them fails or refuses, and hands each accepting answer to replication.
func TestRegistrarRegisterAll(t *testing.T) {
	cfg := config.NewBroker()
	cfg.NamesrvAddr = "127.0.0.1:1;127.0.0.1:2"
	var answers atomic.Int32
	cases := []struct {
		name    string
		answer  func(addr string) (*remoting.Command, error)
		ok      bool
		answers int32
	}{
		{"all accept", nil, true, 2},
		{"one unreachable", func(addr string) (*remoting.Command, error) {
			if addr == "127.0.0.1:2" {
				return nil, errors.New("connection refused")
			}
			return &remoting.Command{Code: remoting.Success}, nil
		}, false, 1},
		{"one refuses", func(addr string) (*remoting.Command, error) {
			if addr == "127.0.0.1:1" {
				return &remoting.Command{Code: remoting.SystemError, Remark: "no"}, nil
			}
			return &remoting.Command{Code: remoting.Success}, nil
		}, false, 1},
	}
	for _, c := range cases {
		calls := &nsCalls{answer: c.answer}
		r := testRegistrar(t, cfg, calls)
		answers.Store(0)
		r.onAnswer = func(*remoting.Command) { answers.Add(1) }
		if ok := r.registerAll(); ok != c.ok || answers.Load() != c.answers {
			t.Errorf("%s: registerAll = %v with %d answers handed on, want %v and %d", c.name, ok, answers.Load(), c.ok, c.answers)
		}
		for _, addr := range cfg.NamesrvAddrs() {
			reqs := calls.sent(addr)
			if len(reqs) != 1 || reqs[0].Code != remoting.RegisterBroker {
				t.Fatalf("%s: %s got %d requests, want one REGISTER_BROKER", c.name, addr, len(reqs))
			}
			req := reqs[0]
			if crc := strconv.FormatInt(int64(protocol.CRC32(req.Body)), 10); req.Ext("bodyCrc32") != crc {
				t.Errorf("%s: bodyCrc32 %q, want %q", c.name, req.Ext("bodyCrc32"), crc)
			}
			if req.Ext("brokerAddr") != "10.0.0.1:10911" {
				t.Errorf("%s: brokerAddr %q", c.name, req.Ext("brokerAddr"))
			}
		}
	}
	// The failure log collapses: the next success ends the run.
	r := testRegistrar(t, cfg, &nsCalls{answer: func(string) (*remoting.Command, error) { return nil, errors.New("down") }})
	r.registerAll()
	if len(r.log.byAddr) != 2 {
		t.Fatalf("failures recorded for %d name servers, want 2", len(r.log.byAddr))
	}
	r.invoke = (&nsCalls{}).invoke
	r.registerAll()
	if len(r.log.byAddr) != 0 {
		t.Fatalf("failures still recorded after a success: %v", r.log.byAddr)
	}
}

// unregisterAll sends UNREGISTER_BROKER with the node's identity to every name server, whatever
// they answer.
func TestRegistrarUnregisterAll(t *testing.T) {
	cfg := config.NewBroker()
	cfg.NamesrvAddr = "127.0.0.1:1;127.0.0.1:2"
	cfg.BrokerClusterName, cfg.BrokerName = "C1", "broker-a"
	calls := &nsCalls{answer: func(addr string) (*remoting.Command, error) {
		if addr == "127.0.0.1:1" {
			return nil, errors.New("down")
		}
		return &remoting.Command{Code: remoting.Success}, nil
	}}
	r := testRegistrar(t, cfg, calls)
	r.place = &placeFake{id: 1}
	r.unregisterAll()
	for _, addr := range cfg.NamesrvAddrs() {
		reqs := calls.sent(addr)
		if len(reqs) != 1 || reqs[0].Code != remoting.UnregisterBroker {
			t.Fatalf("%s got %d requests, want one UNREGISTER_BROKER", addr, len(reqs))
		}
		if e := reqs[0].ExtFields; e["brokerName"] != "broker-a" || e["clusterName"] != "C1" || e["brokerAddr"] != "10.0.0.1:10911" || e["brokerId"] != "1" {
			t.Errorf("%s: identity %v", addr, e)
		}
	}
}

// runRegistrar runs r's loop until the test ends.
func runRegistrar(t *testing.T, r *registrar) {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.run(stop)
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
}

// waitCalls waits until calls counted want requests; it fails the test after 5 s.
func waitCalls(t *testing.T, calls *nsCalls, want int32) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for calls.n.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d registrations, want %d", calls.n.Load(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// loopAfterChange runs a registrar whose coalescing gap is gap until it registered at start and
// once for a first topic change (at once: no change before it started a gap).
func loopAfterChange(t *testing.T, gap time.Duration) (*registrar, *nsCalls) {
	t.Helper()
	cfg := config.NewBroker()
	cfg.NamesrvAddr = "127.0.0.1:1"
	cfg.RegisterNameServerPeriod = 60_000
	cfg.MetadataFlushIntervalMs = gap.Milliseconds()
	calls := &nsCalls{}
	r := testRegistrar(t, cfg, calls)
	runRegistrar(t, r)
	waitCalls(t, calls, 1) // start-up
	r.trigger()
	waitCalls(t, calls, 2) // the first change: at once
	return r, calls
}

// A burst of changes during the gap after a triggered registration is registered once, at the
// gap's end.
func TestRegistrarLoopCoalescesBurst(t *testing.T) {
	r, calls := loopAfterChange(t, 300*time.Millisecond)
	for range 5 {
		r.trigger()
	}
	waitCalls(t, calls, 3) // the burst, after the gap
	time.Sleep(600 * time.Millisecond)
	if n := calls.n.Load(); n != 3 {
		t.Fatalf("a burst of 5 changes made %d registrations, want 1", n-2)
	}
}

// An urgent trigger ends a coalescing wait at once.
func TestRegistrarUrgentSkipsGap(t *testing.T) {
	r, calls := loopAfterChange(t, time.Minute)
	r.trigger() // waits a minute
	time.Sleep(100 * time.Millisecond)
	if n := calls.n.Load(); n != 2 {
		t.Fatalf("a change within the gap registered at once (%d registrations)", n)
	}
	r.triggerNow()
	waitCalls(t, calls, 3)
}

// Nothing is registered while the node has no role yet, nor while it drains for shutdown.
func TestRegistrarLoopHoldsBack(t *testing.T) {
	cfg := config.NewBroker()
	cfg.NamesrvAddr = "127.0.0.1:1"
	for _, c := range []struct {
		name      string
		registers bool
		draining  bool
	}{{"no role yet", false, false}, {"draining", true, true}} {
		calls := &nsCalls{}
		r := testRegistrar(t, cfg, calls)
		r.place = &placeFake{registersNow: c.registers}
		r.draining = func() bool { return c.draining }
		runRegistrar(t, r)
		r.triggerNow()
		time.Sleep(150 * time.Millisecond)
		if n := calls.n.Load(); n != 0 {
			t.Errorf("%s: %d registrations, want none", c.name, n)
		}
	}
}
