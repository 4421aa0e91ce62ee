package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"rocketraft/internal/netlab"
	"rocketraft/protocol"
)

// Never-cut leaders across heals: in the network-namespace lab, links of one follower are cut
// (silent nftables drops) for longer than the election timeout and healed, again and again,
// under sync sends. The leader keeps a majority throughout (it always reaches the other
// follower), so it must keep its leadership across every cut and heal: same leader, same term,
// no "entering follower state" in its log; and nothing acknowledged is lost.
//
// The cuts cycle through: a follower cut from both others; a follower cut from the leader only
// (it still sees the other follower); a bridge (the two followers cut from each other, both
// see the leader); one-way loss from the leader to a follower; one-way loss from a follower to
// the leader. The followers take turns.
//
// A sixth kind cuts the leader itself from both followers: the leader they elect meanwhile was
// never cut and is the one watched across the heal.
//
//	RR_FOLLOWER_CUTS           cut/heal cycles (default 6, one of each kind; make faults: 60)
//	RR_FOLLOWER_CUT_LENGTH     how long each cut lasts (default 2s; beyond the election timeout)
//	RR_FOLLOWER_CUT_WATCH      how long after each heal the leader is watched (default 2s)
//	RR_FOLLOWER_CUT_PRODUCERS  sync producers (default 2)
//	RR_FOLLOWER_CUT_KINDS      comma-separated indexes into followerCuts to cycle instead of all
//	RR_FOLLOWER_CUT_BUSY_DISK  1: keep the disk busy meanwhile (startDiskLoad), to starve fsyncs

// followerCut is one kind of cut that leaves the leader a majority.
type followerCut struct {
	name string
	// leaderCut: the leader itself is cut from both followers; the node watched across the
	// heal is the leader the followers elect meanwhile, which was never cut.
	leaderCut bool
	// apply cuts links in lab: leader l, cut follower f, other follower o.
	apply func(lab *netlab.Lab, l, f, o *netlab.Host) error
}

var followerCuts = []followerCut{
	{name: "follower cut from both others", apply: func(lab *netlab.Lab, l, f, o *netlab.Host) error {
		if err := lab.Cut(f, l); err != nil {
			return err
		}
		return lab.Cut(f, o)
	}},
	{name: "follower cut from the leader only", apply: func(lab *netlab.Lab, l, f, o *netlab.Host) error { return lab.Cut(f, l) }},
	{name: "bridge: the followers cut from each other", apply: func(lab *netlab.Lab, l, f, o *netlab.Host) error { return lab.Cut(f, o) }},
	{name: "one-way: leader to follower dropped", apply: func(lab *netlab.Lab, l, f, o *netlab.Host) error { return lab.CutOneWay(l, f) }},
	{name: "one-way: follower to leader dropped", apply: func(lab *netlab.Lab, l, f, o *netlab.Host) error { return lab.CutOneWay(f, l) }},
	{name: "leader cut from both followers", leaderCut: true, apply: func(lab *netlab.Lab, l, f, o *netlab.Host) error {
		if err := lab.Cut(l, f); err != nil {
			return err
		}
		return lab.Cut(l, o)
	}},
}

