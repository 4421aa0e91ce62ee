package admin

import (
	"encoding/json"
	"strings"
	"testing"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

var threePeers = []protocol.RaftPeer{
	{ID: "n0", Addr: "127.0.0.1:50000", Suffrage: "Voter"},
	{ID: "n1", Addr: "127.0.0.1:50001", Suffrage: "Voter"},
	{ID: "n2", Addr: "127.0.0.1:50002", Suffrage: "Voter"},
}

// raftFixture: broker-a is a Raft group whose leader n0 is A0 and follower n1 is A1 (its third
// member n2 is registered nowhere); broker-b is a classic broker.
// edit, if given, changes the two statuses first.
func raftFixture(t *testing.T, edit ...func(a0, a1 *protocol.RaftStatus)) *fixture {
	a0 := &brokerState{raft: &protocol.RaftStatus{BrokerName: "broker-a", NodeID: "n0", PeerAddr: "127.0.0.1:50000",
		Role: protocol.RaftLeader, LeaderReady: true, Term: 3, LastLogIndex: 120, CommitIndex: 118, AppliedIndex: 117,
		CommitLogMaxOffset: 50000, LastContactAgoMs: 0, LeaderID: "n0", LeaderAddr: "127.0.0.1:50000", Peers: threePeers}}
	a1 := &brokerState{raft: &protocol.RaftStatus{BrokerName: "broker-a", NodeID: "n1", PeerAddr: "127.0.0.1:50001",
		BrokerID: 2, Role: protocol.RaftFollower, Term: 3, LastLogIndex: 120, CommitIndex: 110, AppliedIndex: 100,
		CommitLogMaxOffset: 42000, LastContactAgoMs: 12, LeaderID: "n0", LeaderAddr: "127.0.0.1:50000", Peers: threePeers}}
	for _, e := range edit {
		e(a0.raft, a1.raft)
	}
	f := newFixture(t, a0, a1, nil)
	a0.raft.BrokerAddr, a1.raft.BrokerAddr = f.a0.addr(), f.a1.addr()
	return f
}

func TestRaftStatus(t *testing.T) {
	f := raftFixture(t)
	errOut := f.expectOut(`
#Broker Name  #Node  #Addr            #Peer Addr       #Role        #Term  #Last Index  #Commit  #Applied  #Lag  #CommitLog Max  #Last Contact
broker-a      n0     {A0}  127.0.0.1:50000  leader       3      120          118      117       1     50000           -
broker-a      n1     {A1}  127.0.0.1:50001  follower     3      120          110      100       18    42000           12ms
broker-a      n2     -                127.0.0.1:50002  UNREACHABLE  -      -            -        -         -     -               -

#Broker Name  #Node  #Addr            #Peer Addr  #Role     #Term  #Last Index  #Commit  #Applied  #Lag  #CommitLog Max  #Last Contact
broker-b      -      {B0}  -           NOT_RAFT  -      -            -        -         -     -               -
`, "raftStatus")
	for _, want := range []string{
		"warning: broker-a node n2 at 127.0.0.1:50002: member of the Raft configuration (Voter) that no registered broker address answered for",
		"warning: broker-b node - at {B0}: not a DLedger (Raft) broker: {B0} answered code 3: not a DLedger broker",
	} {
		if !strings.Contains(errOut, f.sub(want)) {
			t.Fatalf("stderr lacks %q:\n%s", f.sub(want), errOut)
		}
	}

	// JSON: one group, lags against the leader's commit index and commitlog offset.
	out, _, code := f.mq("raftStatus", "-b", "broker-a", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var groups []RaftGroup
	if err := json.Unmarshal([]byte(out), &groups); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(groups) != 1 || groups[0].BrokerName != "broker-a" || groups[0].LeaderID != "n0" || len(groups[0].Nodes) != 3 {
		t.Fatalf("groups %+v", groups)
	}
	n1 := groups[0].Nodes[1]
	if n1.NodeID != "n1" || n1.Lag != 18 || n1.CommitLogLag != 8000 || n1.Status == nil || n1.Status.Term != 3 ||
		n1.Registered.ID != 1 || n1.Registered.Addr != f.a1.addr() {
		t.Fatalf("n1 %+v", n1)
	}
	if n2 := groups[0].Nodes[2]; n2.NodeID != "n2" || n2.Status != nil || n2.Lag != -1 || n2.Error == "" {
		t.Fatalf("n2 %+v", n2)
	}

	// An unreachable registered node is shown, not fatal; an unknown broker name is.
	_ = f.a1.srv.Close()
	out, errOut, code = f.mq("raftStatus", "-b", "broker-a", "--timeout", "1s")
	if code != 0 || !strings.Contains(out, f.sub("broker-a      -      {A1}  -                UNREACHABLE")) ||
		!strings.Contains(errOut, f.sub("warning: broker-a node - at {A1}: get raft status: call {A1}: ")) {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	f.expectFail(1, []string{`not found: broker "broker-z" is not registered with the name server`}, "raftStatus", "-b", "broker-z")
	// Nothing answered with a Raft status: that is a failure.
	f.expectFail(1, []string{"no broker answered with a Raft status", "{B0} (broker-b): not a DLedger (Raft) broker"}, "raftStatus", "-b", "broker-b")
}

func TestRaftChanges(t *testing.T) {
	f := raftFixture(t)
	f.expect(`
transfer leadership of broker-a to n1 success. (sent to {A0})
`, "transferLeader", "-b", "broker-a", "-t", "n1")
	reqs := f.a0.requests(remoting.TransferRaftLeader)
	if len(reqs) != 1 || reqs[0]["nodeId"] != "n1" || reqs[0]["timeoutMillis"] != "2400" {
		t.Fatalf("transfer requests %v", reqs)
	}
	f.expect(`
add peer n3 (127.0.0.1:50003) to broker-a success. (sent to {A0})
`, "addPeer", "-b", "broker-a", "-i", "n3", "-a", "127.0.0.1:50003")
	if reqs := f.a0.requests(remoting.AddRaftPeer); len(reqs) != 1 || reqs[0]["nodeId"] != "n3" || reqs[0]["peerAddr"] != "127.0.0.1:50003" {
		t.Fatalf("add requests %v", reqs)
	}
	f.expect(`
{
  "brokerName": "broker-a",
  "op": "removePeer",
  "nodeId": "n3",
  "sentTo": "{A0}",
  "success": true
}
`, "removePeer", "-b", "broker-a", "-i", "n3", "-o", "json")
	if len(f.a1.requests(remoting.RemoveRaftPeer)) != 0 {
		t.Fatal("a change went to a follower while the group has a master")
	}

	// A refusal is a failure naming the answer.
	f2 := newFixture(t, &brokerState{fail: map[int32]string{remoting.TransferRaftLeader: "transfer leadership to n9 failed: unknown peer"}}, nil, nil)
	f2.expectFail(1, []string{"mqadmin transferLeader: transferLeader broker-a: {A0} answered code 1: transfer leadership to n9 failed: unknown peer"},
		"transferLeader", "-b", "broker-a", "-t", "n9")
	f2.expectFail(1, []string{`broker "nope" is not registered`}, "transferLeader", "-b", "nope")
	f2.expectFail(2, []string{"-b/--brokerName is required"}, "transferLeader")
	f2.expectFail(2, []string{"-a/--peerAddr is required"}, "addPeer", "-b", "broker-a", "-i", "n3")
	f2.expectFail(2, []string{"-i/--nodeId is required"}, "removePeer", "-b", "broker-a")
}

// A node refusing its leader's entries for a log-store mismatch is named on stderr with why.
func TestRaftStatusWarnsOfLogStoreMismatch(t *testing.T) {
	f := raftFixture(t, func(_, a1 *protocol.RaftStatus) {
		a1.LogStoreMismatch = "raft entry 7 (term 3) was proposed by a leader whose dLegerLogStore is wal or bolt, this node's is commitlog"
	})
	_, errOut, code := f.mq("raftStatus", "-b", "broker-a")
	if code != 0 || !strings.Contains(errOut, "warning: broker-a node n1: RAFT LOG STORE MISMATCH, it refuses its leader's entries and falls behind: raft entry 7") {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
}
