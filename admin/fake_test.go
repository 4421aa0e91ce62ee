package admin

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// fakePeer is an in-process remoting server answering a few codes with canned bodies and
// recording every request it receives.
type fakePeer struct {
	srv *remoting.Server

	mu   sync.Mutex
	reqs []*remoting.Command
}

func startPeer(t *testing.T, handlers map[int32]func(req *remoting.Command) *remoting.Command) *fakePeer {
	t.Helper()
	p := &fakePeer{srv: remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"})}
	for code, h := range handlers {
		p.srv.Handle(code, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
			p.mu.Lock()
			p.reqs = append(p.reqs, req)
			p.mu.Unlock()
			return h(req)
		})
	}
	if err := p.srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.srv.Close() })
	return p
}

func (p *fakePeer) addr() string { return p.srv.Addr() }

// requests returns the ext fields of every request received with code.
func (p *fakePeer) requests(code int32) []map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []map[string]string
	for _, r := range p.reqs {
		if r.Code == code {
			out = append(out, r.ExtFields)
		}
	}
	return out
}

func okBody(req *remoting.Command, v any) *remoting.Command {
	resp := req.NewResponse(remoting.Success, "")
	if v != nil {
		resp.Body = protocol.MustEncode(v)
	}
	return resp
}