// TestChaosFollowerCutLeaderStays runs in the lab: the name server, three nodes and the
// producers each on a host of their own.
func TestChaosFollowerCutLeaderStays(t *testing.T) {
	if labHosts == nil {
		t.Parallel()
		runInLab(t, t.Name(), 4, 15*time.Minute)
		return
	}
	kinds := followerCuts
	if v := os.Getenv("RR_FOLLOWER_CUT_KINDS"); v != "" {
		kinds = nil
		for _, f := range strings.Split(v, ",") {
			i, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || i < 0 || i >= len(followerCuts) {
				t.Fatalf("RR_FOLLOWER_CUT_KINDS=%q: want indexes 0-%d of followerCuts", v, len(followerCuts)-1)
			}
			kinds = append(kinds, followerCuts[i])
		}
	}
	cycles := envPositive(t, "RR_FOLLOWER_CUTS", len(kinds))
	cutLen := cutEnvDuration(t, "RR_FOLLOWER_CUT_LENGTH", 2*time.Second)
	watch := cutEnvDuration(t, "RR_FOLLOWER_CUT_WATCH", 2*time.Second)

	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, chaosProps(nil)...)
	var hosts []netlab.Host
	for i := range g.nodes {
		ip, netns := brokerHost(i)
		hosts = append(hosts, netlab.Host{Name: netns, IP: ip})
	}
	lab, err := netlab.Attach(hosts)
	if err != nil {
		t.Fatalf("attach to the lab: %v", err)
	}
	t.Cleanup(func() { _ = lab.Heal() })
	host := func(b *broker) *netlab.Host { return lab.Hosts()[g.nodeIndex(b)] }

	leader := g.waitMaster(t, 20*time.Second, nil)
	topic := uniq("FollowerCut")
	first := createTopicBySend(t, ns.addr, newProducer(t, &cluster{ns: ns}), topic, "create-topic")
	load := startChaosLoad(t, ns.addr, topic, envPositive(t, "RR_FOLLOWER_CUT_PRODUCERS", 2), true)
	load.addRaw(attempt{body: first.body, ok: true}, &first)
	load.waitAcked(100, 30*time.Second, "load acknowledged before the first cut")
	rs, err := raftStatusOf(leader.addr)
	if err != nil {
		t.Fatal(err)
	}
	term := rs.Term
	if os.Getenv("RR_FOLLOWER_CUT_BUSY_DISK") == "1" {
		disk := startDiskLoad(t)
		defer func() { t.Log(disk.stop()) }()
	}

	var stepDowns []string
	var campaigns, fastCampaigns, lateVoter int // the cut nodes' candidate states and fast campaigns; lease warnings about the never-cut voter
	for k := 0; k < cycles; k++ {
		kind := kinds[k%len(kinds)]
		fs := g.followers(leader)
		f, o := fs[k/len(kinds)%2], fs[1-k/len(kinds)%2]
		if k%2 == 1 {
			f, o = o, f
		}
		marks := g.logSizes()
		cut := time.Now()
		if err := kind.apply(lab, host(leader), host(f), host(o)); err != nil {
			t.Fatalf("cycle %d: %s: %v", k+1, kind.name, err)
		}
		if kind.leaderCut {
			// The followers elect one of them; it is the never-cut leader from now on.
			next := g.waitMaster(t, 20*time.Second, leader)
			var rs *protocol.RaftStatus
			eventually(t, 20*time.Second, "the new leader leads", func() (err error) {
				if rs, err = raftStatusOf(next.addr); err == nil && rs.Role != "leader" {
					err = fmt.Errorf("%s is %s", next.proc.name, rs.Role)
				}
				return err
			})
			f, leader, term = leader, next, rs.Term
			for _, b := range g.nodes {
				if b != f && b != leader {
					o = b
				}
			}
			marks = g.logSizes()
		}
		time.Sleep(time.Until(cut.Add(cutLen)))
		if err := lab.Heal(); err != nil {
			t.Fatalf("cycle %d: heal: %v", k+1, err)
		}
		healed := time.Now()
		time.Sleep(watch)
		load.waitAcked(20, 30*time.Second, fmt.Sprintf("load acknowledged after heal %d", k+1))
		rs, err := raftStatusOf(leader.addr)
		downs := countSinceOne(leader, marks[leader], "entering follower state")
		switch {
		case err != nil:
			t.Fatalf("cycle %d: raft status of the leader: %v", k+1, err)
		case downs > 0 || rs.Role != "leader" || rs.Term != term:
			stepDowns = append(stepDowns, fmt.Sprintf("cycle %d (%s, %s cut): leader %s now %s in term %d (was %d), %d step-down(s)",
				k+1, kind.name, f.proc.name, leader.proc.name, rs.Role, rs.Term, term, downs))
			t.Errorf("cycle %d/%d: %s (%s) cut %v, healed: the never-cut leader %s lost its leadership: role %s, term %d -> %d, %d \"entering follower state\"",
				k+1, cycles, kind.name, f.proc.name, cutLen, leader.proc.name, rs.Role, term, rs.Term, downs)
			for _, b := range g.nodes {
				t.Logf("%s raft log since the cut (%v before the heal):\n%s", b.proc.name, healed.Sub(cut).Round(time.Millisecond), raftLinesSince(b, marks[b]))
			}
			term = rs.Term
			leader = g.waitMaster(t, 20*time.Second, nil)
			if rs, err := raftStatusOf(leader.addr); err == nil {
				term = rs.Term
			}
		default:
			cs := logSince(f, marks[f])
			campaigns += strings.Count(cs, "entering candidate state")
			fastCampaigns += strings.Count(cs, "fast failover")
			lateVoter += strings.Count(leaseWarnings(leader, marks[leader]), "server-id="+o.props["dLegerSelfId"]+" ")
			t.Logf("cycle %d/%d: %s (%s) for %v, healed: leader %s kept term %d; cut node: %s; leader's lease warnings: %s",
				k+1, cycles, kind.name, f.proc.name, cutLen, leader.proc.name, term, summarizeRaft(f, marks[f]), leaseWarnings(leader, marks[leader]))
		}
	}
	res := verifyGroup(t, g, load)
	for _, b := range g.nodes {
		// Without pre-vote a lone node's every campaign raises its term (prevote_test.go in dledger).
		if n := countSinceOne(b, 0, "pre-vote is disabled"); n > 0 {
			t.Errorf("%s runs Raft without pre-vote", b.proc.name)
		}
	}
	t.Logf("follower cuts: %d cycles of %v, %d step-downs of the never-cut leader %v; the cut nodes entered candidate state %d times (pre-vote: no term change) and made %d fast-failover campaigns; the leader's lease warnings about its never-cut voter: %d; %d acknowledged, 0 lost, %d duplicates explained; commitlogs identical over %d bytes",
		cycles, cutLen, len(stepDowns), stepDowns, campaigns, fastCampaigns, lateVoter, res.acked, res.duplicates, res.commitLogBytes)
}

