package proxy

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/protocol"
	"rocketraft/proxy/rmqpb"
	"rocketraft/remoting"
)

// fakeCluster is a name server and brokers on loopback, enough for the send path: the name
// server answers every route with the current master; each broker answers sends with answer.
type fakeCluster struct {
	t      *testing.T
	ns     *remoting.Server
	mu     sync.Mutex
	master string
}

func (c *fakeCluster) setMaster(addr string) {
	c.mu.Lock()
	c.master = addr
	c.mu.Unlock()
}

func startFakeCluster(t *testing.T) *fakeCluster {
	c := &fakeCluster{t: t}
	c.ns = remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"})
	c.ns.Handle(remoting.GetRouteInfoByTopic, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		c.mu.Lock()
		master := c.master
		c.mu.Unlock()
		r := &protocol.TopicRouteData{
			QueueDatas:  []*protocol.QueueData{{BrokerName: "g", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}},
			BrokerDatas: []*protocol.BrokerData{{Cluster: "c", BrokerName: "g", BrokerAddrs: map[int64]string{0: master}}},
		}
		body, err := protocol.Encode(r)
		if err != nil {
			t.Error(err)
		}
		resp := req.NewResponse(remoting.Success, "")
		resp.Body = body
		return resp
	})
	if err := c.ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.ns.Close() })
	return c
}

// startSendBroker serves sends with answer and counts them.
func startSendBroker(t *testing.T, sends *atomic.Int32, answer func(conn *remoting.Conn, req *remoting.Command) *remoting.Command) *remoting.Server {
	s := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"})
	s.Handle(remoting.SendMessageV2, func(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		sends.Add(1)
		return answer(conn, req)
	})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newTestMessaging(t *testing.T, ns string) *messaging {
	cfg := DefaultConfig()
	cfg.NamesrvAddr = ns
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var leaders *leaderBook
	cl := remoting.NewClient(remoting.ClientConfig{OnConnClose: func(addr string) { leaders.lost(addr) }})
	t.Cleanup(func() { _ = cl.Close() })
	leaders = newLeaderBook(&cfg, cl, hclog.NewNullLogger())
	m := &messaging{cfg: &cfg, cl: cl, log: hclog.NewNullLogger(), leaders: leaders}
	m.routes = newRouteCache(&cfg, cl, leaders)
	return m
}

func testMessage(id string) *rmqpb.Message {
	return &rmqpb.Message{Topic: &rmqpb.Resource{Name: "T"}, Body: []byte("b"),
		SystemProperties: &rmqpb.SystemProperties{MessageId: id, MessageType: rmqpb.MessageType_NORMAL}}
}

func ok0(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	resp := req.NewResponse(remoting.Success, "")
	resp.SetExt("queueOffset", "7")
	return resp
}

// TestSendRetriesOnceAtNewMaster: a master that refuses a send as not the leader (nothing
// stored) gets it no more; the proxy asks the name servers and sends it, once, to the master they
// name then.
func TestSendRetriesOnceAtNewMaster(t *testing.T) {
	c := startFakeCluster(t)
	var oldSends, newSends atomic.Int32
	var switched sync.Once
	var next *remoting.Server
	old := startSendBroker(t, &oldSends, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		switched.Do(func() { c.setMaster(next.Addr()) }) // the name servers learn the new leader
		return req.NewResponse(remoting.ServiceNotAvailable, "not the Raft leader")
	})
	next = startSendBroker(t, &newSends, ok0)
	c.setMaster(old.Addr())
	m := newTestMessaging(t, c.ns.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e := m.send(ctx, testMessage("ID1"))
	if e.GetStatus().GetCode() != rmqpb.Code_OK || e.GetOffset() != 7 {
		t.Fatalf("send: %v offset %d", e.GetStatus(), e.GetOffset())
	}
	if oldSends.Load() != 1 || newSends.Load() != 1 {
		t.Fatalf("sends: %d to the old master, %d to the new one; want 1 and 1", oldSends.Load(), newSends.Load())
	}
}

// TestSendOutcomeUnknownIsNotRetried: a master whose connection breaks after it took the send
// may have stored it: the proxy answers an error the client retries (PROXY_TIMEOUT) and sends it
// nowhere else; the next send goes to the new master the name servers name.
func TestSendOutcomeUnknownIsNotRetried(t *testing.T) {
	c := startFakeCluster(t)
	var oldSends, newSends atomic.Int32
	var next *remoting.Server
	old := startSendBroker(t, &oldSends, func(conn *remoting.Conn, _ *remoting.Command) *remoting.Command {
		c.setMaster(next.Addr())
		_ = conn.Close() // dies with the send in hand
		return nil
	})
	next = startSendBroker(t, &newSends, ok0)
	c.setMaster(old.Addr())
	m := newTestMessaging(t, c.ns.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e := m.send(ctx, testMessage("ID2"))
	if e.GetStatus().GetCode() != rmqpb.Code_PROXY_TIMEOUT {
		t.Fatalf("send whose connection broke: %v, want PROXY_TIMEOUT", e.GetStatus())
	}
	if oldSends.Load() != 1 || newSends.Load() != 0 {
		t.Fatalf("sends: %d to the old master, %d to the new one; want 1 and 0 (no retry of an unknown outcome)", oldSends.Load(), newSends.Load())
	}
	e = m.send(ctx, testMessage("ID3"))
	if e.GetStatus().GetCode() != rmqpb.Code_OK || newSends.Load() != 1 {
		t.Fatalf("next send: %v, %d to the new master", e.GetStatus(), newSends.Load())
	}
}

// TestSendLearnsLeaderFromForwardingAnswer: a follower (published as stand-in master) that
// forwarded a send names the leader in its answer; the next send goes to the leader directly.
func TestSendLearnsLeaderFromForwardingAnswer(t *testing.T) {
	c := startFakeCluster(t)
	var followerSends, leaderSends atomic.Int32
	leader := startSendBroker(t, &leaderSends, ok0)
	follower := startSendBroker(t, &followerSends, func(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		resp := ok0(conn, req)
		resp.SetExt(protocol.ExtLeaderAddr, leader.Addr())
		return resp
	})
	c.setMaster(follower.Addr())
	m := newTestMessaging(t, c.ns.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, id := range []string{"ID4", "ID5"} {
		if e := m.send(ctx, testMessage(id)); e.GetStatus().GetCode() != rmqpb.Code_OK {
			t.Fatalf("send %s: %v", id, e.GetStatus())
		}
	}
	if followerSends.Load() != 1 || leaderSends.Load() != 1 {
		t.Fatalf("sends: %d to the follower, %d to the leader; want 1 and 1", followerSends.Load(), leaderSends.Load())
	}
}