func okRaw(req *remoting.Command, body []byte) *remoting.Command {
	resp := req.NewResponse(remoting.Success, "")
	resp.Body = body
	return resp
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// fixture is one name server and a cluster "DefaultCluster" of broker-a (master A0, slave A1) and
// broker-b (master B0), all fakes. Brokers answer with the canned values in brokerState.
type fixture struct {
	t  *testing.T
	ns *fakePeer
	// a0, a1, b0 are the brokers; addrs maps "{NS}", "{A0}", "{A1}", "{B0}" to addresses.
	a0, a1, b0 *fakePeer
	addrs      map[string]string

	mu     sync.Mutex
	routes map[string]*protocol.TopicRouteData
	topics []string
}

type brokerState struct {
	runtime map[string]string
	stats   map[string]*protocol.TopicStatsTable // by topic
	consume *protocol.ConsumeStats
	query   []byte // QUERY_MESSAGE body; nil answers QUERY_NOT_FOUND
	view    map[string][]byte
	fail    map[int32]string     // code → remark of a SYSTEM_ERROR answer
	raft    *protocol.RaftStatus // nil: GET_RAFT_STATUS answers REQUEST_CODE_NOT_SUPPORTED
	types   map[string]string    // topic → message.type GET_TOPIC_CONFIG answers; absent: TOPIC_NOT_EXIST
}

func brokerHandlers(st *brokerState) map[int32]func(*remoting.Command) *remoting.Command {
	failOr := func(code int32, h func(*remoting.Command) *remoting.Command) func(*remoting.Command) *remoting.Command {
		return func(req *remoting.Command) *remoting.Command {
			if remark, ok := st.fail[code]; ok {
				return req.NewResponse(remoting.SystemError, remark)
			}
			return h(req)
		}
	}
	plain := func(req *remoting.Command) *remoting.Command { return req.NewResponse(remoting.Success, "") }
	return map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetRaftStatus: failOr(remoting.GetRaftStatus, func(req *remoting.Command) *remoting.Command {
			if st.raft == nil {
				return req.NewResponse(remoting.RequestCodeNotSupported, "not a DLedger broker")
			}
			return okBody(req, st.raft)
		}),
		remoting.TransferRaftLeader:   failOr(remoting.TransferRaftLeader, plain),
		remoting.AddRaftPeer:          failOr(remoting.AddRaftPeer, plain),
		remoting.RemoveRaftPeer:       failOr(remoting.RemoveRaftPeer, plain),
		remoting.UpdateAndCreateTopic: failOr(remoting.UpdateAndCreateTopic, plain),
		remoting.DeleteTopicInBroker:  failOr(remoting.DeleteTopicInBroker, plain),
		remoting.GetBrokerRuntimeInfo: failOr(remoting.GetBrokerRuntimeInfo, func(req *remoting.Command) *remoting.Command {
			return okBody(req, protocol.KVTable{Table: st.runtime})
		}),
		remoting.GetTopicConfig: func(req *remoting.Command) *remoting.Command {
			mt, ok := st.types[req.Ext("topic")]
			if !ok {
				return req.NewResponse(remoting.TopicNotExist, "no such topic")
			}
			tc := protocol.NewTopicConfig(req.Ext("topic"))
			if mt != "" {
				tc.Attributes = map[string]string{protocol.AttrMessageType: mt}
			}
			return okBody(req, tc)
		},
		remoting.GetTopicStatsInfo: failOr(remoting.GetTopicStatsInfo, func(req *remoting.Command) *remoting.Command {
			s := st.stats[req.Ext("topic")]
			if s == nil {
				return req.NewResponse(remoting.TopicNotExist, "topic["+req.Ext("topic")+"] not exist")
			}
			return okBody(req, s)
		}),
		remoting.GetConsumeStats: failOr(remoting.GetConsumeStats, func(req *remoting.Command) *remoting.Command {
			cs := &protocol.ConsumeStats{OffsetTable: map[protocol.MessageQueue]protocol.OffsetWrapper{}}
			if st.consume != nil {
				cs.ConsumeTps = st.consume.ConsumeTps
				for mq, o := range st.consume.OffsetTable {
					if t := req.Ext("topic"); t == "" || t == mq.Topic {
						cs.OffsetTable[mq] = o
					}
				}
			}
			return okBody(req, cs)
		}),
		remoting.QueryTopicConsumeByWho: failOr(remoting.QueryTopicConsumeByWho, func(req *remoting.Command) *remoting.Command {
			return okBody(req, map[string][]string{"groupList": {"G2", "G1"}})
		}),
		remoting.GetConsumerConnectionList: failOr(remoting.GetConsumerConnectionList, func(req *remoting.Command) *remoting.Command {
			if req.Ext("consumerGroup") != "G1" {
				return req.NewResponse(remoting.ConsumerNotOnline, "the consumer group["+req.Ext("consumerGroup")+"] not online")
			}
			return okBody(req, protocol.ConsumerConnection{ConsumeType: protocol.ConsumePassively, MessageModel: protocol.Clustering,
				ConnectionSet: []protocol.Connection{{ClientID: "10.0.0.5@1", ClientAddr: "10.0.0.5:50000", Language: "GO", Version: 317}}})
		}),
		remoting.QueryMessage: failOr(remoting.QueryMessage, func(req *remoting.Command) *remoting.Command {
			if st.query == nil {
				return req.NewResponse(remoting.QueryNotFound, "can not find message, maybe time range not correct")
			}
			return okRaw(req, st.query)
		}),
		remoting.ViewMessageByID: failOr(remoting.ViewMessageByID, func(req *remoting.Command) *remoting.Command {
			rec, ok := st.view[req.Ext("offset")]
			if !ok {
				return req.NewResponse(remoting.SystemError, "can not find message by the offset, "+req.Ext("offset"))
			}
			return okRaw(req, rec)
		}),
	}
}

