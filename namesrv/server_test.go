package namesrv

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// eventually polls cond until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %v: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = "127.0.0.1:0"
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

type testClient struct {
	t    *testing.T
	c    *remoting.Client
	addr string
}

func newTestClient(t *testing.T, addr string) *testClient {
	c := remoting.NewClient(remoting.ClientConfig{})
	t.Cleanup(func() { _ = c.Close() })
	return &testClient{t: t, c: c, addr: addr}
}

func (tc *testClient) call(code int32, ext map[string]string, body []byte) *remoting.Command {
	tc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := tc.c.Invoke(ctx, tc.addr, remoting.NewRequest(code, ext, body))
	if err != nil {
		tc.t.Fatalf("invoke %d: %v", code, err)
	}
	return resp
}

func expectCode(t *testing.T, resp *remoting.Command, code int32) {
	t.Helper()
	if resp.Code != code {
		t.Fatalf("code %d (remark %q), want %d", resp.Code, resp.Remark, code)
	}
}

func registerBody(tcs ...*protocol.TopicConfig) []byte {
	w := topics(1, tcs...)
	return protocol.MustEncode(&protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: *w})
}

func registerFakeBroker(tc *testClient, name, addr string, id int64, body []byte) *remoting.Command {
	h := protocol.RegisterBrokerRequestHeader{ClusterName: "DefaultCluster", BrokerName: name, BrokerAddr: addr,
		HaServerAddr: addr + "-ha", BrokerID: id, BodyCrc32: protocol.CRC32(body)}
	return tc.call(remoting.RegisterBroker, h.ToExt(), body)
}

func TestServerRouteOverNetwork(t *testing.T) {
	s := startServer(t, Config{KvConfigPath: filepath.Join(t.TempDir(), "kv.json"), OrderMessageEnable: true})
	broker := newTestClient(t, s.Addr())
	body := registerBody(topic("T", 4, 6), topic(protocol.AutoCreateTopicKey, 8, 7))
	resp := registerFakeBroker(broker, "broker-a", "10.0.0.1:10911", 0, body)
	expectCode(t, resp, remoting.Success)
	if len(resp.Body) != 0 || resp.Ext("masterAddr") != "" {
		t.Fatalf("master register response %+v", resp)
	}
	slave := registerFakeBroker(broker, "broker-a", "10.0.0.2:10911", 1, body)
	expectCode(t, slave, remoting.Success)
	if slave.Ext("masterAddr") != "10.0.0.1:10911" || slave.Ext("haServerAddr") != "10.0.0.1:10911-ha" {
		t.Fatalf("slave register response %v", slave.ExtFields)
	}

	cli := newTestClient(t, s.Addr())
	route := cli.call(remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil)
	expectCode(t, route, remoting.Success)
	want := `{"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSynFlag":0,"topicSysFlag":0,"writeQueueNums":4}],` +
		`"brokerDatas":[{"cluster":"DefaultCluster","brokerName":"broker-a","brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"enableActingMaster":false}],` +
		`"filterServerTable":{}}`
	if string(route.Body) != want {
		t.Fatalf("route body\n got %s\nwant %s", route.Body, want)
	}
	tbw := cli.call(remoting.GetRouteInfoByTopic, map[string]string{"topic": protocol.AutoCreateTopicKey}, nil)
	expectCode(t, tbw, remoting.Success)

	missing := cli.call(remoting.GetRouteInfoByTopic, map[string]string{"topic": "Nope"}, nil)
	expectCode(t, missing, remoting.TopicNotExist)
	if missing.Remark != "No topic route info in name server for the topic: Nope" {
		t.Fatalf("remark %q", missing.Remark)
	}
	expectCode(t, cli.call(remoting.GetRouteInfoByTopic, nil, nil), remoting.SystemError)

	// Order topic config from KV.
	expectCode(t, cli.call(remoting.PutKVConfig, map[string]string{"namespace": protocol.OrderTopicConfigNamespace, "key": "T", "value": "broker-a:4"}, nil), remoting.Success)
	route = cli.call(remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil)
	if !strings.HasPrefix(string(route.Body), `{"orderTopicConf":"broker-a:4",`) {
		t.Fatalf("route body %s", route.Body)
	}
	resp = registerFakeBroker(broker, "broker-a", "10.0.0.1:10911", 0, body)
	if string(resp.Body) != `{"table":{"T":"broker-a:4"}}` {
		t.Fatalf("register response body %s", resp.Body)
	}

	// Cluster info and topic lists.
	ci := cli.call(remoting.GetBrokerClusterInfo, nil, nil)
	var info protocol.ClusterInfo
	if err := protocol.Decode(ci.Body, &info); err != nil || info.BrokerAddrTable["broker-a"].BrokerAddrs[1] != "10.0.0.2:10911" {
		t.Fatalf("cluster info %s: %v", ci.Body, err)
	}
	all := cli.call(remoting.GetAllTopicListFromNameserver, nil, nil)
	if string(all.Body) != `{"topicList":["T","TBW102"]}` {
		t.Fatalf("topic list %s", all.Body)
	}
	byCluster := cli.call(remoting.GetTopicsByCluster, map[string]string{"cluster": "DefaultCluster"}, nil)
	if string(byCluster.Body) != `{"topicList":["T","TBW102"]}` {
		t.Fatalf("topics by cluster %s", byCluster.Body)
	}
	sys := cli.call(remoting.GetSystemTopicListFromNS, nil, nil)
	if string(sys.Body) != `{"topicList":["DefaultCluster","broker-a"],"brokerAddr":"10.0.0.1:10911"}` {
		t.Fatalf("system topics %s", sys.Body)
	}

	// Drain and restore.
	wipe := cli.call(remoting.WipeWritePermOfBroker, map[string]string{"brokerName": "broker-a"}, nil)
	if wipe.Ext("wipeTopicCount") != "2" {
		t.Fatalf("wipe %v", wipe.ExtFields)
	}
	add := cli.call(remoting.AddWritePermOfBroker, map[string]string{"brokerName": "broker-a"}, nil)
	if add.Ext("addTopicCount") != "2" {
		t.Fatalf("add %v", add.ExtFields)
	}

	// Unknown codes are refused by the remoting layer.
	expectCode(t, cli.call(9999, nil, nil), remoting.RequestCodeNotSupported)

	// The broker's connection closes: both its registrations disappear at once.
	broker.c.CloseAddr(s.Addr())
	eventually(t, 5*time.Second, func() error {
		if r := cli.call(remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil); r.Code != remoting.TopicNotExist {
			return fmt.Errorf("route still served: code %d", r.Code)
		}
		return nil
	})
}

