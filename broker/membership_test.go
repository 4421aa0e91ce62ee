package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/dledger"
	"rocketraft/protocol"
	"rocketraft/remoting"
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

// Removal: only a configured non-voter that does not lead, knows no other leader and has not
// heard from one for the grace counts as removed; a voter or another leader's contact brings it
// back.
func TestRemovalDecisions(t *testing.T) {
	now := time.Now()
	grace := 2 * time.Second
	out := dledger.Membership{Configured: true, Servers: 2, LastContact: now.Add(-3 * time.Second)}
	notLeading := func() bool { return false }
	if !outOfGroup(out, "n1", notLeading, now, grace) {
		t.Fatalf("a silent non-voter is not counted removed: %+v", out)
	}
	for name, c := range map[string]struct {
		mod     func(*dledger.Membership)
		leading bool
	}{
		"joining, no configuration": {func(m *dledger.Membership) { m.Configured = false }, false},
		"voter":                     {func(m *dledger.Membership) { m.Voter = true }, false},
		"leading":                   {func(*dledger.Membership) {}, true},
		"another leader known":      {func(m *dledger.Membership) { m.LeaderID = "n0" }, false},
		"recent contact":            {func(m *dledger.Membership) { m.LastContact = now.Add(-time.Second) }, false},
	} {
		m := out
		c.mod(&m)
		if outOfGroup(m, "n1", func() bool { return c.leading }, now, grace) {
			t.Errorf("%s: counted removed", name)
		}
	}
	self := out
	self.LeaderID = "n1" // its own leadership, lost: no other leader known
	if !outOfGroup(self, "n1", notLeading, now, grace) {
		t.Errorf("itself as the last leader known keeps it in the group")
	}

	for _, c := range []struct {
		m    dledger.Membership
		back bool
	}{
		{dledger.Membership{Voter: true}, true},
		{dledger.Membership{LeaderID: "n0"}, true},
		{dledger.Membership{LeaderID: "n1"}, false},
		{dledger.Membership{Configured: true}, false},
	} {
		if got := backInGroup(c.m, "n1"); got != c.back {
			t.Errorf("%+v: back %v, want %v", c.m, got, c.back)
		}
	}
}

// A follower's lag is logged only when it lasts catchUpQuiet, then every catchUpLogInterval
// with its rate, and once when it is over; a leader is never behind.
func TestTrackLag(t *testing.T) {
	var out bytes.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info})
	w := &memberWatch{}
	t0 := time.Now()
	maxCalls := 0
	clMax := func() int64 { maxCalls++; return 4096 }

	w.trackLag(100, 100+catchUpLag+1, false, t0, logger, clMax)
	if w.behindSince != t0 || w.behindFrom != 100 || out.Len() != 0 {
		t.Fatalf("spell start: %+v, log %q", w, out.String())
	}
	w.trackLag(150, 1000, false, t0.Add(catchUpQuiet/2), logger, clMax)
	if out.Len() != 0 {
		t.Fatalf("a short lag was logged: %q", out.String())
	}
	w.trackLag(200, 1000, false, t0.Add(catchUpQuiet), logger, clMax)
	if !w.announced || !strings.Contains(out.String(), "catching up with the leader") || !strings.Contains(out.String(), "behind=800") {
		t.Fatalf("announce: %+v, log %q", w, out.String())
	}
	out.Reset()
	w.trackLag(300, 1000, false, t0.Add(catchUpQuiet+time.Second), logger, clMax)
	if out.Len() != 0 {
		t.Fatalf("progress logged before catchUpLogInterval: %q", out.String())
	}
	w.trackLag(700, 1000, false, t0.Add(catchUpQuiet+catchUpLogInterval), logger, clMax)
	if s := out.String(); !strings.Contains(s, "entriesPerSec=100") || !strings.Contains(s, "commitLogMaxOffset=4096") || maxCalls != 1 {
		t.Fatalf("progress: %q (commitLogMax asked %d times)", s, maxCalls)
	}
	out.Reset()
	w.trackLag(990, 1000, false, t0.Add(10*time.Second), logger, clMax)
	if s := out.String(); !strings.Contains(s, "caught up with the leader") || !strings.Contains(s, "entries=890") || !strings.Contains(s, "took=10s") {
		t.Fatalf("caught up: %q", s)
	}
	if !w.behindSince.IsZero() {
		t.Fatalf("spell not over: %+v", w)
	}

	// A spell that ends before it was announced logs nothing; leading ends any spell.
	out.Reset()
	w.trackLag(0, 1000, false, t0, logger, clMax)
	w.trackLag(1000, 1000, false, t0.Add(time.Millisecond), logger, clMax)
	w.trackLag(0, 1000, false, t0, logger, clMax)
	w.trackLag(0, 1000, true, t0.Add(time.Hour), logger, clMax)
	if out.Len() != 0 || !w.behindSince.IsZero() {
		t.Fatalf("unannounced spells: %+v, log %q", w, out.String())
	}
}