// newFixture starts the fakes; the brokers' canned state can be set through the returned
// brokerStates before the first command runs.
func newFixture(t *testing.T, a0, a1, b0 *brokerState) *fixture {
	t.Helper()
	f := &fixture{t: t, routes: map[string]*protocol.TopicRouteData{}}
	for _, st := range []**brokerState{&a0, &a1, &b0} {
		if *st == nil {
			*st = &brokerState{}
		}
	}
	f.a0 = startPeer(t, brokerHandlers(a0))
	f.a1 = startPeer(t, brokerHandlers(a1))
	f.b0 = startPeer(t, brokerHandlers(b0))
	ci := protocol.ClusterInfo{
		BrokerAddrTable: map[string]*protocol.BrokerData{
			"broker-a": {Cluster: "DefaultCluster", BrokerName: "broker-a", BrokerAddrs: map[int64]string{0: f.a0.addr(), 1: f.a1.addr()}},
			"broker-b": {Cluster: "DefaultCluster", BrokerName: "broker-b", BrokerAddrs: map[int64]string{0: f.b0.addr()}},
		},
		ClusterAddrTable: map[string][]string{"DefaultCluster": {"broker-b", "broker-a"}},
	}
	plain := func(req *remoting.Command) *remoting.Command { return req.NewResponse(remoting.Success, "") }
	f.ns = startPeer(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetBrokerClusterInfo: func(req *remoting.Command) *remoting.Command { return okBody(req, ci) },
		remoting.GetRouteInfoByTopic: func(req *remoting.Command) *remoting.Command {
			f.mu.Lock()
			defer f.mu.Unlock()
			rd := f.routes[req.Ext("topic")]
			if rd == nil {
				return req.NewResponse(remoting.TopicNotExist, "No topic route info in name server for the topic: "+req.Ext("topic"))
			}
			return okBody(req, rd)
		},
		remoting.GetAllTopicListFromNameserver: func(req *remoting.Command) *remoting.Command {
			f.mu.Lock()
			defer f.mu.Unlock()
			return okBody(req, protocol.TopicList{TopicList: f.topics})
		},
		remoting.DeleteTopicInNamesrv: plain,
		remoting.PutKVConfig:          plain,
	})
	f.addrs = map[string]string{"{NS}": f.ns.addr(), "{A0}": f.a0.addr(), "{A1}": f.a1.addr(), "{B0}": f.b0.addr()}
	for _, a := range f.addrs {
		if len(a) != len("127.0.0.1:40000") {
			t.Skipf("expected outputs assume 5-digit ephemeral ports, got %s", a)
		}
	}
	return f
}

// route builds the route of a topic hosted on the given broker names with n queues each.
func (f *fixture) route(topic string, n int32, brokerNames ...string) {
	rd := &protocol.TopicRouteData{}
	for _, name := range brokerNames {
		rd.QueueDatas = append(rd.QueueDatas, &protocol.QueueData{BrokerName: name, ReadQueueNums: n, WriteQueueNums: n, Perm: 6})
		bd := &protocol.BrokerData{Cluster: "DefaultCluster", BrokerName: name, BrokerAddrs: map[int64]string{0: f.b0.addr()}}
		if name == "broker-a" {
			bd.BrokerAddrs = map[int64]string{0: f.a0.addr(), 1: f.a1.addr()}
		}
		rd.BrokerDatas = append(rd.BrokerDatas, bd)
	}
	f.mu.Lock()
	f.routes[topic] = rd
	f.topics = append(f.topics, topic)
	f.mu.Unlock()
}

// sub replaces the address placeholders in s.
func (f *fixture) sub(s string) string {
	for k, v := range f.addrs {
		s = strings.ReplaceAll(s, k, v)
	}
	return s
}

// mq runs an mqadmin command line against the fixture's name server.
func (f *fixture) mq(args ...string) (stdout, stderr string, code int) {
	return runMain(append(args, "-n", f.ns.addr())...)
}

func runMain(args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = Main(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// expect runs args and checks exit code 0, an empty stderr and the exact stdout (placeholders
// substituted; a leading newline of want is dropped).
func (f *fixture) expect(want string, args ...string) {
	f.t.Helper()
	if errOut := f.expectOut(want, args...); errOut != "" {
		f.t.Fatalf("mqadmin %v: stderr:\n%s", args, errOut)
	}
}

// expectOut is expect that allows and returns stderr.
func (f *fixture) expectOut(want string, args ...string) (stderr string) {
	f.t.Helper()
	out, errOut, code := f.mq(args...)
	if code != 0 {
		f.t.Fatalf("mqadmin %v: exit %d, stderr:\n%s", args, code, errOut)
	}
	want = strings.TrimPrefix(f.sub(want), "\n")
	if out != want {
		f.t.Fatalf("mqadmin %v output:\n%s\nwant:\n%s", args, out, want)
	}
	return errOut
}

// expectFail runs args and checks the exit code and that stderr contains every fragment.
func (f *fixture) expectFail(code int, fragments []string, args ...string) (stdout string) {
	f.t.Helper()
	out, errOut, got := f.mq(args...)
	if got != code {
		f.t.Fatalf("mqadmin %v: exit %d, want %d; stderr:\n%s", args, got, code, errOut)
	}
	for _, fr := range fragments {
		if !strings.Contains(errOut, f.sub(fr)) {
			f.t.Fatalf("mqadmin %v stderr lacks %q:\n%s", args, f.sub(fr), errOut)
		}
	}
	return out
}