func TestServerRegisterErrors(t *testing.T) {
	s := startServer(t, Config{})
	c := newTestClient(t, s.Addr())
	body := registerBody(topic("T", 4, 6), topic("U", 1, 6))
	h := protocol.RegisterBrokerRequestHeader{ClusterName: "C", BrokerName: "b", BrokerAddr: "a:1", HaServerAddr: "a:2", BodyCrc32: protocol.CRC32(body) ^ 1}
	resp := c.call(remoting.RegisterBroker, h.ToExt(), body)
	expectCode(t, resp, remoting.SystemError)
	if resp.Remark != "crc32 not match" {
		t.Fatalf("remark %q", resp.Remark)
	}
	ext := h.ToExt()
	delete(ext, "brokerId")
	resp = c.call(remoting.RegisterBroker, ext, body)
	expectCode(t, resp, remoting.SystemError)
	if !strings.Contains(resp.Remark, "brokerId") {
		t.Fatalf("remark %q", resp.Remark)
	}
	h.BodyCrc32 = 0
	expectCode(t, c.call(remoting.RegisterBroker, h.ToExt(), []byte("{bad")), remoting.SystemError)
	// Compressed body, no crc.
	comp, err := protocol.EncodeCompressedRegisterBrokerBody(&protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: *topics(1, topic("Z", 2, 6), topic("U", 1, 6))})
	if err != nil {
		t.Fatal(err)
	}
	h.Compressed = true
	expectCode(t, c.call(remoting.RegisterBroker, h.ToExt(), comp), remoting.Success)
	if r, ok := s.Routes().Route("Z", false); !ok || r.QueueDatas[0].WriteQueueNums != 2 {
		t.Fatalf("compressed registration not applied: %+v", r)
	}
}