// A joining node logs the leader's first contact, then asks the leader (at most once a second)
// until it has applied nearly all the leader committed.
func TestLogJoining(t *testing.T) {
	rp := adminRaftPlace("n3")
	ra, _, peers, out := testRaftAdmin(rp)
	ra.leaderAddr = func(context.Context) string { return "127.0.0.1:10921" }
	leader := protocol.RaftStatus{NodeID: "n0", Role: protocol.RaftLeader, CommitIndex: 5000}
	peers.answers = map[string]func(*remoting.Command) (*remoting.Command, error){"127.0.0.1:10921": jsonAnswer(t, leader)}
	w := &memberWatch{joining: true}
	t0 := time.Now()

	ra.logJoining(rp, w, dledger.Membership{}, 0, 0, t0)
	if !w.joinedAt.IsZero() || out.Len() != 0 {
		t.Fatalf("joined before any contact: %+v %q", w, out.String())
	}
	ra.logJoining(rp, w, dledger.Membership{Configured: true, LeaderID: "n0"}, 10, 10, t0)
	if w.joinedAt != t0 || !strings.Contains(out.String(), "joining: the leader has added this node") {
		t.Fatalf("first contact: %+v %q", w, out.String())
	}
	ra.logJoining(rp, w, dledger.Membership{Configured: true, LeaderID: "n0"}, 1000, 5000, t0)
	if !w.joining || len(peers.calls) != 1 || w.nextLeaderAsk != t0.Add(time.Second) {
		t.Fatalf("far behind: joining=%v calls %v next %v", w.joining, peers.calls, w.nextLeaderAsk)
	}
	ra.logJoining(rp, w, dledger.Membership{Configured: true, LeaderID: "n0"}, 5000, 5000, t0.Add(500*time.Millisecond))
	if !w.joining || len(peers.calls) != 1 {
		t.Fatalf("asked the leader again within a second: %v", peers.calls)
	}
	ra.logJoining(rp, w, dledger.Membership{Configured: true, LeaderID: "n0"}, 5000-catchUpLag, 5000, t0.Add(2*time.Second))
	if w.joining || len(peers.calls) != 2 || !strings.Contains(out.String(), "joined the group and caught up") ||
		!strings.Contains(out.String(), "leaderCommitIndex=5000") || !strings.Contains(out.String(), "took=2s") {
		t.Fatalf("caught up: joining=%v calls %v log %q", w.joining, peers.calls, out.String())
	}
}

