package integration

// Two groups behind the proxies: a cluster of two three-node DLedger groups (different
// brokerNames, one brokerClusterName), one name server and two mqproxy processes, each process on
// its own host of a network-namespace lab (internal/netlab), the official 5.x clients in the
// client host sending continuously through both proxies to a topic served by both groups and a
// SimpleConsumer receiving it. Every nemesis runs in turn, alternating between the groups (the
// proxies for the proxy kill):
//
//	leader kill     kill -9 of the group's leader, restarted faultRestartDelay later
//	leader cut      the leader cut from both followers (silent nftables drops), healed after faultCutHold
//	leader pause    SIGSTOP of the leader for faultPauseLength (beyond the election timeout), then SIGCONT
//	namesrv cut     the name server cut from every node of the group for faultCutHold, then healed
//	proxy kill      kill -9 of one proxy (the clients go on through the other), restarted faultRestartDelay later
//
// Then verifyCluster reads every queue of both groups from offset 0 on every node: 0 acknowledged
// sends lost, 0 stored messages never sent, every duplicate explained, each group's replicas
// identical (the same records, commitlogs byte-identical); and the consumer got every
// acknowledged message. Figures per nemesis: faults, acknowledged, duplicates and why, fault end
// -> first acknowledged send and -> first delivery of a message sent after it (p50/p99).
//
//	RR_CLUSTER_FAULTS     rounds of the five nemeses (default 1: one fault of each kind; make faults: 10)
//	RR_CLUSTER_PRODUCERS  5.x producers sending through both proxies (default 2)
//	RR_CLUSTER_NEMESES    the nemeses to run, comma-separated among kill, cut, pause, nscut, proxy
//	                      (default all five, in that order)

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"

	"rocketraft/internal/netlab"
)

const (
	// clusterServers are the lab's server hosts: the name server, 3 + 3 nodes, 2 proxies.
	clusterServers = 9
	// clusterQueues is the topic's queue count on each group.
	clusterQueues = 4

	faultRestartDelay = 2 * time.Second
	faultCutHold      = 4 * time.Second
	faultPauseLength  = 2 * time.Second
	// faultSpacing is the least time from one fault's start to the next one's: each fault leaves
	// a duplicate or two (sends in flight whose outcome the client could not know), and the
	// sends between two faults keep them under 0.1 % of the acknowledged.
	faultSpacing = 10 * time.Second
)

// The nemeses, in the order each round runs them.
const (
	nemKill    = "leader kill -9"
	nemCut     = "leader cut from both followers"
	nemPause   = "leader SIGSTOP 2 s"
	nemNsCut   = "name server cut from the group"
	nemProxy   = "proxy kill -9"
	nemWarmUp  = "(before the first fault)"
	inv5       = 10 * time.Second // the consumer's invisible time, the least the proxy allows
	clusterTag = "cl"
)

var nemeses = []string{nemKill, nemCut, nemPause, nemNsCut, nemProxy}

// nemesisNames are RR_CLUSTER_NEMESES's names for them.
var nemesisNames = map[string]string{"kill": nemKill, "cut": nemCut, "pause": nemPause, "nscut": nemNsCut, "proxy": nemProxy}

// clusterNemeses is RR_CLUSTER_NEMESES.
func clusterNemeses(t testing.TB) []string {
	t.Helper()
	v := os.Getenv("RR_CLUSTER_NEMESES")
	if v == "" {
		return nemeses
	}
	var out []string
	for _, n := range strings.Split(v, ",") {
		kind, ok := nemesisNames[strings.TrimSpace(n)]
		if !ok {
			t.Fatalf("RR_CLUSTER_NEMESES=%q: %q is none of kill, cut, pause, nscut, proxy", v, n)
		}
		out = append(out, kind)
	}
	return out
}

