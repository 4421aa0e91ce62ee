package dledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

const electionBound = 5 * time.Second // generous for -race on 2 cores; observed figures are logged

func TestBootstrapElectsLeader(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	lead := c.leader(electionBound)
	select {
	case v := <-lead.LeaderChanges():
		if !v {
			t.Fatal("leader's LeaderChanges delivered false")
		}
	case <-time.After(electionBound):
		t.Fatal("no LeaderChanges on the leader")
	}
	s := lead.Status()
	if s.State != "Leader" || !s.LeaderReady || s.LeaderID != lead.ID() || s.Term == 0 || len(s.Configuration) != 3 {
		t.Fatalf("leader status %+v", s)
	}
	for _, sv := range s.Configuration {
		if sv.Suffrage != "Voter" {
			t.Fatalf("server %+v", sv)
		}
	}
	b, _ := json.Marshal(c.follower().Status())
	for _, k := range []string{`"state":"Follower"`, `"leaderId":"` + lead.ID() + `"`, `"appliedIndex"`, `"configuration":[`} {
		if !strings.Contains(string(b), k) {
			t.Fatalf("follower status JSON %s lacks %s", b, k)
		}
	}
}

func TestApplyReplicatesInOrder(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	lead := c.leader(electionBound)
	// Concurrent applies: the order is whatever the leader's log says; every FSM must agree.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				resp, err := lead.Apply(context.Background(), fmt.Appendf(nil, "g%d-%d", g, i))
				if err != nil {
					errs <- err
					return
				}
				if s, _ := resp.(string); !strings.HasPrefix(s, "applied ") {
					errs <- fmt.Errorf("response %v", resp)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := c.fsms[lead.ID()].(*testFSM).log()
	if len(want) != 200 {
		t.Fatalf("leader applied %d", len(want))
	}
	c.sameLogs(electionBound, want)
}

func TestApplyOnFollowerIsNotLeader(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	lead := c.leader(electionBound)
	_, err := c.follower().Apply(context.Background(), []byte("x"))
	var nle *NotLeaderError
	if !errors.Is(err, ErrNotLeader) || !errors.As(err, &nle) {
		t.Fatalf("err = %v, want NotLeaderError", err)
	}
	if nle.LeaderID != lead.ID() || nle.LeaderAddr != lead.Addr() {
		t.Fatalf("NotLeaderError names %s@%s, want %s@%s", nle.LeaderID, nle.LeaderAddr, lead.ID(), lead.Addr())
	}
}

// TestLeaderFailover kills (shuts down) the leader three times, restarting it each time, and
// reports how long the survivors took to elect a ready leader.
func TestLeaderFailover(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	lead := c.leader(electionBound)
	want := applyN(t, lead, "before", 10)
	for round := 0; round < 3; round++ {
		old := lead.ID()
		start := time.Now()
		c.stop(old)
		lead = c.leader(electionBound)
		took := time.Since(start)
		t.Logf("round %d: leader %s shut down, %s ready leader after %v", round, old, lead.ID(), took.Round(time.Millisecond))
		if lead.ID() == old {
			t.Fatal("stopped node is leader")
		}
		want = append(want, applyN(t, lead, fmt.Sprintf("after%d", round), 5)...)
		c.restart(old)
		c.sameLogs(electionBound, want)
	}
}

func TestRestartWithExistingState(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	lead := c.leader(electionBound)
	want := applyN(t, lead, "a", 20)
	c.sameLogs(electionBound, want)
	f := c.follower()
	id, termBefore := f.ID(), f.Status().Term
	c.stop(id)
	want = append(want, applyN(t, lead, "b", 20)...)
	n := c.restart(id)
	// No re-bootstrap: the restarted node keeps its term and the committed configuration, and its
	// fresh FSM is rebuilt from its own log plus what it missed.
	if s := n.Status(); s.Term < termBefore || len(s.Configuration) != 3 || s.LastLogIndex == 0 {
		t.Fatalf("restarted status %+v (term before %d)", s, termBefore)
	}
	c.sameLogs(electionBound, want)
	want = append(want, applyN(t, lead, "c", 5)...)
	c.sameLogs(electionBound, want)
}

func TestTransferLeadership(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	lead := c.leader(electionBound)
	<-lead.LeaderChanges() // true
	target := c.follower().ID()
	ctx, cancel := context.WithTimeout(context.Background(), electionBound)
	defer cancel()
	start := time.Now()
	if err := lead.TransferLeadership(ctx, target); err != nil {
		t.Fatal(err)
	}
	if got := c.leader(electionBound); got.ID() != target {
		t.Fatalf("leader is %s, want %s", got.ID(), target)
	}
	t.Logf("transfer to %s took %v", target, time.Since(start).Round(time.Millisecond))
	select {
	case v := <-lead.LeaderChanges():
		if v {
			t.Fatal("old leader's LeaderChanges delivered true")
		}
	case <-time.After(electionBound):
		t.Fatal("old leader saw no LeaderChanges")
	}
	if err := lead.TransferLeadership(ctx, ""); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("transfer from a follower: %v", err)
	}
	newLead := c.nodes[target]
	if err := newLead.TransferLeadership(ctx, "nope"); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("transfer to unknown: %v", err)
	}
	if err := newLead.TransferLeadership(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if got := c.leader(electionBound); got.ID() == target {
		t.Fatal("leadership did not move")
	}
}

