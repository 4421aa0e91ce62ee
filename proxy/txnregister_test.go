package proxy

import (
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/proxy/rmqpb"
	"rocketraft/remoting"
)

// fakeBroker is one remoting server acting as the name server and as the master of group b1,
// recording the proxy's registrations.
type fakeBroker struct {
	srv    *remoting.Server
	mu     sync.Mutex
	hbs    []protocol.HeartbeatData
	conn   *remoting.Conn // of the last HEART_BEAT
	unregs []string
}

func startFakeBroker(t *testing.T) *fakeBroker {
	t.Helper()
	f := &fakeBroker{srv: remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"})}
	f.srv.Handle(remoting.GetRouteInfoByTopic, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		resp := req.NewResponse(remoting.Success, "")
		resp.Body = protocol.MustEncode(protocol.TopicRouteData{
			QueueDatas:  []*protocol.QueueData{{BrokerName: "b1", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}},
			BrokerDatas: []*protocol.BrokerData{{BrokerName: "b1", BrokerAddrs: map[int64]string{protocol.MasterID: f.srv.Addr()}}},
		})
		return resp
	})
	f.srv.Handle(remoting.HeartBeat, func(c *remoting.Conn, req *remoting.Command) *remoting.Command {
		var hb protocol.HeartbeatData
		if err := protocol.Decode(req.Body, &hb); err != nil {
			return req.NewResponse(remoting.SystemError, err.Error())
		}
		f.mu.Lock()
		f.hbs, f.conn = append(f.hbs, hb), c
		f.mu.Unlock()
		return req.NewResponse(remoting.Success, "")
	})
	f.srv.Handle(remoting.UnregisterClient, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		f.mu.Lock()
		f.unregs = append(f.unregs, req.Ext("producerGroup"))
		f.mu.Unlock()
		return req.NewResponse(remoting.Success, "")
	})
	if err := f.srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.srv.Close() })
	return f
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRegistrarAndCheckBack: a producer's topic gets the proxy registered at the topic's broker
// as producer group = topic; the broker's CHECK_TRANSACTION_STATE on that connection reaches
// the producer's Telemetry stream as a recovery command naming the half message's group and
// offsets; a broken connection is registered again at once; when the producer leaves, the group
// is unregistered.
func TestRegistrarAndCheckBack(t *testing.T) {
	f := startFakeBroker(t)
	cfg := DefaultConfig()
	cfg.NamesrvAddr = f.srv.Addr()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m := &messaging{cfg: &cfg, log: hclog.NewNullLogger(), clients: newClientRegistry()}
	m.cl = remoting.NewClient(remoting.ClientConfig{Handlers: map[int32]remoting.Handler{remoting.CheckTransactionState: m.onCheckTransaction}})
	defer m.cl.Close()
	m.leaders = newLeaderBook(&cfg, m.cl, hclog.NewNullLogger())
	m.routes = newRouteCache(&cfg, m.cl, m.leaders)
	m.registrar = newProducerRegistrar("px-test", m.cl, m.routes, m.clients, hclog.NewNullLogger())
	go m.registrar.run()
	defer m.registrar.close()

	stream := newFakeTelemetry("A")
	c := m.clients.open(stream)
	m.clients.update(c, publishing("T"))
	waitFor(t, "a HEART_BEAT registering producer group T", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, hb := range f.hbs {
			if hb.ClientID == "px-test" && slices.Equal(hb.ProducerDataSet, []protocol.ProducerData{{GroupName: "T"}}) {
				return true
			}
		}
		return false
	})

	half := &message.Message{Topic: "T", Body: []byte("x"), BornHost: netip.MustParseAddrPort("127.0.0.1:1"),
		StoreHost: netip.MustParseAddrPort("127.0.0.1:2"), Properties: message.FormatProperties(map[string]string{
			message.PropertyUniqClientMessageID: "ID1", message.PropertyTransactionCheckTimes: "1", "app": "v"})}
	body, err := message.EncodeRecord(half)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	conn := f.conn
	f.mu.Unlock()
	check := remoting.NewRequest(remoting.CheckTransactionState,
		map[string]string{"tranStateTableOffset": "5", "commitLogOffset": "99", "msgId": "ID1"}, body)
	if err := conn.InvokeOneway(check); err != nil {
		t.Fatal(err)
	}
	var rec *rmqpb.RecoverOrphanedTransactionCommand
	waitFor(t, "the recovery command on the producer's stream", func() bool {
		c.sendMu.Lock()
		defer c.sendMu.Unlock()
		for _, cmd := range stream.sent {
			if r := cmd.GetRecoverOrphanedTransactionCommand(); r != nil {
				rec = r
				return true
			}
		}
		return false
	})
	sp := rec.GetMessage().GetSystemProperties()
	if rec.GetTransactionId() != "t1:5:99:b1" || rec.GetMessage().GetTopic().GetName() != "T" || sp.GetMessageId() != "ID1" ||
		sp.GetMessageType() != rmqpb.MessageType_TRANSACTION || string(rec.GetMessage().GetBody()) != "x" {
		t.Fatalf("recovery command %v", rec)
	}
	if up := rec.GetMessage().GetUserProperties(); up["app"] != "v" || up[message.PropertyTransactionCheckTimes] != "" {
		t.Fatalf("user properties %v: want the application's only", up)
	}

	// The connection breaks (the broker restarted): the proxy registers again on a new one.
	_ = conn.Close()
	waitFor(t, "a HEART_BEAT on a new connection", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.conn != conn
	})

	m.clients.close(c)
	waitFor(t, "UNREGISTER_CLIENT of group T", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return slices.Contains(f.unregs, "T")
	})
}