// TestFaultClusterTwoGroups builds a lab of ten hosts and runs itself again in the client host
// (runInLab); there it starts the cluster and runs the nemeses.
func TestFaultClusterTwoGroups(t *testing.T) {
	if labHosts == nil {
		t.Parallel()
		runInLab(t, "TestFaultClusterTwoGroups", clusterServers, 30*time.Minute)
		return
	}
	if len(labHosts) != clusterServers {
		t.Fatalf("RR_LAB_HOSTS names %d hosts, want %d (name server, 3 + 3 nodes, 2 proxies)", len(labHosts), clusterServers)
	}
	rounds := envPositive(t, "RR_CLUSTER_FAULTS", 1)
	producers := envPositive(t, "RR_CLUSTER_PRODUCERS", 2)
	kinds := clusterNemeses(t)
	c := startFaultCluster(t)

	topic, group := uniq("Cluster"), uniq("GCluster")
	for _, g := range c.groups {
		leader := g.waitMaster(t, 30*time.Second, nil)
		createTopic(t, g.asCluster(leader), topic, clusterQueues)
	}
	endpoint := c.proxies[0].addr + ";" + c.proxies[1].addr
	recv := startClusterReceiver(t, endpoint, group, topic)
	time.Sleep(3 * time.Second) // the group's first receive sets where it starts (the queues' end)
	load := startV5Load(t, endpoint, topic, clusterTag, producers)
	load.waitAcked(100, 60*time.Second, "5.x sends acknowledged through the proxies before the first fault")

	var faults []clusterFault
	start := time.Now()
	for r := range rounds {
		for k, kind := range kinds {
			n := r*len(kinds) + k
			if n > 0 {
				time.Sleep(time.Until(faults[n-1].start.Add(faultSpacing)))
			}
			f := c.runNemesis(t, kind, n%2, load)
			faults = append(faults, f)
			t.Logf("fault %d/%d at %s: %s on %s: %s; lasted %v", n+1, rounds*len(kinds), f.start.Format("15:04:05.000"), kind, f.target, f.detail, f.end.Sub(f.start).Round(time.Millisecond))
		}
	}
	load.waitAcked(50, 60*time.Second, "5.x sends acknowledged after the last fault")
	elapsed := time.Since(start)
	load.stopAndWait()

	_, acked := load.snapshot()
	missing := recv.waitFor(acked, 2*inv5+30*time.Second)
	recv.close()
	res := c.verify(t, load, topic)
	if missing > 0 {
		t.Errorf("the simple consumer never received %d of %d acknowledged messages", missing, len(acked))
	}
	c.report(t, faults, load, recv, res, elapsed, producers, rounds)
}

// faultCluster is the running cluster of the child test and the lab handle that cuts its links.
type faultCluster struct {
	lab        *netlab.Lab
	nsHost     *netlab.Host
	ns         *namesrv
	groups     [2]*raftGroup
	hosts      map[*broker]*netlab.Host
	groupHosts [2][]*netlab.Host
	proxies    [2]*mqproxy
	proxyKills []killWindow
}

// killWindow is when a proxy died: after the signal went out (from) and before kill returned
// (to), having waited for the process to be gone.
type killWindow struct{ from, to time.Time }

// startFaultCluster places the name server on the first host, group i's nodes on hosts
// 1+3i..3+3i and the proxies on the last two, and starts them.
func startFaultCluster(t *testing.T) *faultCluster {
	t.Helper()
	var hs []netlab.Host
	for _, h := range labHosts {
		hs = append(hs, netlab.Host{Name: h.netns, IP: h.ip})
	}
	lab, err := netlab.Attach(hs)
	if err != nil {
		t.Fatalf("attach to the lab: %v", err)
	}
	t.Cleanup(func() {
		if err := lab.Heal(); err != nil {
			t.Logf("heal the lab: %v", err)
		}
	})
	lh := lab.Hosts()
	c := &faultCluster{lab: lab, nsHost: lh[0], hosts: map[*broker]*netlab.Host{}}
	c.ns = startNamesrv(t) // on labHosts[0] (namesrvHost)
	for i := range c.groups {
		c.groupHosts[i] = lh[1+3*i : 4+3*i]
	}
	// Both groups start at once, then each waits for its own election and registration.
	for i := range c.groups {
		c.groups[i] = launchRaftGroupOn(t, c.ns, c.groupHosts[i], chaosProps(nil)...)
		for j, b := range c.groups[i].nodes {
			c.hosts[b] = c.groupHosts[i][j]
		}
	}
	for _, g := range c.groups {
		for _, b := range g.nodes {
			if err := b.waitReady(45 * time.Second); err != nil {
				t.Fatalf("%s did not become ready: %v", b.proc.name, err)
			}
		}
	}
	for i := range c.proxies {
		c.proxies[i] = startProxyOn(t, c.ns, lh[7+i])
		// The client re-dials a dead proxy with a blocking dial holding its connection table's
		// lock (TestProxyTwoProxiesKill): a short dial keeps it going through the other.
		dialTimeouts.Store(c.proxies[i].addr, 300*time.Millisecond)
	}
	return c
}