func TestAddVoterCatchesUpBySnapshotThenRemove(t *testing.T) {
	for _, store := range []string{LogStoreWAL, LogStoreBolt} {
		t.Run(store, func(t *testing.T) {
			testAddVoter(t, func(cfg *Config) {
				cfg.LogStore, cfg.SnapshotThreshold, cfg.TrailingLogs = store, 16, 8
				cfg.WALSegmentSize = 1024 // compaction frees whole segments only
			})
		})
	}
}

func testAddVoter(t *testing.T, small func(*Config)) {
	c := newCluster(t, 3, small, nil)
	lead := c.leader(electionBound)
	want := applyN(t, lead, "a", 60)
	if err := lead.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if first, _ := lead.Raft().Stats()["last_snapshot_index"]; first == "0" {
		t.Fatal("no snapshot taken")
	}

	ln := mustListen(t)
	p := Peer{ID: "n3", Addr: ln.Addr().String()}
	cfg := Config{Group: "g", SelfID: p.ID, Peers: append(append([]Peer(nil), c.peers...), p), DataDir: t.TempDir(), Listener: ln, Join: true, Logger: testLogger(p.ID)}
	small(&cfg)
	fsm := &testFSM{}
	n3, err := Open(cfg, fsm)
	if err != nil {
		t.Fatal(err)
	}
	c.cfgs[p.ID], c.fsms[p.ID], c.nodes[p.ID] = cfg, fsm, n3
	ctx, cancel := context.WithTimeout(context.Background(), electionBound)
	defer cancel()
	if err := lead.AddVoter(ctx, p.ID, p.Addr); err != nil {
		t.Fatal(err)
	}
	c.sameLogs(electionBound, want)
	if fsm.restores.Load() == 0 {
		t.Fatal("new voter caught up without a snapshot although the log was truncated")
	}
	want = append(want, applyN(t, lead, "b", 10)...)
	c.sameLogs(electionBound, want)
	if s := n3.Status(); len(s.Configuration) != 4 {
		t.Fatalf("n3 configuration %+v", s.Configuration)
	}

	if err := lead.RemoveVoter(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if s := lead.Status(); len(s.Configuration) != 3 {
		t.Fatalf("after remove: %+v", s.Configuration)
	}
	c.stop(p.ID)
	want = append(want, applyN(t, lead, "c", 5)...)
	c.sameLogs(electionBound, want)
	if err := lead.RemoveVoter(ctx, "n9"); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("remove unknown: %v", err)
	}
}

func TestOpenRejectsOtherLogStore(t *testing.T) {
	c := newCluster(t, 1, func(cfg *Config) { cfg.LogStore = LogStoreBolt }, nil)
	c.leader(electionBound)
	c.stop("n0")
	cfg := c.cfgs["n0"]
	cfg.Listener, cfg.LogStore = nil, LogStoreWAL
	var ce *ConfigError
	if _, err := Open(cfg, &testFSM{}); !errors.As(err, &ce) || ce.Key != "dLegerLogStore" {
		t.Fatalf("open wal over bolt data: %v", err)
	}
	cfg.LogStore = LogStoreBolt
	c.fsms["n0"] = &testFSM{}
	c.nodes["n0"] = openRetry(t, cfg, c.fsms["n0"])
	c.leader(electionBound) // restarted on its own state, a single voter elects itself
}

// TestLosingQuorum stops both followers: the leader's pending write fails instead of hanging, and
// the leader steps down (LeaderChanges false) within its lease.
func TestLosingQuorum(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	lead := c.leader(electionBound)
	if v := <-lead.LeaderChanges(); !v {
		t.Fatal("want true first")
	}
	for id := range c.nodes {
		if id != lead.ID() {
			c.stop(id)
		}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), electionBound)
	defer cancel()
	_, err := lead.Apply(ctx, []byte("lost"))
	if !errors.Is(err, ErrLeadershipLost) && !errors.Is(err, ErrNotLeader) {
		t.Fatalf("apply without quorum: %v", err)
	}
	select {
	case v := <-lead.LeaderChanges():
		if v {
			t.Fatal("LeaderChanges delivered true")
		}
	case <-ctx.Done():
		t.Fatal("leader did not step down")
	}
	t.Logf("apply failed with %q; stepped down after %v", err, time.Since(start).Round(time.Millisecond))
	if lead.IsLeader() {
		t.Fatal("still leader")
	}
}

