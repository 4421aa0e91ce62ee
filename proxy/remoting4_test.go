package proxy

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// fake4 is a name server and two broker groups (b1, b2: one fake broker each) on loopback.
type fake4 struct {
	ns, b1, b2 *remoting.Server
	mu         sync.Mutex
	got        map[string][]*remoting.Command // broker name -> requests received
	dropSend   bool                           // b1 closes the connection instead of answering a send
}

func startFake4(t *testing.T) *fake4 {
	t.Helper()
	f := &fake4{got: map[string][]*remoting.Command{}}
	start := func(s *remoting.Server) {
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
	}
	broker := func(name string) *remoting.Server {
		s := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"})
		h := func(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
			f.mu.Lock()
			f.got[name] = append(f.got[name], req)
			drop := f.dropSend && name == "b1" && req.Code == remoting.SendMessageV2
			f.mu.Unlock()
			if drop {
				_ = conn.Close()
				return nil
			}
			resp := req.NewResponse(remoting.Success, "")
			resp.SetExt("queueOffset", "7")
			resp.SetExt("brokerName", name)
			if req.Code == remoting.PullMessage {
				resp.Code = remoting.PullNotFound
				resp.SetExt("suggestWhichBrokerId", "1")
			}
			return resp
		}
		for _, c := range []int32{remoting.SendMessageV2, remoting.PullMessage, remoting.HeartBeat, remoting.GetConsumerListByGroup} {
			s.Handle(c, h)
		}
		start(s)
		return s
	}
	f.b1, f.b2 = broker("b1"), broker("b2")
	f.ns = remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"})
	route := func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		r := protocol.TopicRouteData{
			QueueDatas: []*protocol.QueueData{{BrokerName: "b1", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}, {BrokerName: "b2", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}},
			BrokerDatas: []*protocol.BrokerData{
				{Cluster: "C", BrokerName: "b1", BrokerAddrs: map[int64]string{0: f.b1.Addr(), 1: "127.0.0.1:1"}},
				{Cluster: "C", BrokerName: "b2", BrokerAddrs: map[int64]string{0: f.b2.Addr()}},
			},
		}
		resp := req.NewResponse(remoting.Success, "")
		resp.Body = protocol.MustEncode(r)
		return resp
	}
	cluster := func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		ci := protocol.ClusterInfo{BrokerAddrTable: map[string]*protocol.BrokerData{
			"b1": {Cluster: "C", BrokerName: "b1", BrokerAddrs: map[int64]string{0: f.b1.Addr()}},
			"b2": {Cluster: "C", BrokerName: "b2", BrokerAddrs: map[int64]string{0: f.b2.Addr()}},
		}, ClusterAddrTable: map[string][]string{"C": {"b1", "b2"}}}
		resp := req.NewResponse(remoting.Success, "")
		resp.Body = protocol.MustEncode(ci)
		return resp
	}
	f.ns.Handle(remoting.GetRouteInfoByTopic, route)
	f.ns.Handle(remoting.GetBrokerClusterInfo, cluster)
	start(f.ns)
	return f
}

func (f *fake4) received(name string) []*remoting.Command {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*remoting.Command(nil), f.got[name]...)
}

func startFront4Test(t *testing.T, f *fake4) (*front4, *remoting.Client) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NamesrvAddr, cfg.ListenHost, cfg.RemotingListenPort = f.ns.Addr(), "127.0.0.1", 0
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	fr, err := startFront4(&cfg, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fr.close)
	cl := remoting.NewClient(remoting.ClientConfig{})
	t.Cleanup(func() { _ = cl.Close() })
	return fr, cl
}

func call4(t *testing.T, cl *remoting.Client, addr string, req *remoting.Command) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, addr, req)
	if err != nil {
		t.Fatalf("code %d: %v", req.Code, err)
	}
	return resp
}

// TestFront4Routes: every group of a route and of the cluster table is at the proxy, as brokerId
// 0 alone.
func TestFront4Routes(t *testing.T) {
	f := startFake4(t)
	fr, cl := startFront4Test(t, f)
	resp := call4(t, cl, fr.Addr(), remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil))
	var r protocol.TopicRouteData
	if err := protocol.Decode(resp.Body, &r); err != nil || resp.Code != remoting.Success {
		t.Fatalf("route: code %d %v", resp.Code, err)
	}
	if len(r.BrokerDatas) != 2 || len(r.QueueDatas) != 2 {
		t.Fatalf("route: %d groups, %d queue datas", len(r.BrokerDatas), len(r.QueueDatas))
	}
	for _, bd := range r.BrokerDatas {
		if len(bd.BrokerAddrs) != 1 || bd.BrokerAddrs[0] != fr.Addr() {
			t.Errorf("group %s at %v, want only {0: %s}", bd.BrokerName, bd.BrokerAddrs, fr.Addr())
		}
	}
	resp = call4(t, cl, fr.Addr(), remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
	var ci protocol.ClusterInfo
	if err := protocol.Decode(resp.Body, &ci); err != nil || len(ci.BrokerAddrTable) != 2 {
		t.Fatalf("cluster info: %v %v", ci, err)
	}
	for name, bd := range ci.BrokerAddrTable {
		if bd.BrokerAddrs[0] != fr.Addr() {
			t.Errorf("cluster table: %s at %v", name, bd.BrokerAddrs)
		}
	}
}