// launchRaftGroupOn is startRaftGroup with node i on hosts[i], without the wait for readiness.
func launchRaftGroupOn(t testing.TB, ns *namesrv, hosts []*netlab.Host, opts ...brokerOpt) *raftGroup {
	t.Helper()
	g := &raftGroup{ns: ns, name: uniq("clgroup")}
	peers := make([]string, len(hosts))
	for i, h := range hosts {
		peers[i] = fmt.Sprintf("n%d-%s:%d", i, h.IP, freePort(t))
	}
	for i, h := range hosts {
		b, dir := newRaftBroker(t, g)
		b.placeOn(h.IP, h.Name)
		b.props["dLegerPeers"] = strings.Join(peers, ";")
		b.props["dLegerSelfId"] = fmt.Sprintf("n%d", i)
		g.nodes = append(g.nodes, b.launch(t, dir, opts...))
	}
	return g
}

// startProxyOn starts mqproxy for ns on host h (its gRPC port on h's address, no remoting
// listener) and waits until it accepts.
func startProxyOn(t testing.TB, ns *namesrv, h *netlab.Host) *mqproxy {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	p := &mqproxy{addr: h.IP + ":" + strconv.Itoa(port), proc: &proc{
		name:    "mqproxy@" + h.IP,
		bin:     filepath.Join(binDir, "mqproxy"),
		args:    []string{"-n", ns.addr, "--grpcServerPort", strconv.Itoa(port), "--listenHost", h.IP, "--remotingListenPort=0"},
		logPath: filepath.Join(dir, "mqproxy.log"),
		netns:   h.Name,
	}}
	p.start(t)
	register(t, p.proc)
	waitProxy(t, p)
	return p
}

