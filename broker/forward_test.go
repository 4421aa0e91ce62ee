package broker

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/config"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// fwdFixture is a follower's forwarder between a client and a leader, all on loopback: the
// leader's server also answers the name-server route query that tells the follower where the
// leader is (routeTo, by default the leader itself).
type fwdFixture struct {
	f       *forwarder
	pl      *sendTestPlace
	leader  string
	lookups atomic.Int32
	serve   func(f *forwarder, conn *remoting.Conn, req *remoting.Command) *remoting.Command
	// follower is the address the follower serves on while invoke runs (its own address, which
	// a route naming it must not be taken for the leader's).
	follower atomic.Pointer[string]

	mu      sync.Mutex
	routeTo string
	seen    []*remoting.Command                           // what the leader received
	answer  func(req *remoting.Command) *remoting.Command // the leader's answer
}

// routeSelf is a route naming the follower itself as the master (a stale route).
const routeSelf = "follower"

// newFwdFixture starts the leader; the follower (started by invoke) serves SEND_MESSAGE and
// QUERY_CONSUMER_OFFSET with serve (nil from it is answered with the remark "nil").
func newFwdFixture(t *testing.T, stopped bool, serve func(f *forwarder, conn *remoting.Conn, req *remoting.Command) *remoting.Command) *fwdFixture {
	t.Helper()
	x := &fwdFixture{pl: &sendTestPlace{forwards: true, leader: "n0", self: "n1", remark: "not the leader"}, serve: serve}
	x.answer = func(req *remoting.Command) *remoting.Command {
		resp := req.NewResponse(remoting.Success, "")
		resp.SetExt("msgId", "M1")
		resp.Body = []byte("body")
		return resp
	}
	leader := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"})
	leader.Handle(remoting.GetRouteInfoByTopic, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		x.lookups.Add(1)
		x.mu.Lock()
		to := x.routeTo
		x.mu.Unlock()
		if to == routeSelf {
			to = *x.follower.Load()
		}
		rd := protocol.TopicRouteData{BrokerDatas: []*protocol.BrokerData{
			{BrokerName: "other", BrokerAddrs: map[int64]string{0: "127.0.0.1:1"}},
			{BrokerName: req.Ext("topic"), BrokerAddrs: map[int64]string{0: to}},
		}}
		body, err := protocol.Encode(rd)
		if err != nil {
			t.Error(err)
		}
		resp := req.NewResponse(remoting.Success, "")
		resp.Body = body
		return resp
	})
	for _, code := range []int32{remoting.SendMessage, remoting.QueryConsumerOffset} {
		leader.Handle(code, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
			x.mu.Lock()
			x.seen = append(x.seen, req)
			answer := x.answer
			x.mu.Unlock()
			return answer(req)
		})
	}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = leader.Close() })
	x.leader, x.routeTo = leader.Addr(), leader.Addr()

	cfg := config.NewBroker()
	cfg.BrokerName, cfg.NamesrvAddr = "b1", x.leader
	stop := make(chan struct{})
	if stopped { // forwardRetrying gives up after its first attempt
		close(stop)
	}
	client := remoting.NewClient(remoting.ClientConfig{DialTimeout: time.Second})
	ns := remoting.NewClient(remoting.ClientConfig{DialTimeout: time.Second})
	t.Cleanup(func() { _ = client.Close(); _ = ns.Close() })
	x.f = &forwarder{place: x.pl, client: client, nsClient: ns, cfg: cfg, self: func() string { return *x.follower.Load() }, stop: stop, logger: hclog.NewNullLogger()}
	return x
}

// setRoute makes the name-server route name addr as the master.
func (x *fwdFixture) setRoute(addr string) {
	x.mu.Lock()
	x.routeTo = addr
	x.mu.Unlock()
}

// setAnswer sets how the leader answers.
func (x *fwdFixture) setAnswer(answer func(req *remoting.Command) *remoting.Command) {
	x.mu.Lock()
	x.answer = answer
	x.mu.Unlock()
}

