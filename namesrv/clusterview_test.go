package namesrv

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

func raftNode(id, addr, role string, term, commit, applied uint64, clMax int64) *protocol.RaftStatus {
	return &protocol.RaftStatus{NodeID: id, BrokerAddr: addr, Role: role, Term: term, CommitIndex: commit, AppliedIndex: applied,
		CommitLogMaxOffset: clMax}
}

// A DLedger group's nodes carry their Raft answers, the leader (highest term among the nodes
// reporting leader: a deposed leader may still think it leads) and each node's lag behind it;
// a classic group has no Raft figures; an unreachable node keeps its error.
func TestBuildClusterView(t *testing.T) {
	ci := &protocol.ClusterInfo{
		ClusterAddrTable: map[string][]string{"C1": {"rg", "classic"}},
		BrokerAddrTable: map[string]*protocol.BrokerData{
			"rg":      {Cluster: "C1", BrokerName: "rg", BrokerAddrs: map[int64]string{0: "a:1", 2: "b:1", 3: "c:1", 4: "d:1"}},
			"classic": {Cluster: "C1", BrokerName: "classic", BrokerAddrs: map[int64]string{0: "m:1", 1: "s:1"}},
		},
	}
	raft := map[string]raftAnswer{
		"a:1": {status: raftNode("n0", "a:1", "leader", 7, 100, 100, 5000)},
		"b:1": {status: raftNode("n1", "b:1", "follower", 7, 100, 90, 4000)},
		"c:1": {status: raftNode("n2", "c:1", "leader", 6, 80, 80, 3000)}, // deposed, not yet told
		"d:1": {err: errors.New("connection refused")},
		"m:1": {}, "s:1": {}, // classic: not a DLedger broker
	}
	topics := map[string]map[string]protocol.QueueData{
		"T":      {"rg": {ReadQueueNums: 4, WriteQueueNums: 4}, "classic": {ReadQueueNums: 2, WriteQueueNums: 1}},
		"TBW102": {"rg": {ReadQueueNums: 8, WriteQueueNums: 8}},
		"rg":     {"rg": {ReadQueueNums: 1, WriteQueueNums: 1}},
		"A":      {"classic": {ReadQueueNums: 1, WriteQueueNums: 1}},
	}
	lags := map[string][]GroupLag{
		"rg":      {{Group: "G2", Topic: "T", BrokerName: "rg", Lag: 3}},
		"classic": {{Group: "G1", Topic: "T", BrokerName: "classic", Lag: 5}},
	}
	v := buildClusterView(ci, topics, raft, lags, 3)

	if len(v.Clusters) != 1 || len(v.Clusters[0].Groups) != 2 {
		t.Fatalf("clusters %+v", v.Clusters)
	}
	classic, rg := v.Clusters[0].Groups[0], v.Clusters[0].Groups[1]
	if classic.BrokerName != "classic" || classic.Raft || classic.LeaderID != "" || classic.Nodes[0].Role != "MASTER" || classic.Nodes[1].Role != "SLAVE" {
		t.Errorf("classic group %+v", classic)
	}
	if !rg.Raft || rg.LeaderID != "n0" || rg.Term != 7 {
		t.Errorf("raft group leader %q term %d, want n0 term 7", rg.LeaderID, rg.Term)
	}
	want := []struct {
		addr   string
		leader bool
		lag    int64
		clLag  int64
		err    string
	}{{"a:1", true, 0, 0, ""}, {"b:1", false, 10, 1000, ""}, {"c:1", false, 20, 2000, ""}, {"d:1", false, -1, -1, "connection refused"}}
	for i, w := range want {
		n := rg.Nodes[i]
		if n.Addr != w.addr || n.Leader != w.leader || n.Lag != w.lag || n.CommitLogLag != w.clLag || n.Error != w.err {
			t.Errorf("node %d: %+v, want %+v", i, n, w)
		}
	}
	if len(v.Topics) != 3 || !v.Truncated || v.Topics[0].Topic != "A" || v.Topics[1].Topic != "T" || !v.Topics[2].System {
		t.Errorf("topics %+v truncated %v, want A, T, TBW102 (system) and truncated", v.Topics, v.Truncated)
	}
	if tv := v.Topics[1]; tv.ReadQueues != 6 || tv.WriteQueues != 5 || strings.Join(tv.Brokers, " ") != "classic:2/1 rg:4/4" {
		t.Errorf("topic T %+v", tv)
	}
	if len(v.ConsumerGroups) != 2 || v.ConsumerGroups[0].Group != "G1" || v.ConsumerGroups[1].Lag != 3 {
		t.Errorf("consumer groups %+v", v.ConsumerGroups)
	}
	// Empty lists encode as [], which the page relies on.
	b, _ := json.Marshal(buildClusterView(&protocol.ClusterInfo{}, nil, nil, nil, 10))
	if !strings.Contains(string(b), `"clusters":[]`) || !strings.Contains(string(b), `"topics":[]`) || !strings.Contains(string(b), `"consumerGroups":[]`) {
		t.Errorf("empty view %s", b)
	}
}

func TestConsumeLags(t *testing.T) {
	cs := &protocol.ConsumeStats{OffsetTable: map[protocol.MessageQueue]protocol.OffsetWrapper{
		{Topic: "T", BrokerName: "b", QueueID: 0}: {BrokerOffset: 10, ConsumerOffset: 4},
		{Topic: "T", BrokerName: "b", QueueID: 1}: {BrokerOffset: 3, ConsumerOffset: -1}, // nothing committed
		{Topic: "T", BrokerName: "b", QueueID: 2}: {BrokerOffset: 5, ConsumerOffset: 9},  // ahead (reset): no lag
		{Topic: "U", BrokerName: "b", QueueID: 0}: {BrokerOffset: 2, ConsumerOffset: 2},
	}}
	got := consumeLags("G", "b", cs)
	if len(got) != 2 || got[0] != (GroupLag{Group: "G", Topic: "T", BrokerName: "b", Lag: 9}) || got[1].Topic != "U" || got[1].Lag != 0 {
		t.Errorf("lags %+v", got)
	}
}

// The page and /cluster over HTTP: an unreachable registered broker is listed with its error.
func TestStatusPageEndpoints(t *testing.T) {
	s := startServer(t, Config{HTTPAddr: "127.0.0.1:0"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	c := newTestClient(t, s.Addr())
	expectCode(t, registerFakeBroker(c, "b1", dead, 0, registerBody(topic("T1", 4, 6))), remoting.Success)

	if page := scrape(t, "http://"+s.HTTPAddr()+"/"); !strings.Contains(page, "rocketraft cluster view") || !strings.Contains(page, `fetchJSON("/cluster"`) {
		t.Errorf("GET / is not the status page:\n%s", page)
	}
	var v ClusterView
	if err := json.Unmarshal([]byte(scrape(t, "http://"+s.HTTPAddr()+"/cluster")), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Clusters) != 1 || len(v.Clusters[0].Groups) != 1 || v.NameServer != s.Addr() {
		t.Fatalf("view %+v", v)
	}
	n := v.Clusters[0].Groups[0].Nodes[0]
	if n.Addr != dead || n.Role != "MASTER" || n.Error == "" || n.Raft != nil {
		t.Errorf("unreachable node %+v, want its error", n)
	}
	if len(v.Topics) != 1 || v.Topics[0].Topic != "T1" {
		t.Errorf("topics %+v", v.Topics)
	}
	resp, err := http.Get("http://" + s.HTTPAddr() + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nope: %s, want 404", resp.Status)
	}
}