// cutEnvDuration is the duration in environment variable key, def when unset.
func cutEnvDuration(t testing.TB, key string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", key, v)
	}
	return d
}

// nodeIndex is b's position in g.nodes (-1 if it is not a member).
func (g *raftGroup) nodeIndex(b *broker) int {
	for i, x := range g.nodes {
		if x == b {
			return i
		}
	}
	return -1
}

// logSince is what b's log holds after mark.
func logSince(b *broker, mark int64) string {
	data, err := os.ReadFile(b.proc.logPath)
	if err != nil || int64(len(data)) < mark {
		return ""
	}
	return string(data[mark:])
}

// countSinceOne counts the lines containing s in b's log after mark.
func countSinceOne(b *broker, mark int64, s string) int {
	return strings.Count(logSince(b, mark), s)
}

// raftLinesSince is b's Raft and failover log lines after mark (the evidence of a step-down).
func raftLinesSince(b *broker, mark int64) string {
	var out []string
	for _, l := range strings.Split(logSince(b, mark), "\n") {
		if strings.Contains(l, "raft") || strings.Contains(l, "failover") || strings.Contains(l, "leader") {
			out = append(out, "    "+l)
		}
	}
	return strings.Join(out, "\n")
}

// summarizeRaft counts a cut follower's state changes after mark.
func summarizeRaft(b *broker, mark int64) string {
	s := logSince(b, mark)
	return fmt.Sprintf("%d candidate, %d pre-vote failed, %d fast failover, %d follower",
		strings.Count(s, "entering candidate state"), strings.Count(s, "pre-vote campaign failed"),
		strings.Count(s, "fast failover"), strings.Count(s, "entering follower state"))
}

// leaseWarnings lists the leader's "failed to contact" warnings after mark (hashicorp/raft logs
// one when a voter's last contact is older than the leader lease but younger than three leases,
// and steps down when fewer than a majority are within the lease): how close it came.
func leaseWarnings(b *broker, mark int64) string {
	var out []string
	for _, l := range strings.Split(logSince(b, mark), "\n") {
		if i := strings.Index(l, "failed to contact"); i >= 0 {
			out = append(out, strings.TrimSpace(l[i:]))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return fmt.Sprintf("%d: %s", len(out), strings.Join(out, "; "))
}