// invoke sends a request with ext to the follower and returns the answer and the client's own
// address (the born host the leader should see). The follower starts here, after the test set
// the place up, so its goroutines see what the test wrote.
func (x *fwdFixture) invoke(t *testing.T, code int32, ext map[string]string) (*remoting.Command, string) {
	t.Helper()
	follower := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"})
	for _, code := range []int32{remoting.SendMessage, remoting.QueryConsumerOffset} {
		follower.Handle(code, func(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
			if resp := x.serve(x.f, conn, req); resp != nil {
				return resp
			}
			return req.NewResponse(remoting.SystemError, "nil")
		})
	}
	if err := follower.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = follower.Close() }()
	addr := follower.Addr()
	x.follower.Store(&addr)
	c := remoting.NewClient(remoting.ClientConfig{DialTimeout: time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := c.Conn(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := conn.Invoke(ctx, remoting.NewRequest(code, ext, []byte("payload")))
	if err != nil {
		t.Fatal(err)
	}
	return resp, conn.LocalAddr()
}

func (x *fwdFixture) leaderSaw() []*remoting.Command {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]*remoting.Command(nil), x.seen...)
}

// serveWrite and serveRead are how a follower's handler forwards a write and a read.
var (
	serveWrite = (*forwarder).forwardWrite
	serveRead  = (*forwarder).forwardRead
)

// A write reaching a follower is relayed to the leader the name servers name, marked as
// forwarded with the client's address as born host, and its answer comes back with the
// leader's address; the address is looked up once while the leader stays the same.
func TestForwarderRelaysWriteToLeader(t *testing.T) {
	x := newFwdFixture(t, false, serveWrite)
	for i := range 2 {
		resp, client := x.invoke(t, remoting.SendMessage, map[string]string{"topic": "T"})
		if resp.Code != remoting.Success || resp.Ext("msgId") != "M1" || string(resp.Body) != "body" || resp.Ext(protocol.ExtLeaderAddr) != x.leader {
			t.Fatalf("send %d: %d %q %v", i, resp.Code, resp.Remark, resp.ExtFields)
		}
		got := x.leaderSaw()[i]
		if got.Ext(extForwarded) != "n1" || got.Ext(extBornHost) != client || got.Ext("topic") != "T" || string(got.Body) != "payload" {
			t.Fatalf("the leader received %v %q", got.ExtFields, got.Body)
		}
	}
	if n := x.lookups.Load(); n != 1 {
		t.Fatalf("%d route lookups, want 1 (cached)", n)
	}
}

// Nothing is forwarded twice, by a node that does not forward, or by the leader itself.
func TestForwarderDeclines(t *testing.T) {
	cases := []struct {
		name  string
		setup func(x *fwdFixture)
		ext   map[string]string
	}{
		{"already forwarded", nil, map[string]string{extForwarded: "n2"}},
		{"classic node", func(x *fwdFixture) { x.pl.forwards = false }, nil},
		{"this node leads", func(x *fwdFixture) { x.pl.decidesNow = true }, nil},
		{"no leader known", func(x *fwdFixture) { x.pl.leader = "" }, nil},
		{"the route names this node", func(x *fwdFixture) { x.setRoute(routeSelf) }, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := newFwdFixture(t, true, serveWrite)
			if c.setup != nil {
				c.setup(x)
			}
			resp, _ := x.invoke(t, remoting.SendMessage, c.ext)
			if resp.Remark != "nil" || len(x.leaderSaw()) != 0 {
				t.Fatalf("answered %d %q, leader saw %d requests", resp.Code, resp.Remark, len(x.leaderSaw()))
			}
		})
	}
}

// A SERVICE_NOT_AVAILABLE from the leader is relayed as is (without the leader's address) and
// the address is looked up again, unless it is a final refusal; reads are not relayed then.
func TestForwarderLeaderRefusals(t *testing.T) {
	x := newFwdFixture(t, true, serveWrite)
	x.setAnswer(func(req *remoting.Command) *remoting.Command {
		return req.NewResponse(remoting.ServiceNotAvailable, "not the leader any more")
	})
	resp, _ := x.invoke(t, remoting.SendMessage, nil)
	if resp.Code != remoting.ServiceNotAvailable || resp.Ext(protocol.ExtLeaderAddr) != "" {
		t.Fatalf("relayed %d %q %v", resp.Code, resp.Remark, resp.ExtFields)
	}
	x.invoke(t, remoting.SendMessage, nil)
	if n := x.lookups.Load(); n != 2 {
		t.Fatalf("%d lookups, want 2 (the address forgotten after the refusal)", n)
	}
	x.setAnswer(func(req *remoting.Command) *remoting.Command {
		resp := req.NewResponse(remoting.ServiceNotAvailable, "disk full")
		resp.SetExt(extRefusal, refusalDiskFull)
		return resp
	})
	resp, _ = x.invoke(t, remoting.SendMessage, nil)
	if !refusedForGood(resp) || resp.Ext(protocol.ExtLeaderAddr) != x.leader {
		t.Fatalf("final refusal relayed as %d %q %v", resp.Code, resp.Remark, resp.ExtFields)
	}

	r := newFwdFixture(t, true, serveRead)
	r.setAnswer(func(req *remoting.Command) *remoting.Command {
		return req.NewResponse(remoting.ServiceNotAvailable, "no")
	})
	if resp, _ := r.invoke(t, remoting.QueryConsumerOffset, nil); resp.Remark != "nil" {
		t.Fatalf("read refused by the leader relayed as %d %q", resp.Code, resp.Remark)
	}
}