// waitProxy waits until the proxy accepts connections.
func waitProxy(t testing.TB, p *mqproxy) {
	t.Helper()
	eventually(t, 20*time.Second, p.name+" accepts", func() error {
		if err := p.exited(); err != nil {
			return permanent{err}
		}
		c, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// clusterFault is one fault as it ran.
type clusterFault struct {
	kind       string
	group      int // the group faulted; -1 for a proxy kill
	target     string
	start, end time.Time // the fault began; it was lifted (restart begun, healed, resumed)
	failover   time.Duration
	detail     string
}

// runNemesis waits until the cluster is healthy (every node running, a master in each group,
// sends acknowledged), then runs one fault of kind on group gi (proxy gi for a proxy kill).
func (c *faultCluster) runNemesis(t *testing.T, kind string, gi int, load *v5Load) clusterFault {
	t.Helper()
	for _, g := range c.groups {
		for _, b := range g.nodes {
			if !b.running() {
				t.Fatalf("%s is not running before a fault", b.proc.name)
			}
		}
		g.waitMaster(t, 30*time.Second, nil)
	}
	load.waitAcked(20, 60*time.Second, "sends acknowledged before "+kind)
	time.Sleep(time.Second)
	g := c.groups[gi]
	f := clusterFault{kind: kind, group: gi, target: g.name}
	switch kind {
	case nemKill:
		leader := g.waitMaster(t, 20*time.Second, nil)
		leader.kill()
		f.start = time.Now()
		next := g.waitMaster(t, 30*time.Second, leader)
		f.failover = time.Since(f.start)
		f.detail = fmt.Sprintf("killed %s, master %s registered after %v", leader.proc.name, next.proc.name, f.failover.Round(time.Millisecond))
		time.Sleep(time.Until(f.start.Add(faultRestartDelay)))
		f.end = time.Now()
		leader.restart()
	case nemCut:
		leader := g.waitMaster(t, 20*time.Second, nil)
		lh := c.hosts[leader]
		for _, fl := range g.nodes {
			if fl != leader {
				if err := c.lab.Cut(lh, c.hosts[fl]); err != nil {
					t.Fatalf("cut %s from %s: %v", leader.proc.name, fl.proc.name, err)
				}
			}
		}
		f.start = time.Now()
		next := g.waitMaster(t, 30*time.Second, leader)
		f.failover = time.Since(f.start)
		f.detail = fmt.Sprintf("cut %s from both followers, master %s registered after %v", leader.proc.name, next.proc.name, f.failover.Round(time.Millisecond))
		time.Sleep(time.Until(f.start.Add(faultCutHold)))
		c.heal(t)
		f.end = time.Now()
	case nemPause:
		leader := g.waitMaster(t, 20*time.Second, nil)
		if !leader.proc.signal(syscall.SIGSTOP) {
			t.Fatalf("%s: SIGSTOP: not running", leader.proc.name)
		}
		f.start = time.Now()
		// The others elect a new master meanwhile (the pause outlasts the election timeout).
		var next string
		for time.Since(f.start) < faultPauseLength && next == "" {
			if addrs, err := registeredAddrs(g.ns.addr, g.name); err == nil && addrs[0] != "" && addrs[0] != leader.addr {
				next, f.failover = addrs[0], time.Since(f.start)
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Until(f.start.Add(faultPauseLength)))
		leader.proc.signal(syscall.SIGCONT)
		f.end = time.Now()
		f.detail = fmt.Sprintf("paused %s for %v", leader.proc.name, faultPauseLength)
		if next != "" {
			if b := g.node(next); b != nil {
				next = b.proc.name
			}
			f.detail += fmt.Sprintf("; master %s registered after %v", next, f.failover.Round(time.Millisecond))
		} else {
			f.detail += "; no other master registered during the pause"
		}
	case nemNsCut:
		for _, h := range c.groupHosts[gi] {
			if err := c.lab.Cut(c.nsHost, h); err != nil {
				t.Fatalf("cut the name server from %s: %v", h.Name, err)
			}
		}
		f.start = time.Now()
		time.Sleep(faultCutHold)
		c.heal(t)
		f.end = time.Now()
		f.detail = fmt.Sprintf("name server cut from the 3 nodes for %v", faultCutHold)
	case nemProxy:
		px := c.proxies[gi]
		f.group, f.target = -1, px.proc.name
		signalled := time.Now()
		px.kill() // returns once the process is gone, some milliseconds after it died
		f.start = time.Now()
		c.proxyKills = append(c.proxyKills, killWindow{signalled, f.start})
		time.Sleep(faultRestartDelay)
		f.end = time.Now()
		px.start(t)
		waitProxy(t, px)
		f.detail = fmt.Sprintf("killed %s, restarted after %v", px.proc.name, faultRestartDelay)
	default:
		t.Fatalf("unknown nemesis %q", kind)
	}
	return f
}

func (c *faultCluster) heal(t testing.TB) {
	t.Helper()
	if err := c.lab.Heal(); err != nil {
		t.Fatalf("heal: %v", err)
	}
}

// clusterReceiver is a 5.x SimpleConsumer receiving (and acking) all along on receivers
// goroutines; it records when each body was first received.
type clusterReceiver struct {
	c    rmq.SimpleConsumer
	stop atomic.Bool
	done chan struct{}

	mu    sync.Mutex
	first map[string]time.Time
	count map[string]int
	errs  map[string]int
}

func startClusterReceiver(t testing.TB, endpoint, group, topic string) *clusterReceiver {
	t.Helper()
	c, err := rmq.NewSimpleConsumer(&rmq.Config{Endpoint: endpoint, ConsumerGroup: group, Credentials: &credentials.SessionCredentials{}},
		rmq.WithAwaitDuration(2*time.Second), rmq.WithSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("5.x simple consumer start through %s: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = c.GracefulStop() })
	r := &clusterReceiver{c: c, done: make(chan struct{}), first: map[string]time.Time{}, count: map[string]int{}, errs: map[string]int{}}
	var wg sync.WaitGroup
	for range receivers {
		wg.Add(1)
		go r.run(&wg)
	}
	go func() { wg.Wait(); close(r.done) }()
	t.Cleanup(r.close)
	return r
}

func (r *clusterReceiver) run(wg *sync.WaitGroup) {
	defer wg.Done()
	for !r.stop.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		mvs, err := r.c.Receive(ctx, 32, inv5)
		cancel()
		now := time.Now()
		if len(mvs) == 0 {
			if err != nil && !strings.Contains(err.Error(), "MESSAGE_NOT_FOUND") {
				r.mu.Lock()
				r.errs[shortErr(err)]++
				r.mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
			continue
		}
		r.mu.Lock()
		for _, mv := range mvs {
			b := string(mv.GetBody())
			if r.count[b] == 0 {
				r.first[b] = now
			}
			r.count[b]++
		}
		r.mu.Unlock()
		ackEach(r.c, mvs)
	}
}

// waitFor waits (bounded) until every acknowledged body was received; it returns how many were
// not.
func (r *clusterReceiver) waitFor(acked []sent, within time.Duration) int {
	deadline := time.Now().Add(within)
	for {
		r.mu.Lock()
		missing := 0
		for _, s := range acked {
			if r.count[s.body] == 0 {
				missing++
			}
		}
		r.mu.Unlock()
		if missing == 0 || time.Now().After(deadline) {
			return missing
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (r *clusterReceiver) close() {
	r.stop.Store(true)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
	}
}

// clusterCopy is one stored copy of a body.
type clusterCopy struct {
	group int
	queue int
	off   int64
	id    string // UNIQ_KEY, the client's message id
	at    time.Time
}

// clusterVerified is what verify found.
type clusterVerified struct {
	copies         map[string][]clusterCopy // body -> its stored copies, both groups
	stored         int
	duplicates     []clusterDup
	commitLogBytes [2]int64
}

// clusterDup is one extra stored copy and why it exists.
type clusterDup struct {
	body string
	at   time.Time
	why  string
}

// verify stops the load's effects from moving (the load is stopped), then for each group waits
// until every node holds its final leader's max offsets, reads every queue on every node from
// offset 0 and checks that the nodes hold the same records, densely; then across both groups:
// every acknowledged body at the offset its receipt gave in some queue (0 lost), every stored
// body one that was sent (0 unexpected), every extra copy explained: the client's own retry under
// the same message id of a send a proxy answered "outcome unknown" or whose answer died with a
// killed proxy (stored in the 3 s before a kill), or a repeated Send after a failed one (another
// message id). Then it stops each group and compares its nodes' commitlogs byte for byte.
func (c *faultCluster) verify(t *testing.T, l *v5Load, topic string) clusterVerified {
	t.Helper()
	attempts, acked := l.snapshot()
	res := clusterVerified{copies: map[string][]clusterCopy{}}
	got := [2]map[int][]*record{}
	for gi, g := range c.groups {
		leader := g.waitMaster(t, 30*time.Second, nil)
		g.waitOffsetsConverged(t, 60*time.Second, leader, topic, clusterQueues)
		ref := readQueues(t, leader.addr, topic, clusterQueues)
		for q, recs := range ref {
			for i, r := range recs {
				if r.QueueOffset != int64(i) {
					t.Fatalf("%s: queue %d: record %d has queue offset %d (not dense)", leader.proc.name, q, i, r.QueueOffset)
				}
			}
		}
		for _, b := range g.nodes {
			if b == leader {
				continue
			}
			other := readQueues(t, b.addr, topic, clusterQueues)
			for q := range clusterQueues {
				if !slices.EqualFunc(ref[q], other[q], sameRecord) {
					t.Fatalf("%s: queue %d (%d records) differs from the leader %s (%d records)", b.proc.name, q, len(other[q]), leader.proc.name, len(ref[q]))
				}
			}
		}
		got[gi] = ref
		for q, recs := range ref {
			for _, r := range recs {
				res.stored++
				res.copies[string(r.Body)] = append(res.copies[string(r.Body)], clusterCopy{gi, q, r.QueueOffset, r.Properties["UNIQ_KEY"], time.UnixMilli(r.StoreTimestamp)})
			}
		}
	}
	var lost []string
	for _, s := range acked {
		found := false
		for _, cp := range res.copies[s.body] {
			if cp.off == s.offset {
				found = true
				break
			}
		}
		if !found {
			lost = append(lost, fmt.Sprintf("%s (offset %d, message id %s, %d stored copies elsewhere)", short(s.body), s.offset, s.msgID, len(res.copies[s.body])))
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d acknowledged sends lost (not at their receipt's offset in any queue of either group): %s", len(lost), firstFew(lost))
	}

	sentBodies, failed := map[string]bool{}, map[string]int{}
	for _, a := range attempts {
		sentBodies[a.body] = true
		if !a.ok {
			failed[a.body]++
		}
	}
	unknown := proxyUnknownSends(t, c.proxies[0], c.proxies[1])
	ackedAt := map[string]time.Time{}
	for _, a := range attempts {
		if a.ok {
			ackedAt[a.body] = a.finish
		}
	}
	// nearKill: a copy stored in the 3 s before a proxy was killed, of a body whose Send was still
	// waiting for its answer then (acknowledged after the kill, or never): the answer died with
	// the proxy and the client sent it again through the other one. The proxy died somewhere in
	// its kill window, so a copy stored up to the window's end counts as before it and an answer
	// from its start on as after it. (A CI run had one body stored through the killed proxy at
	// .240, the client's retry stored through the other at .246 and acknowledged at .248, and kill
	// return at .249; the instant after the wait, used then, called that copy unexplained.)
	nearKill := func(body string, at time.Time) bool {
		for _, k := range c.proxyKills {
			acked, ok := ackedAt[body]
			if at.After(k.from.Add(-3*time.Second)) && !at.After(k.to) && (!ok || acked.After(k.from)) {
				return true
			}
		}
		return false
	}
	var strangers, unexplained []string
	for _, body := range slices.Sorted(func(yield func(string) bool) {
		for b := range res.copies {
			if !yield(b) {
				return
			}
		}
	}) {
		copies := res.copies[body]
		if !sentBodies[body] {
			strangers = append(strangers, short(body))
			continue
		}
		if len(copies) == 1 {
			continue
		}
		slices.SortFunc(copies, func(a, b clusterCopy) int { return a.at.Compare(b.at) })
		var where []string
		for _, cp := range copies {
			where = append(where, fmt.Sprintf("group %d queue %d offset %d id %s stored %s", cp.group, cp.queue, cp.off, cp.id, cp.at.Format("15:04:05.000")))
		}
		var tries []string
		for _, a := range attempts {
			if a.body == body {
				tries = append(tries, fmt.Sprintf("%s-%s ok=%v %s", a.start.Format("15:04:05.000"), a.finish.Format("15:04:05.000"), a.ok, a.err))
			}
		}
		t.Logf("duplicate %s: copies [%s]; Send calls [%s]", short(body), strings.Join(where, "; "), strings.Join(tries, "; "))
		perID := map[string][]clusterCopy{}
		var ids []string
		for _, cp := range copies {
			if perID[cp.id] == nil {
				ids = append(ids, cp.id)
			}
			perID[cp.id] = append(perID[cp.id], cp)
		}
		// Under one message id: the client's retries of one Send.
		for _, id := range ids {
			cps := perID[id]
			near := 0
			for _, cp := range cps {
				if nearKill(body, cp.at) {
					near++
				}
			}
			if unknown[id]+near < len(cps)-1 {
				unexplained = append(unexplained, fmt.Sprintf("%s stored %d times under message id %s; the proxies answered %d send(s) of it 'outcome unknown', %d copies stored just before a proxy kill", short(body), len(cps), id, unknown[id], near))
			}
			for _, cp := range cps[1:] {
				why := "the client's retry after a proxy answered 'outcome unknown'"
				if unknown[id] == 0 {
					why = "the client's retry after a proxy was killed before answering"
				}
				res.duplicates = append(res.duplicates, clusterDup{body, cp.at, why})
			}
		}
		// Under other message ids: the application repeated a failed Send.
		if len(ids)-1 > failed[body] {
			unexplained = append(unexplained, fmt.Sprintf("%s stored under %d message ids, only %d failed Send call(s)", short(body), len(ids), failed[body]))
		}
		for _, id := range ids[1:] {
			res.duplicates = append(res.duplicates, clusterDup{body, perID[id][0].at, "a repeated Send after a failed one (timeout or error) that was stored"})
		}
	}
	if len(strangers) > 0 {
		t.Errorf("%d stored message(s) were never sent: %s", len(strangers), firstFew(strangers))
	}
	if len(unexplained) > 0 {
		t.Errorf("%d duplicate(s) not explained: %s", len(unexplained), firstFew(unexplained))
	}
	for gi, g := range c.groups {
		for _, b := range g.nodes {
			if err := b.stop(); err != nil {
				t.Fatal(err)
			}
		}
		res.commitLogBytes[gi] = compareCommitLogs(t, g.nodes)
	}
	return res
}

// report prints the figures per nemesis: faults, sends acknowledged while it was the latest
// fault (and between a fault's start and end), duplicates (by the time their extra copy was stored) and why, and the recovery: fault
// end -> first acknowledged send stored in the faulted group (any group for a proxy kill), and
// -> first delivery of a message of that group sent after the fault end.
func (c *faultCluster) report(t *testing.T, faults []clusterFault, l *v5Load, recv *clusterReceiver, res clusterVerified, elapsed time.Duration, producers, rounds int) {
	t.Helper()
	attempts, _ := l.snapshot()
	recv.mu.Lock()
	first := mapsCloneTimes(recv.first)
	redelivered := 0
	for _, n := range recv.count {
		redelivered += n - 1
	}
	rerrs := mapsClone(recv.errs)
	recv.mu.Unlock()

	// phase returns the kind of the latest fault started at or before at.
	phase := func(at time.Time) string {
		kind := nemWarmUp
		for _, f := range faults {
			if !f.start.After(at) {
				kind = f.kind
			}
		}
		return kind
	}
	groupOf := func(body string) int {
		if cps := res.copies[body]; len(cps) > 0 {
			return cps[0].group
		}
		return -1
	}
	type row struct {
		faults, acked, failed int
		during                int // acknowledged between a fault's start and its end
		dups                  map[string]int
		toSend, toDeliver     durations
		failover              durations
	}
	rows := map[string]*row{}
	get := func(k string) *row {
		if rows[k] == nil {
			rows[k] = &row{dups: map[string]int{}}
		}
		return rows[k]
	}
	for _, a := range attempts {
		r := get(phase(a.finish))
		if a.ok {
			r.acked++
		} else {
			r.failed++
		}
	}
	// A duplicate belongs to the fault in progress when its send was finally acknowledged (its
	// extra copy may be stored just before the fault began: the answer the fault took).
	ackedAt := map[string]time.Time{}
	for _, a := range attempts {
		if a.ok {
			ackedAt[a.body] = a.finish
		}
	}
	for _, d := range res.duplicates {
		at := d.at
		if f, ok := ackedAt[d.body]; ok {
			at = f
		}
		get(phase(at)).dups[d.why]++
	}
	for _, f := range faults {
		r := get(f.kind)
		r.faults++
		if f.failover > 0 {
			r.failover = append(r.failover, f.failover)
		}
		var firstSend, firstDelivery time.Time
		for _, a := range attempts {
			if a.ok && a.finish.After(f.start) && !a.finish.After(f.end) {
				r.during++
			}
			if !a.ok || !a.finish.After(f.end) || (f.group >= 0 && groupOf(a.body) != f.group) {
				continue
			}
			if firstSend.IsZero() || a.finish.Before(firstSend) {
				firstSend = a.finish
			}
			if at, ok := first[a.body]; ok && a.start.After(f.end) && (firstDelivery.IsZero() || at.Before(firstDelivery)) {
				firstDelivery = at
			}
		}
		if firstSend.IsZero() || firstDelivery.IsZero() {
			t.Errorf("%s on %s: no acknowledged send (%v) or delivery (%v) after the fault ended", f.kind, f.target, firstSend, firstDelivery)
			continue
		}
		r.toSend = append(r.toSend, firstSend.Sub(f.end))
		r.toDeliver = append(r.toDeliver, firstDelivery.Sub(f.end))
	}
	p := func(d durations, q int) string {
		if len(d) == 0 {
			return "-"
		}
		return percentile(d, q).Round(time.Millisecond).String()
	}
	t.Logf("CLUSTER: two 3-node groups (%s, %s), one name server, two proxies, each on its own lab host; %d 5.x producers and a SimpleConsumer through both proxies; %d faults in %v",
		c.groups[0].name, c.groups[1].name, producers, len(faults), elapsed.Round(time.Second))
	t.Logf("CLUSTER: | nemesis | faults | acknowledged | of which during the faults | failed Send calls | lost | duplicates (why) | failover p50/p99 | end -> first SEND_OK p50/p99 | end -> first delivery p50/p99 |")
	for _, k := range append([]string{nemWarmUp}, nemeses...) {
		r := rows[k]
		if r == nil {
			continue
		}
		var why []string
		n := 0
		for _, w := range slices.Sorted(func(yield func(string) bool) {
			for w := range r.dups {
				if !yield(w) {
					return
				}
			}
		}) {
			why = append(why, fmt.Sprintf("%d %s", r.dups[w], w))
			n += r.dups[w]
		}
		t.Logf("CLUSTER: | %s | %d | %d | %d | %d | 0 | %d (%s) | %s / %s | %s / %s | %s / %s |", k, r.faults, r.acked, r.during, r.failed, n, strings.Join(why, "; "),
			p(r.failover, 50), p(r.failover, 99), p(r.toSend, 50), p(r.toSend, 99), p(r.toDeliver, 50), p(r.toDeliver, 99))
	}
	acked := 0
	for _, a := range attempts {
		if a.ok {
			acked++
		}
	}
	t.Logf("CLUSTER: %d acknowledged in all, 0 lost, 0 unexpected, %d stored, %d duplicates (%.3f %% of acknowledged); the consumer received every acknowledged message, %d redeliveries; receive errors %v",
		acked, res.stored, len(res.duplicates), 100*float64(len(res.duplicates))/float64(max(1, acked)), redelivered, rerrs)
	t.Logf("CLUSTER: commitlogs byte-identical within each group over %d and %d common bytes", res.commitLogBytes[0], res.commitLogBytes[1])
	// The 0.1 % bound is the full size's (at least 10 faults of each kind); a CI run's handful of
	// faults over a minute of sends is too few for a rate, and reports it only.
	if rounds >= 10 && float64(len(res.duplicates)) > float64(acked)/1000 {
		t.Errorf("%d duplicates, more than 0.1 %% of %d acknowledged sends", len(res.duplicates), acked)
	}
	if os.Getenv("RR_CLUSTER_FAULTS") == "" {
		t.Logf("CLUSTER: the full size runs RR_CLUSTER_FAULTS=10 (>= 10 faults of each kind, alternating groups)")
	}
}

func mapsCloneTimes(m map[string]time.Time) map[string]time.Time {
	out := make(map[string]time.Time, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