func TestServerBrokerLiveness(t *testing.T) {
	clk := newFakeClock()
	s := startServer(t, Config{BrokerExpiry: time.Minute, ScanInterval: 5 * time.Millisecond, Now: clk.Now})
	c := newTestClient(t, s.Addr())
	expectCode(t, registerFakeBroker(c, "b", "a:1", 0, registerBody(topic("T", 4, 6), topic("U", 1, 6))), remoting.Success)

	dv := protocol.MustEncode(topics(1).DataVersion)
	id := (&protocol.QueryDataVersionRequestHeader{ClusterName: "DefaultCluster", BrokerName: "b", BrokerAddr: "a:1"}).ToExt()
	q := c.call(remoting.QueryDataVersion, id, dv)
	if q.Ext("changed") != "false" || string(q.Body) != string(dv) {
		t.Fatalf("query data version %v %s", q.ExtFields, q.Body)
	}
	q = c.call(remoting.QueryDataVersion, id, protocol.MustEncode(protocol.DataVersion{Counter: 5}))
	if q.Ext("changed") != "true" {
		t.Fatalf("query data version %v", q.ExtFields)
	}

	clk.Advance(50 * time.Second)
	hb := (&protocol.BrokerHeartbeatRequestHeader{ClusterName: "DefaultCluster", BrokerName: "b", BrokerAddr: "a:1"}).ToExt()
	expectCode(t, c.call(remoting.BrokerHeartbeat, hb, nil), remoting.Success)
	clk.Advance(50 * time.Second) // 100 s since registration, 50 s since heartbeat
	time.Sleep(50 * time.Millisecond)
	if _, ok := s.Routes().Route("T", false); !ok {
		t.Fatal("heartbeat did not keep the broker alive")
	}
	clk.Advance(11 * time.Second)
	eventually(t, 5*time.Second, func() error {
		if _, ok := s.Routes().Route("T", false); ok {
			return fmt.Errorf("broker not expired")
		}
		return nil
	})

	// Unregister.
	expectCode(t, registerFakeBroker(c, "b", "a:1", 0, registerBody(topic("T", 4, 6), topic("U", 1, 6))), remoting.Success)
	un := (&protocol.UnregisterBrokerRequestHeader{ClusterName: "DefaultCluster", BrokerName: "b", BrokerAddr: "a:1"}).ToExt()
	expectCode(t, c.call(remoting.UnregisterBroker, un, nil), remoting.Success)
	if _, ok := s.Routes().Route("T", false); ok {
		t.Fatal("route after unregister")
	}
}

func TestServerKVAndTopicAdmin(t *testing.T) {
	s := startServer(t, Config{})
	c := newTestClient(t, s.Addr())
	expectCode(t, c.call(remoting.GetKVConfig, map[string]string{"namespace": "N", "key": "k"}, nil), remoting.QueryNotFound)
	expectCode(t, c.call(remoting.PutKVConfig, map[string]string{"namespace": "N", "key": "k", "value": "v"}, nil), remoting.Success)
	expectCode(t, c.call(remoting.PutKVConfig, map[string]string{"namespace": "N", "key": "k"}, nil), remoting.SystemError)
	g := c.call(remoting.GetKVConfig, map[string]string{"namespace": "N", "key": "k"}, nil)
	if g.Code != remoting.Success || g.Ext("value") != "v" {
		t.Fatalf("get %+v", g)
	}
	l := c.call(remoting.GetKVListByNamespace, map[string]string{"namespace": "N"}, nil)
	if string(l.Body) != `{"table":{"k":"v"}}` {
		t.Fatalf("list %s", l.Body)
	}
	expectCode(t, c.call(remoting.DeleteKVConfig, map[string]string{"namespace": "N", "key": "k"}, nil), remoting.Success)
	miss := c.call(remoting.GetKVConfig, map[string]string{"namespace": "N", "key": "k"}, nil)
	if miss.Code != remoting.QueryNotFound || miss.Remark != "No config item, Namespace: N Key: k" {
		t.Fatalf("get after delete %d %q", miss.Code, miss.Remark)
	}
	expectCode(t, c.call(remoting.GetKVListByNamespace, map[string]string{"namespace": "N"}, nil), remoting.QueryNotFound)

	expectCode(t, registerFakeBroker(c, "b", "a:1", 0, registerBody(topic("T", 4, 6), topic("U", 1, 6))), remoting.Success)
	route := protocol.MustEncode(&protocol.TopicRouteData{QueueDatas: []*protocol.QueueData{{BrokerName: "b", ReadQueueNums: 3, WriteQueueNums: 3, Perm: 6}}})
	expectCode(t, c.call(remoting.RegisterTopicInNamesrv, map[string]string{"topic": "New"}, route), remoting.Success)
	expectCode(t, c.call(remoting.RegisterTopicInNamesrv, map[string]string{"topic": "../../tmp/x"}, route), remoting.InvalidParameter)
	if _, ok := s.Routes().Route("../../tmp/x", false); ok {
		t.Fatal("an invalid topic name was registered")
	}
	if r, ok := s.Routes().Route("New", false); !ok || r.QueueDatas[0].ReadQueueNums != 3 {
		t.Fatalf("registered topic %+v", r)
	}
	expectCode(t, c.call(remoting.DeleteTopicInNamesrv, map[string]string{"topic": "New"}, nil), remoting.Success)
	if _, ok := s.Routes().Route("New", false); ok {
		t.Fatal("topic not deleted")
	}
}
