package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	"rocketraft/dledger"
	"rocketraft/protocol"
)

// waitFor polls cond every 10 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A dLegerJoin node registers nothing until the leader adds it, then follows (brokerId = its
// dLegerPeers position + 1) and applies what the group holds; removed, it notices, refuses
// writes saying why and registers nothing; added back, it follows again.
func TestDLegerJoinRemoveRejoin(t *testing.T) {
	a0, a1 := freeAddr(t), freeAddr(t)
	b0 := startDLeger(t, dlegerConfig(t, t.TempDir(), "n0", "n0-"+a0))
	defer b0.Close()
	waitRole(t, b0, roleLeader)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := b0.commitLog.Append(ctx, [][]byte{testRecord(t, "T", "before-join")}); err != nil {
		t.Fatal(err)
	}

	cfg1 := dlegerConfig(t, t.TempDir(), "n1", "n0-"+a0+";n1-"+a1)
	cfg1.DLegerJoin = true
	b1 := startDLeger(t, cfg1)
	defer b1.Close()
	time.Sleep(300 * time.Millisecond) // several role polls: nothing may happen without the leader
	if m := raftOf(t, b1).node.Membership(); m.Configured || raftOf(t, b1).role.get() != roleUnknown {
		t.Fatalf("joiner before AddVoter: %+v role %d", m, raftOf(t, b1).role.get())
	}

	if err := raftOf(t, b0).node.AddVoter(ctx, "n1", a1); err != nil {
		t.Fatal(err)
	}
	waitRole(t, b1, roleFollower)
	if b1.brokerID() != 2 {
		t.Fatalf("joined n1 registers as brokerId %d, want 2", b1.brokerID())
	}
	waitFor(t, 10*time.Second, "n1 applies the group's data", func() bool { off, _ := b1.puller.reads.queueMaxOffset("T", 0); return off == 1 })

	if err := raftOf(t, b0).node.RemoveVoter(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "n1 notices its removal", func() bool { return raftOf(t, b1).removed.Load() })
	if raftOf(t, b1).role.get() != roleUnknown {
		t.Fatalf("removed n1 has role %d", raftOf(t, b1).role.get())
	}
	if ok, remark := b1.writable(); ok || !strings.Contains(remark, "removed") {
		t.Fatalf("removed n1: writable=%v %q", ok, remark)
	}
	if _, err := b0.commitLog.Append(ctx, [][]byte{testRecord(t, "T", "after-remove")}); err != nil {
		t.Fatalf("append with one voter left: %v", err)
	}

	if err := raftOf(t, b0).node.AddVoter(ctx, "n1", a1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "n1 a member again", func() bool { return !raftOf(t, b1).removed.Load() && raftOf(t, b1).role.get() == roleFollower })
	waitFor(t, 10*time.Second, "n1 applies what it missed", func() bool { off, _ := b1.puller.reads.queueMaxOffset("T", 0); return off == 2 })
}

// judgePreferred accepts only a follower of this leader in its term that heard from it recently
// and has applied nearly everything committed.
func TestJudgePreferred(t *testing.T) {
	leader := dledger.Status{ID: "n0", Term: 5, CommitIndex: 1000}
	good := protocol.RaftStatus{NodeID: "n1", Role: protocol.RaftFollower, Term: 5, LeaderID: "n0", LastContactAgoMs: 40, AppliedIndex: 990}
	if err := judgePreferred(&good, leader, 500*time.Millisecond); err != nil {
		t.Fatalf("healthy follower rejected: %v", err)
	}
	for name, mod := range map[string]func(*protocol.RaftStatus){
		"candidate":      func(s *protocol.RaftStatus) { s.Role = "candidate" },
		"old term":       func(s *protocol.RaftStatus) { s.Term = 4 },
		"other leader":   func(s *protocol.RaftStatus) { s.LeaderID = "n2" },
		"no contact":     func(s *protocol.RaftStatus) { s.LastContactAgoMs = -1 },
		"stale contact":  func(s *protocol.RaftStatus) { s.LastContactAgoMs = 900 },
		"catching up":    func(s *protocol.RaftStatus) { s.AppliedIndex = 1000 - preferredMaxLag - 1 },
		"just restarted": func(s *protocol.RaftStatus) { s.AppliedIndex, s.LeaderID = 0, "" },
	} {
		s := good
		mod(&s)
		if err := judgePreferred(&s, leader, 500*time.Millisecond); err == nil {
			t.Errorf("%s: accepted %+v", name, s)
		}
	}
}