// The preferred leader takes over after a healthy streak; an unhealthy check restarts it; a
// failed transfer backs off doubling up to the cap; a hand-over that comes back soon doubles
// the streak the next one needs.
func TestPreferredPace(t *testing.T) {
	var p preferredPace
	for i := 1; i < preferredHealthyChecks; i++ {
		if p.observe(true) {
			t.Fatalf("handed over after %d healthy checks", i)
		}
	}
	if p.observe(false) || p.healthy != 0 {
		t.Fatalf("an unhealthy check kept the streak: %+v", p)
	}
	hand := 0
	for i := 1; i <= preferredHealthyChecks; i++ {
		if p.observe(true) {
			hand = i
		}
	}
	if hand != preferredHealthyChecks || p.healthy != 0 {
		t.Fatalf("handed over at check %d, want %d; %+v", hand, preferredHealthyChecks, p)
	}

	want := []time.Duration{preferredBackoffMin, 2 * preferredBackoffMin, 4 * preferredBackoffMin, 8 * preferredBackoffMin, preferredBackoffMax, preferredBackoffMax}
	for i, w := range want {
		if got := p.failed(); got != w {
			t.Fatalf("failure %d: back off %v, want %v", i+1, got, w)
		}
	}

	t0 := time.Now()
	if p.handedOver(t0) || p.backoff != 0 || p.needed() != preferredHealthyChecks {
		t.Fatalf("first hand-over: %+v needed %d", p, p.needed())
	}
	for i := 1; i <= preferredMaxFlapShift+2; i++ {
		if !p.handedOver(t0.Add(time.Duration(i) * time.Second)) {
			t.Fatalf("hand-over %d within the flap window not a flap", i)
		}
		if want := preferredHealthyChecks << min(i, preferredMaxFlapShift); p.needed() != want {
			t.Fatalf("after %d flaps: %d checks needed, want %d", i, p.needed(), want)
		}
	}
	if p.handedOver(t0.Add(time.Hour)) || p.needed() != preferredHealthyChecks {
		t.Fatalf("a hand-over after the flap window still counts flaps: %+v", p)
	}
}

// routeBrokerAddrs reads this group's addresses from the route and reports every failure with
// the name server and the broker name.
func TestRouteBrokerAddrs(t *testing.T) {
	addrs := map[int64]string{0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}
	route := protocol.TopicRouteData{BrokerDatas: []*protocol.BrokerData{
		nil,
		{BrokerName: "other", BrokerAddrs: map[int64]string{0: "127.0.0.1:1"}},
		{BrokerName: "rb", BrokerAddrs: addrs},
	}}
	ns := &fakeInvoker{answers: map[string]func(*remoting.Command) (*remoting.Command, error){
		"ns-ok":      jsonAnswer(t, route),
		"ns-missing": jsonAnswer(t, protocol.TopicRouteData{}),
		"ns-refuses": codeAnswer(remoting.TopicNotExist, "no route"),
		"ns-garbage": func(req *remoting.Command) (*remoting.Command, error) {
			resp := req.NewResponse(remoting.Success, "")
			resp.Body = []byte("{not json")
			return resp, nil
		},
	}}
	got, err := routeBrokerAddrs(context.Background(), ns, "rb", "ns-ok")
	if err != nil || len(got) != 2 || got[1] != "127.0.0.1:10921" {
		t.Fatalf("route: %v %v", got, err)
	}
	for ns2, want := range map[string]string{
		"ns-missing": "route of rb from ns-missing lists no such broker",
		"ns-refuses": fmt.Sprintf("route of rb from ns-refuses: code %d no route", remoting.TopicNotExist),
		"ns-garbage": "decode route of rb",
		"ns-dead":    "route of rb from ns-dead: dial ns-dead",
	} {
		if _, err := routeBrokerAddrs(context.Background(), ns, "rb", ns2); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", ns2, err, want)
		}
	}
	if ns.calls[0] != fmt.Sprintf("ns-ok:%d", remoting.GetRouteInfoByTopic) {
		t.Errorf("asked %v", ns.calls)
	}
}

// A peer that cannot be reached is dialled afresh next time; its refusals are reported.
func TestPeerRaftStatus(t *testing.T) {
	ra, _, peers, _ := testRaftAdmin(adminRaftPlace("n0"))
	peers.answers = map[string]func(*remoting.Command) (*remoting.Command, error){
		"p-ok":   jsonAnswer(t, protocol.RaftStatus{NodeID: "n1", Role: protocol.RaftFollower}),
		"p-busy": codeAnswer(remoting.SystemError, "busy"),
	}
	if rs, err := ra.peerRaftStatus(context.Background(), "p-ok"); err != nil || rs.NodeID != "n1" || rs.Role != protocol.RaftFollower {
		t.Fatalf("ok: %+v %v", rs, err)
	}
	if _, err := ra.peerRaftStatus(context.Background(), "p-busy"); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("busy: %v", err)
	}
	if len(peers.closed) != 0 {
		t.Fatalf("closed a connection that answered: %v", peers.closed)
	}
	if _, err := ra.peerRaftStatus(context.Background(), "p-dead"); err == nil || !strings.Contains(err.Error(), "raft status of p-dead") {
		t.Fatalf("dead: %v", err)
	}
	if len(peers.closed) != 1 || peers.closed[0] != "p-dead" {
		t.Fatalf("dead peer's connection not closed: %v", peers.closed)
	}
}