// A leader that cannot be reached: a write is answered SERVICE_NOT_AVAILABLE (nothing left this
// node), a read is left to the caller.
func TestForwarderUnreachableLeader(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	x := newFwdFixture(t, true, serveWrite)
	x.setRoute(dead)
	resp, _ := x.invoke(t, remoting.SendMessage, nil)
	if resp.Code != remoting.ServiceNotAvailable || resp.Remark == "nil" {
		t.Fatalf("write: %d %q", resp.Code, resp.Remark)
	}
	r := newFwdFixture(t, true, serveRead)
	r.setRoute(dead)
	if resp, _ := r.invoke(t, remoting.QueryConsumerOffset, nil); resp.Remark != "nil" {
		t.Fatalf("read: %d %q", resp.Code, resp.Remark)
	}
}

// forwardOrRefuse and forwardUnproposed as the place changes between requests: forwardOrRefuse
// leaves a writable node's request to it, relays the leader's answer on a follower, or answers
// SERVICE_NOT_AVAILABLE with the place's remark when no leader takes it; forwardUnproposed gives
// up while this node still leads (here at once: the forwarder is stopped) and forwards once it
// stepped down.
func TestForwarderGates(t *testing.T) {
	type step struct {
		change func(p *sendTestPlace)
		code   int32
		remark string // "nil": the forwarder returned nil
	}
	gates := []struct {
		name  string
		serve func(f *forwarder, conn *remoting.Conn, req *remoting.Command) *remoting.Command
		steps []step
	}{
		{"forwardOrRefuse", (*forwarder).forwardOrRefuse, []step{
			{func(*sendTestPlace) {}, remoting.Success, ""},
			{func(p *sendTestPlace) { p.leader = "" }, remoting.ServiceNotAvailable, "not the leader"},
			{func(p *sendTestPlace) { p.writableOK = true }, remoting.SystemError, "nil"},
		}},
		{"forwardUnproposed", (*forwarder).forwardUnproposed, []step{
			{func(p *sendTestPlace) { p.decidesNow = true }, remoting.SystemError, "nil"},
			{func(p *sendTestPlace) { p.decidesNow = false }, remoting.Success, ""},
		}},
	}
	for _, g := range gates {
		x := newFwdFixture(t, true, g.serve)
		for i, st := range g.steps {
			st.change(x.pl)
			if resp, _ := x.invoke(t, remoting.SendMessage, nil); resp.Code != st.code || resp.Remark != st.remark {
				t.Errorf("%s step %d: %d %q, want %d %q", g.name, i, resp.Code, resp.Remark, st.code, st.remark)
			}
		}
	}
}

// bornHost is the forwarding follower's client for a forwarded write, the peer otherwise.
func TestBornHostOfForwardedWrite(t *testing.T) {
	cases := []struct {
		ext  map[string]string
		want netip.AddrPort
	}{
		{map[string]string{extForwarded: "n1", extBornHost: "10.0.0.7:4000"}, netip.MustParseAddrPort("10.0.0.7:4000")},
		{map[string]string{extForwarded: "n1", extBornHost: "[::ffff:10.0.0.7]:4000"}, netip.MustParseAddrPort("10.0.0.7:4000")},
		{map[string]string{extForwarded: "n1", extBornHost: "garbage"}, netip.AddrPortFrom(netip.IPv4Unspecified(), 0)},
	}
	for _, c := range cases {
		if got := bornHost(nil, remoting.NewRequest(remoting.SendMessage, c.ext, nil)); got != c.want {
			t.Errorf("%v: %v, want %v", c.ext, got, c.want)
		}
	}
}