// TestFront4Forwarding: a send reaches the group its header names with the header unchanged (a
// signature stays valid); a pull's follower hint is dropped; a heartbeat reaches every group;
// a request naming no group among two, an unknown code and a bad body are answered in-band; a
// send whose connection broke after it was written is answered SYSTEM_ERROR, not SUCCESS.
func TestFront4Forwarding(t *testing.T) {
	f := startFake4(t)
	fr, cl := startFront4Test(t, f)
	ext := map[string]string{"a": "PG", "b": "T", "e": "1", "n": "b2", "AccessKey": "ak", "Signature": "sig"}
	resp := call4(t, cl, fr.Addr(), remoting.NewRequest(remoting.SendMessageV2, ext, []byte("body")))
	if resp.Code != remoting.Success || resp.Ext("brokerName") != "b2" || resp.Ext("queueOffset") != "7" {
		t.Fatalf("send to b2: %v", resp)
	}
	got := f.received("b2")
	if len(got) != 1 || string(got[0].Body) != "body" || got[0].Ext("Signature") != "sig" || got[0].Ext("AccessKey") != "ak" || len(got[0].ExtFields) != len(ext) {
		t.Fatalf("b2 received %v", got)
	}
	pull := call4(t, cl, fr.Addr(), remoting.NewRequest(remoting.PullMessage, map[string]string{"bname": "b1", "suspendTimeoutMillis": "100"}, nil))
	if pull.Code != remoting.PullNotFound || pull.Ext("suggestWhichBrokerId") != "0" {
		t.Fatalf("pull: %v", pull)
	}
	hb := protocol.MustEncode(protocol.HeartbeatData{ClientID: "c1", ConsumerDataSet: []protocol.ConsumerData{{GroupName: "G"}}})
	if resp := call4(t, cl, fr.Addr(), remoting.NewRequest(remoting.HeartBeat, nil, hb)); resp.Code != remoting.Success {
		t.Fatalf("heartbeat: %v", resp)
	}
	if len(f.received("b1")) < 2 || len(f.received("b2")) < 2 {
		t.Fatalf("heartbeat did not reach both groups: b1 %d, b2 %d requests", len(f.received("b1")), len(f.received("b2")))
	}
	if resp := call4(t, cl, fr.Addr(), remoting.NewRequest(remoting.SendMessageV2, map[string]string{"b": "T"}, nil)); resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, "names no broker group") {
		t.Fatalf("send naming no group: %v", resp)
	}
	if resp := call4(t, cl, fr.Addr(), remoting.NewRequest(remoting.HeartBeat, nil, []byte("{not json"))); resp.Code != remoting.SystemError {
		t.Fatalf("bad heartbeat body: %v", resp)
	}
	before := len(f.received("b1"))
	badHB := protocol.MustEncode(protocol.HeartbeatData{ClientID: "c2", ConsumerDataSet: []protocol.ConsumerData{{GroupName: "../../tmp/x"}}})
	if resp := call4(t, cl, fr.Addr(), remoting.NewRequest(remoting.HeartBeat, nil, badHB)); resp.Code != remoting.InvalidParameter {
		t.Fatalf("heartbeat with an invalid group: %v, want INVALID_PARAMETER", resp)
	}
	if n := len(f.received("b1")); n != before {
		t.Fatalf("a refused heartbeat reached a broker (%d requests, %d before)", n, before)
	}
	if resp := call4(t, cl, fr.Addr(), remoting.NewRequest(remoting.UpdateBrokerConfig, nil, nil)); resp.Code != remoting.RequestCodeNotSupported {
		t.Fatalf("unknown code: %v", resp)
	}
	f.mu.Lock()
	f.dropSend = true
	f.mu.Unlock()
	resp = call4(t, cl, fr.Addr(), remoting.NewRequest(remoting.SendMessageV2, map[string]string{"b": "T", "n": "b1"}, nil))
	if resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, "outcome unknown") {
		t.Fatalf("send whose connection broke: %v", resp)
	}
}