// findPreferred asks the address under the preferred node's expected brokerId first, skips
// this node's own address, and reports why it found nothing.
func TestFindPreferred(t *testing.T) {
	rp := adminRaftPlace("n0", dledger.Peer{ID: "n0"}, dledger.Peer{ID: "n1"}, dledger.Peer{ID: "n2"})
	ra, ns, peers, _ := testRaftAdmin(rp)
	ra.cfg.NamesrvAddr = "ns-a;ns-b"
	route := protocol.TopicRouteData{BrokerDatas: []*protocol.BrokerData{{BrokerName: "rb", BrokerAddrs: map[int64]string{
		0: "127.0.0.1:10911", // this node
		1: "addr-n1", 3: "addr-n2",
	}}}}
	ns.answers = map[string]func(*remoting.Command) (*remoting.Command, error){"ns-b": jsonAnswer(t, route)}
	peers.answers = map[string]func(*remoting.Command) (*remoting.Command, error){
		"addr-n1": jsonAnswer(t, protocol.RaftStatus{NodeID: "n1"}),
		"addr-n2": jsonAnswer(t, protocol.RaftStatus{NodeID: "n2", Term: 7}),
	}

	addr, rs, err := ra.findPreferred(context.Background(), rp, "n2")
	if err != nil || addr != "addr-n2" || rs.Term != 7 {
		t.Fatalf("n2: %q %+v %v", addr, rs, err)
	}
	// n2's dLegerPeers position gives brokerId 3: asked first, so no other peer was asked.
	if len(peers.calls) != 1 || !strings.HasPrefix(peers.calls[0], "addr-n2:") {
		t.Fatalf("asked %v", peers.calls)
	}

	// Nobody answers as n9: the last failure is reported (the dead name server's here, since
	// every peer answered), and without it that nobody answered as n9.
	peers.calls = nil
	if _, _, err := ra.findPreferred(context.Background(), rp, "n9"); err == nil || !strings.Contains(err.Error(), "find preferred leader n9: route of rb from ns-a") {
		t.Fatalf("n9: %v", err)
	}
	ra.cfg.NamesrvAddr = "ns-b"
	if _, _, err := ra.findPreferred(context.Background(), rp, "n9"); !errors.Is(err, errPreferredNotFound) {
		t.Fatalf("n9 with every server answering: %v", err)
	}
	ra.cfg.NamesrvAddr = "ns-a;ns-b"
	for _, c := range peers.calls {
		if strings.HasPrefix(c, "127.0.0.1:10911:") {
			t.Fatalf("asked itself: %v", peers.calls)
		}
	}

	delete(peers.answers, "addr-n1")
	if _, _, err := ra.findPreferred(context.Background(), rp, "n1"); err == nil || !strings.Contains(err.Error(), "find preferred leader n1: raft status of addr-n1") {
		t.Fatalf("n1 unreachable: %v", err)
	}
}

// unregisterAsync unregisters on its own goroutine, which the broker's wait group tracks.
func TestUnregisterAsync(t *testing.T) {
	ra, _, _, _ := testRaftAdmin(nil)
	release, called := make(chan struct{}), make(chan struct{})
	ra.unregister = func() { <-release; close(called) }
	ra.unregisterAsync() // returns while unregister still waits
	close(release)
	ra.wg.Wait()
	select {
	case <-called:
	default:
		t.Fatal("the wait group ended before unregister ran")
	}
}
