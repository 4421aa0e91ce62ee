package integration

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// proxy4ChaosKills is RR_CHAOS_PROXY4_KILLS: leader kills in TestChaosProxy4LeaderKill (default
// 3; make chaos: 20).
func proxy4ChaosKills(t testing.TB) int {
	n := 3
	if v := os.Getenv("RR_CHAOS_PROXY4_KILLS"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 {
			t.Fatalf("RR_CHAOS_PROXY4_KILLS=%q: want a positive integer", v)
		}
		n = k
	}
	return n
}

// deliveryTimes records when a push consumer's callback was called.
type deliveryTimes struct {
	mu sync.Mutex
	ts []time.Time
}

func (d *deliveryTimes) add(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	d.mu.Lock()
	d.ts = append(d.ts, time.Now())
	d.mu.Unlock()
	return consumer.ConsumeSuccess, nil
}

func (d *deliveryTimes) snapshot() []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.ts)
}

// p99 is the 99th percentile of d (its largest below 100 values).
func p99(d durations) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, (len(s)*99+99)/100-1)]
}

// TestChaosProxy4LeaderKill: two producers and a push consumer of the official Go 4.x client,
// given only two proxies' remoting addresses as name servers, while a three-node group's leader
// is killed with SIGKILL every RR_CHAOS_INTERVAL (restarted RR_CHAOS_RESTART_DELAY later),
// RR_CHAOS_PROXY4_KILLS times. A failed send is repeated with the same body (the producers never
// re-create their client: it never needs a new route). Per kill: the longest time between two
// acknowledged sends (p99 over the kills at most 1 s) and between two deliveries to the push
// consumer (at most 2 s). Then: the consumer received every acknowledged message, the group's
// committed offsets never went back (failoverwatch_test.go), and verifyGroup: 0 acknowledged
// lost, every duplicate explained by a failed attempt, identical replicas.
func TestChaosProxy4LeaderKill(t *testing.T) {
	t.Parallel()
	kills := proxy4ChaosKills(t)
	cp := chaosParamsFromEnv(t)
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, chaosProps(nil)...)
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic, group := uniq("ChaosProxy4"), uniq("GChaosProxy4")
	first := sendFirst(t, newProducer(t, &cluster{ns: ns}), topic, "create-topic")
	pc, _ := viaProxies(t, g.asCluster(leader))
	queues, err := queueCount(ns.addr, topic)
	if err != nil {
		t.Fatalf("queue count of %s: %v", topic, err)
	}
	var deliveries deliveryTimes
	cons := startPushConsumerWith(t, pc, group, topic, all, deliveries.add)
	watch := startFailoverWatch(t, g, topic, group, queues)
	load := startChaosLoad(t, joinAddrs(pc), topic, cp.producers, false)
	load.addRaw(attempt{body: first.body, ok: true}, &first)
	load.waitAcked(100, 30*time.Second, "sends acknowledged through the proxies before the first kill")

	start := time.Now()
	var killedAt []time.Time
	next := time.Now().Add(cp.interval / 2)
	for k := 1; k <= kills; k++ {
		time.Sleep(time.Until(next))
		leader := g.waitMaster(t, 20*time.Second, nil)
		before := load.nAcked.Load()
		leader.kill()
		killed := time.Now()
		watch.killed(killed)
		killedAt = append(killedAt, killed)
		next = killed.Add(cp.interval)
		master := g.waitMaster(t, 20*time.Second, leader)
		t.Logf("kill %d/%d: kill -9 of leader %s (%d sends acknowledged before) -> master %s registered after %v",
			k, kills, leader.proc.name, before, master.proc.name, time.Since(killed).Round(time.Millisecond))
		time.Sleep(time.Until(killed.Add(cp.restartDelay)))
		leader.restart()
	}
	time.Sleep(time.Until(next))
	load.waitAcked(50, 30*time.Second, "sends acknowledged after the last restart")
	elapsed := time.Since(start)
	load.stopAndWait()
	end := time.Now()
	consumed := checkConsumedAll(t, cons, load, 2*time.Minute)
	watch.close()
	offs := watch.offsets()

	attempts, _ := load.snapshot()
	sendTimes, recvTimes := okTimes(attempts), deliveries.snapshot()
	slices.SortFunc(recvTimes, func(a, b time.Time) int { return a.Compare(b) })
	var sendGaps, recvGaps durations
	for i, k := range killedAt {
		to := end
		if i+1 < len(killedAt) {
			to = killedAt[i+1]
		}
		sendGaps = append(sendGaps, longestGap(sendTimes, k, to))
		recvGaps = append(recvGaps, longestGap(recvTimes, k, to))
		t.Logf("kill %d/%d: longest time between two acknowledged sends %v, between two deliveries %v",
			i+1, len(killedAt), sendGaps[i].Round(time.Millisecond), recvGaps[i].Round(time.Millisecond))
	}
	res := verifyGroup(t, g, load)
	if p := p99(sendGaps); p > time.Second {
		t.Errorf("longest pause between acknowledged sends per kill: p99 %v > 1s (%v)", p.Round(time.Millisecond), sendGaps)
	}
	if m := slices.Max(recvGaps); m > 2*time.Second {
		t.Errorf("longest pause between deliveries to the push consumer %v > 2s (%v)", m.Round(time.Millisecond), recvGaps)
	}
	if len(offs.violations) > 0 {
		t.Errorf("%d committed offsets went back below a value replicated before the kill: %s", len(offs.violations), firstFew(offs.violations))
	}
	t.Logf("CHAOS proxy4: %d leader kills every %v (restart after %v), %v of load, %d 4.x producers and a push consumer through two proxies",
		len(killedAt), cp.interval, cp.restartDelay, elapsed.Round(time.Second), cp.producers)
	t.Logf("CHAOS proxy4: messages sent %d (attempts %d, failed attempts %d), acknowledged %d, lost 0, stored %d (%d never acknowledged), duplicates %d (each explained by a failed attempt and its retry)",
		res.distinct, res.attempts, res.failedAttempts, res.acked, res.stored, res.storedUnacked, res.duplicates)
	t.Logf("CHAOS proxy4: longest pause between acknowledged sends per kill: %v", sendGaps)
	t.Logf("CHAOS proxy4: longest pause between deliveries to the push consumer per kill: %v", recvGaps)
	t.Logf("CHAOS proxy4: consumer received all %d acknowledged messages; %d deliveries, %d of the same body again; committed offsets sampled %d times, %d rollbacks within the replication grace, 0 beyond",
		consumed.distinctAcked, consumed.deliveries, consumed.redelivered, offs.samples, offs.rollbacks)
}
