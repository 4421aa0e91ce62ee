package integration

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"rocketraft/dledger"
	"rocketraft/fsm"
	"rocketraft/protocol"
)

// TestDivergedReplicaStops makes one follower apply an entry its leader never wrote, and checks
// that the replica digest checks (fsm/digest.go) catch it and take that node out loudly.
//
// The divergence is made the way a bug would make it: through the Raft port, which does not yet
// authenticate its peers, the test sends the follower an AppendEntries in the leader's name and
// term carrying one entry at the follower's next index (a digest rebase, which only changes that
// replica's digest) and a commit index covering it. The follower stores and applies it; the
// leader's own entry at that index has the same term, so Raft's log matching takes the two for
// the same entry and never repairs it. The next digest check the leader proposes must then find
// the follower's digest different: the follower logs REPLICA DIVERGED with the index, term and
// both digests, reports role "diverged" with them in raftStatus, refuses reads, unregisters and
// shuts its Raft node down, while the two others go on serving; restarted, it refuses to start
// and says to rebuild it.
func TestDivergedReplicaStops(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3)
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic := uniq("Diverge")
	p := newProducer(t, &cluster{ns: ns})
	sendFirst(t, p, topic, "before")
	var victim *broker
	for _, b := range g.nodes {
		if b != leader {
			victim = b
			break
		}
	}
	leaderID, leaderRaft := raftPeer(t, leader)
	_, victimRaft := raftPeer(t, victim)

	forger, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer forger.Close()
	eventually(t, 30*time.Second, "the follower applied an entry its leader never wrote", func() error {
		vs, err := raftStatusOf(victim.addr)
		if err != nil {
			return err
		}
		if vs.Diverged != nil {
			return nil
		}
		ls, err := raftStatusOf(leader.addr)
		if err != nil {
			return err
		}
		if vs.LastLogIndex != ls.LastLogIndex || vs.AppliedIndex != vs.LastLogIndex || ls.DigestCheckedIndex == 0 {
			return fmt.Errorf("follower at %d (applied %d), leader at %d: waiting for a quiet moment", vs.LastLogIndex, vs.AppliedIndex, ls.LastLogIndex)
		}
		next := vs.LastLogIndex + 1
		req := &raft.AppendEntriesRequest{
			RPCHeader:    raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(leaderID), Addr: []byte(leaderRaft)},
			Term:         vs.Term,
			PrevLogEntry: vs.LastLogIndex,
			PrevLogTerm:  vs.Term,
			// marked as the leader marks its entries, or the follower refuses it (dledger/storeguard.go)
			Entries: []*raft.Log{{Index: next, Term: vs.Term, Type: raft.LogCommand, Data: fsm.EncodeDigestCheck(0, 0),
				Extensions: dledger.EntryExtensions(victim.props["dLegerLogStore"])}},
			LeaderCommitIndex: next,
		}
		var resp raft.AppendEntriesResponse
		if err := forger.AppendEntries(raft.ServerID(leaderID), raft.ServerAddress(victimRaft), req, &resp); err != nil {
			return fmt.Errorf("forged AppendEntries: %w", err)
		}
		// The leader writes its own entry at that index (this send), then a digest check.
		sendFirst(t, p, topic, fmt.Sprintf("after forging %d", next))
		return fmt.Errorf("forged entry %d sent (accepted %v); waiting for the next digest check", next, resp.Success)
	})
	var vs *protocol.RaftStatus
	eventually(t, 20*time.Second, "the diverged follower reports it", func() error {
		var err error
		if vs, err = raftStatusOf(victim.addr); err != nil {
			return err
		}
		if vs.Role != protocol.RaftDiverged || vs.Diverged == nil {
			return fmt.Errorf("role %q, diverged %+v", vs.Role, vs.Diverged)
		}
		return nil
	})
	d := vs.Diverged
	if d.Index == 0 || d.CheckIndex <= d.Index || d.CheckTerm == 0 || d.LocalDigest == d.LeaderDigest || !strings.Contains(d.Message, "diverged") {
		t.Fatalf("divergence report %+v", d)
	}
	t.Logf("diverged follower %s reports: %s", victim.proc.name, d.Message)
	if !logContains(victim, "REPLICA DIVERGED") || !logContains(victim, fmt.Sprintf("%016s", d.LeaderDigest)) {
		t.Fatalf("%s's log does not report the divergence with the leader's digest %s", victim.proc.name, d.LeaderDigest)
	}
	if _, _, err := rawPull(victim.addr, "GDiverged", topic, 0, 0, "*"); err == nil || !strings.Contains(err.Error(), "diverged") {
		t.Fatalf("a pull from the diverged follower: %v, want an error saying it diverged", err)
	}
	eventually(t, 20*time.Second, "the diverged follower unregistered", func() error {
		addrs, err := registeredAddrs(ns.addr, g.name)
		if err != nil {
			return err
		}
		for id, a := range addrs {
			if a == victim.addr {
				return fmt.Errorf("still registered as brokerId %d", id)
			}
		}
		return nil
	})
	// The two others still make a majority and serve.
	sendFirst(t, p, topic, "after")
	for _, b := range g.nodes {
		if b == victim {
			continue
		}
		if rs, err := raftStatusOf(b.addr); err != nil || rs.Diverged != nil {
			t.Fatalf("%s: %v %+v", b.proc.name, err, rs)
		}
	}
	if err := victim.stop(); err != nil {
		t.Fatal(err)
	}
	victim.start(t)
	eventually(t, 30*time.Second, "the diverged node refuses to start", func() error {
		if victim.running() {
			return fmt.Errorf("still running")
		}
		return nil
	})
	if !logContains(victim, "replica diverged from its group") || !logContains(victim, "rebuild") {
		t.Fatalf("restarted, %s did not refuse with the divergence and how to rebuild:\n%s", victim.proc.name, tail(victim.logPath, 2048))
	}
}

// raftPeer returns b's Raft id and address from its dLegerPeers.
func raftPeer(t testing.TB, b *broker) (id, addr string) {
	t.Helper()
	id = b.props["dLegerSelfId"]
	for _, p := range strings.Split(b.props["dLegerPeers"], ";") {
		if rest, ok := strings.CutPrefix(p, id+"-"); ok {
			return id, rest
		}
	}
	t.Fatalf("%s not in dLegerPeers %q", id, b.props["dLegerPeers"])
	return "", ""
}