// TestFastFailover: with a heartbeat timeout of 3 s, a follower's timer cannot start an election
// for at least 3 s after the leader stops; the probes of the leader's Raft port (liveness.go) see
// its connections end and its port refuse, so a new leader is ready long before that. With
// NoFastFailover nobody leads within 2 s.
func TestFastFailover(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			c := newCluster(t, 3, func(cfg *Config) {
				cfg.HeartbeatTimeout = 3 * time.Second
				cfg.ElectionTimeout = 3 * time.Second
				cfg.LeaderLeaseTimeout = 3 * time.Second
				cfg.NoFastFailover = !fast
			}, nil)
			lead := c.leader(20 * time.Second)
			applyN(t, lead, "before", 5)
			old := lead.ID()
			time.Sleep(300 * time.Millisecond) // the followers' probes connect
			start := time.Now()
			c.stop(old)
			if !fast {
				time.Sleep(2 * time.Second)
				for id, n := range c.nodes {
					if n.IsLeader() {
						t.Fatalf("%s leads within 2 s of the stop without fast failover", id)
					}
				}
				return
			}
			next := c.leader(2 * time.Second)
			t.Logf("leader %s stopped; %s ready leader after %v (heartbeat timeout 3 s)", old, next.ID(), time.Since(start).Round(time.Millisecond))
			applyN(t, next, "after", 5)
		})
	}
}

// Membership tracks a joining node from "no configuration" to voter and back out; a leader that
// removes itself steps down but keeps Raft running (ShutdownOnRemove off), reporting itself a
// non-member, while the rest elect a new leader.
func TestMembershipJoinRemoveAndRemovedLeader(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	lead := c.leader(electionBound)
	ln := mustListen(t)
	p := Peer{ID: "n3", Addr: ln.Addr().String()}
	cfg := Config{Group: "g", SelfID: p.ID, Peers: append(append([]Peer(nil), c.peers...), p), DataDir: t.TempDir(), Listener: ln, Join: true, Logger: testLogger(p.ID)}
	fsm := &testFSM{}
	n3, err := Open(cfg, fsm)
	if err != nil {
		t.Fatal(err)
	}
	c.cfgs[p.ID], c.fsms[p.ID], c.nodes[p.ID] = cfg, fsm, n3
	if m := n3.Membership(); m.Configured || m.Voter || m.LeaderID != "" {
		t.Fatalf("joiner before AddVoter: %+v", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), electionBound)
	defer cancel()
	if err := lead.AddVoter(ctx, p.ID, p.Addr); err != nil {
		t.Fatal(err)
	}
	eventually(t, electionBound, func() error {
		if m := n3.Membership(); !m.Voter || m.Servers != 4 || m.LeaderID != lead.ID() {
			return fmt.Errorf("n3 after AddVoter: %+v", m)
		}
		return nil
	})
	// Remove it only once it has caught up, as an operator would. hashicorp/raft sends a removed
	// node its removal only as a best effort: if the removal arrives while the leader is still
	// sending the node older entries one RPC at a time, that loop takes the stop signal and the
	// node never learns it was removed (seen under load: n3 kept campaigning as a voter).
	eventually(t, electionBound, func() error {
		if want, got := lead.Status().LastLogIndex, n3.Status().AppliedIndex; got < want {
			return fmt.Errorf("n3 applied %d of the leader's %d", got, want)
		}
		return nil
	})
	if err := lead.RemoveVoter(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, electionBound, func() error {
		if m := n3.Membership(); m.Voter || !m.Configured || m.Servers != 3 {
			return fmt.Errorf("n3 after RemoveVoter: %+v", m)
		}
		return nil
	})
	c.stop(p.ID)

	if err := lead.RemoveVoter(ctx, lead.ID()); err != nil {
		t.Fatal(err)
	}
	old := lead
	delete(c.nodes, old.ID())
	next := c.leader(electionBound)
	if next == old {
		t.Fatal("the removed leader still leads")
	}
	if st := old.Status().State; st == "Shutdown" || st == "Leader" {
		t.Fatalf("removed leader is in state %s", st)
	}
	if m := old.Membership(); m.Voter || !m.Configured {
		t.Fatalf("removed leader's membership %+v", m)
	}
	c.nodes[old.ID()] = old // shut down by the cleanup
}
