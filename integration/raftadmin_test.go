package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"rocketraft/admin"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// mqadminRaft runs one mqadmin command in-process against nsAddr and fails the test on a
// non-zero exit.
func mqadminRaft(t testing.TB, nsAddr string, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if code := admin.Main(ctx, append(append([]string{}, args...), "-n", nsAddr), &out, &errOut); code != 0 {
		t.Fatalf("mqadmin %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out.String(), errOut.String())
	}
	return out.String()
}

// raftGroupStatus runs raftStatus -o json and returns g's group.
func raftGroupStatus(t testing.TB, g *raftGroup) (admin.RaftGroup, error) {
	t.Helper()
	var groups []admin.RaftGroup
	out := mqadminRaft(t, g.ns.addr, "raftStatus", "-o", "json")
	if err := json.Unmarshal([]byte(out), &groups); err != nil {
		t.Fatalf("raftStatus JSON: %v\n%s", err, out)
	}
	for _, rg := range groups {
		if rg.BrokerName == g.name {
			return rg, nil
		}
	}
	return admin.RaftGroup{}, fmt.Errorf("raftStatus lists no group %s: %s", g.name, out)
}

// checkSettled checks the group's raftStatus: three answering nodes, exactly one leader (the
// broker at leaderAddr), one term, nothing left to apply, identical commitlog ends.
func checkSettled(rg admin.RaftGroup, g *raftGroup, leaderAddr string) error {
	if len(rg.Nodes) != len(g.nodes) {
		return fmt.Errorf("%d nodes, want %d: %+v", len(rg.Nodes), len(g.nodes), rg.Nodes)
	}
	var leaders []string
	term := uint64(0)
	for _, n := range rg.Nodes {
		s := n.Status
		if s == nil {
			return fmt.Errorf("node %s (%s) has no status: %s", n.NodeID, n.Registered.Addr, n.Error)
		}
		if g.node(s.BrokerAddr) == nil {
			return fmt.Errorf("node %s reports broker address %s, not one of ours", s.NodeID, s.BrokerAddr)
		}
		if s.Role == protocol.RaftLeader {
			leaders = append(leaders, s.BrokerAddr)
		}
		if term == 0 {
			term = s.Term
		}
		if s.Term != term || s.Term == 0 {
			return fmt.Errorf("terms differ: node %s term %d, another %d", s.NodeID, s.Term, term)
		}
		if n.Lag != 0 || n.CommitLogLag != 0 {
			return fmt.Errorf("node %s lags %d entries, %d commitlog bytes", s.NodeID, n.Lag, n.CommitLogLag)
		}
		if len(s.Peers) != len(g.nodes) {
			return fmt.Errorf("node %s sees %d peers", s.NodeID, len(s.Peers))
		}
	}
	if len(leaders) != 1 || leaders[0] != leaderAddr {
		return fmt.Errorf("leaders %v, want exactly %s", leaders, leaderAddr)
	}
	return nil
}

// TestMqadminRaftStatusAndTransfer: raftStatus -o json against a three-node group shows three
// nodes, one leader (the route's master), one term and no lag once sends settle; transferLeader
// to a named follower makes it the route's master and raftStatus's leader.
func TestMqadminRaftStatusAndTransfer(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, withProp("allowUnauthenticatedRaftAdmin", "true"))
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic := uniq("RaftAdmin")
	for i := range 20 {
		sendRawOK(t, leader.addr, topic, fmt.Sprintf("m%d", i))
	}
	eventually(t, 10*time.Second, "raftStatus settled", func() error {
		rg, err := raftGroupStatus(t, g)
		if err != nil {
			return err
		}
		return checkSettled(rg, g, leader.addr)
	})
	// The table names every node once.
	table := mqadminRaft(t, ns.addr, "raftStatus", "-b", g.name)
	t.Logf("raftStatus:\n%s", table)
	for _, b := range g.nodes {
		if strings.Count(table, b.addr) != 1 {
			t.Fatalf("raftStatus table does not show %s once:\n%s", b.addr, table)
		}
	}

	target := g.followers(leader)[1]
	id := target.props["dLegerSelfId"]
	start := time.Now()
	out := mqadminRaft(t, ns.addr, "transferLeader", "-b", g.name, "-t", id)
	if !strings.Contains(out, "transfer leadership of "+g.name+" to "+id+" success.") {
		t.Fatalf("transferLeader output:\n%s", out)
	}
	if next := g.waitMaster(t, 10*time.Second, leader); next != target {
		t.Fatalf("after the transfer to %s the route's master is %s, want %s", id, next.addr, target.addr)
	}
	t.Logf("transfer to %s: master in the route after %v", id, time.Since(start).Round(time.Millisecond))
	sendRawOK(t, target.addr, topic, "after-transfer")
	eventually(t, 10*time.Second, "raftStatus after the transfer", func() error {
		rg, err := raftGroupStatus(t, g)
		if err != nil {
			return err
		}
		if rg.LeaderID != id {
			return fmt.Errorf("leader %q, want %s", rg.LeaderID, id)
		}
		return checkSettled(rg, g, target.addr)
	})

	// A change sent to a follower (here the old leader, as a stale route would) is forwarded to
	// the leader: leadership goes back.
	backID := leader.props["dLegerSelfId"]
	resp, err := rawRequest(leader.addr, int(remoting.TransferRaftLeader), map[string]string{"nodeId": backID, "timeoutMillis": "5000"}, nil, 8*time.Second)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("transfer via the follower %s: %v %+v", leader.addr, err, resp)
	}
	if next := g.waitMaster(t, 10*time.Second, target); next != leader {
		t.Fatalf("after the forwarded transfer to %s the route's master is %s, want %s", backID, next.addr, leader.addr)
	}

	// removePeer, then addPeer back: the configuration shrinks to two and grows to three again,
	// and the re-added node catches up (a send in between that it must apply).
	gone := g.followers(leader)[0]
	goneID := gone.props["dLegerSelfId"]
	var gonePeer string
	rg, err := raftGroupStatus(t, g)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range rg.Nodes {
		if n.NodeID == goneID {
			gonePeer = n.PeerAddr
		}
	}
	mqadminRaft(t, ns.addr, "removePeer", "-b", g.name, "-i", goneID)
	rg, err = raftGroupStatus(t, g)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range rg.Nodes {
		if n.Status != nil && n.Status.NodeID == rg.LeaderID && len(n.Status.Peers) != 2 {
			t.Fatalf("leader's configuration after removePeer %s: %+v", goneID, n.Status.Peers)
		}
	}
	sendRawOK(t, leader.addr, topic, "while-removed")
	mqadminRaft(t, ns.addr, "addPeer", "-b", g.name, "-i", goneID, "-a", gonePeer)
	eventually(t, 10*time.Second, "raftStatus after addPeer", func() error {
		rg, err := raftGroupStatus(t, g)
		if err != nil {
			return err
		}
		return checkSettled(rg, g, leader.addr)
	})
}
