package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// proxy4ChaosKills is RR_CHAOS_PROXY4_KILLS: leader kills in TestChaosProxy4LeaderKill (default
// 3; make chaos: 20).
func proxy4ChaosKills(t testing.TB) int { return envPositive(t, "RR_CHAOS_PROXY4_KILLS", 3) }

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
	first := createTopicBySend(t, ns.addr, newProducer(t, &cluster{ns: ns}), topic, "create-topic")
	pc, _ := viaProxies(t, g.asCluster(leader))
	queues := routedQueues(t, ns.addr, topic)
	var deliveries deliveryTimes
	cons := startPushConsumerWith(t, pc, group, topic, all, deliveries.add)
	watch := startFailoverWatch(t, g, topic, group, queues)
	load := startChaosLoad(t, joinAddrs(pc), topic, cp.producers, false)
	load.addRaw(attempt{body: first.body, ok: true}, &first)
	load.waitAcked(100, 30*time.Second, "sends acknowledged through the proxies before the first kill")

	start := time.Now()
	var killedAt []time.Time
	var elections durations // kill -9 to the new master registered at the name server
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
		elections = append(elections, time.Since(killed))
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
		t.Logf("kill %d/%d: longest time between two acknowledged sends %v, between two deliveries %v (the new master was registered after %v)",
			i+1, len(killedAt), sendGaps[i].Round(time.Millisecond), recvGaps[i].Round(time.Millisecond), elections[i].Round(time.Millisecond))
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
	t.Logf("CHAOS proxy4: longest pause between acknowledged sends per kill: %v (kill -9 to the new master registered: %v)", sendGaps, elections)
	t.Logf("CHAOS proxy4: longest pause between deliveries to the push consumer per kill: %v", recvGaps)
	t.Logf("CHAOS proxy4: consumer received all %d acknowledged messages; %d deliveries, %d of the same body again; committed offsets sampled %d times, %d rollbacks within the replication grace, 0 beyond",
		consumed.distinctAcked, consumed.deliveries, consumed.redelivered, offs.samples, offs.rollbacks)
}

// TestChaosProxy4TwoGroups: a three-node group and a classic broker serve one topic behind two
// proxies. Two producers of the official Go 4.x client (its default retries) send continuously,
// and a third sends ten keyed sequences with a hash queue selector, while the three-node group's
// leader is killed RR_CHAOS_PROXY4_KILLS times: no send fails at the application (the proxy
// finds the new leader, or the client retries the other group), both groups take messages, and
// an orderly consumer sees every key's sequence in order (a step stored twice by a retry may
// repeat; none goes back).
func TestChaosProxy4TwoGroups(t *testing.T) {
	t.Parallel()
	kills := proxy4ChaosKills(t)
	cp := chaosParamsFromEnv(t)
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, chaosProps(nil)...)
	leader := g.waitMaster(t, 20*time.Second, nil)
	other := startBroker(t, ns)
	topic := uniq("P4TwoGroups")
	createTopic(t, g.asCluster(leader), topic, 4)
	createTopic(t, &cluster{ns: ns, b: other}, topic, 4)
	pc, _ := viaProxies(t, &cluster{ns: ns, b: other})

	var mu sync.Mutex
	seq := map[string][]int{}
	cons := startOrderlyConsumer(t, pc, uniq("GP4Two"), topic, func(m *primitive.MessageExt) {
		key, step, ok := strings.Cut(string(m.Body), ":")
		if !ok {
			return
		}
		i, _ := strconv.Atoi(step)
		mu.Lock()
		seq[key] = append(seq[key], i)
		mu.Unlock()
	})

	var stop atomic.Bool
	var wg sync.WaitGroup
	var failures []string
	var acked atomic.Int64
	perGroup := map[string]int{}
	record := func(r *primitive.SendResult, err error) bool {
		mu.Lock()
		defer mu.Unlock()
		if err == nil && r.Status != primitive.SendOK {
			err = fmt.Errorf("status %d", r.Status)
		}
		if err != nil {
			failures = append(failures, time.Now().Format("15:04:05.000")+" "+err.Error())
			return false
		}
		perGroup[r.MessageQueue.BrokerName]++
		acked.Add(1)
		return true
	}
	for i := range 2 {
		p := newProducer(t, pc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				r, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte(fmt.Sprintf("p%d-%d", i, n))))
				cancel()
				record(r, err)
			}
		}()
	}
	const keys = 10
	steps := map[string]int{}
	op := newProducer(t, pc, producer.WithQueueSelector(producer.NewHashQueueSelector()))
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; !stop.Load(); n++ {
			key := fmt.Sprintf("k%d", n%keys)
			m := primitive.NewMessage(topic, []byte(fmt.Sprintf("%s:%d", key, n/keys)))
			m.WithShardingKey(key)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			r, err := op.SendSync(ctx, m)
			cancel()
			if record(r, err) {
				mu.Lock()
				steps[key] = n/keys + 1
				mu.Unlock()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	eventually(t, 30*time.Second, "sends acknowledged before the first kill", func() error {
		return countErr("acknowledged", min(int(acked.Load()), 200), 200)
	})
	next := time.Now().Add(cp.interval / 2)
	for k := 1; k <= kills; k++ {
		time.Sleep(time.Until(next))
		leader := g.waitMaster(t, 20*time.Second, nil)
		leader.kill()
		killed := time.Now()
		next = killed.Add(cp.interval)
		master := g.waitMaster(t, 20*time.Second, leader)
		t.Logf("kill %d/%d: kill -9 of leader %s -> master %s after %v (%d sends acknowledged so far)",
			k, kills, leader.proc.name, master.proc.name, time.Since(killed).Round(time.Millisecond), acked.Load())
		time.Sleep(time.Until(killed.Add(cp.restartDelay)))
		leader.restart()
	}
	time.Sleep(time.Until(next))
	stop.Store(true)
	waitGroup(t, &wg, 30*time.Second, "producers stop")

	mu.Lock()
	want := maps.Clone(steps)
	fails := slices.Clone(failures)
	groups := maps.Clone(perGroup)
	mu.Unlock()
	if len(fails) > 0 {
		t.Errorf("%d sends failed at the application: %s", len(fails), firstFew(fails))
	}
	if len(groups) != 2 {
		t.Errorf("acknowledged sends per group %v: want both groups used", groups)
	}
	eventually(t, 60*time.Second, "the orderly consumer receives every key's sequence", func() error {
		mu.Lock()
		defer mu.Unlock()
		for key, n := range want {
			got := seq[key]
			if len(got) == 0 || got[len(got)-1] < n-1 {
				return fmt.Errorf("%s: received up to %v, sent %d steps", key, got[max(0, len(got)-3):], n)
			}
		}
		return nil
	})
	cons.shutdown()
	mu.Lock()
	defer mu.Unlock()
	redelivered := 0
	for key, got := range seq {
		next := 0
		for _, s := range got {
			switch {
			case s == next:
				next++
			case s < next:
				redelivered++ // again: a retried send stored twice, or a redelivery
			default:
				t.Errorf("%s: step %d consumed before step %d: %v", key, s, next, got)
			}
		}
	}
	t.Logf("CHAOS proxy4 two groups: %d kills of one group's leader; %d sends acknowledged (%v), 0 failed at the application; orderly consumer: %d keys in order, %d steps seen again",
		kills, acked.Load(), groups, len(seq), redelivered)
}

// TestChaosProxy4ProxyKill: two producers and a push consumer of the official Go 4.x client are
// given two proxies; the one they took their first routes from (the client asks its name
// servers in turn, the first first) is killed with SIGKILL under load. The clients find the
// other proxy at their next route refresh (every 30 s): the test reports the longest pause
// between acknowledged sends and asserts that sends resume within a minute and that every
// acknowledged message reaches the consumer (0 lost).
func TestChaosProxy4ProxyKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	topic := uniq("P4ProxyKill")
	first := createTopicBySend(t, c.ns.addr, newProducer(t, c), topic, "create-topic")
	pc, pxs := viaProxies(t, c)
	cons := startPushConsumer(t, pc, uniq("GP4ProxyKill"), topic, all)
	load := startChaosLoad(t, joinAddrs(pc), topic, 2, false)
	load.addRaw(attempt{body: first.body, ok: true}, &first)
	load.waitAcked(200, 30*time.Second, "sends acknowledged through the proxies before the kill")
	pxs[0].kill()
	killed := time.Now()
	load.waitAcked(100, 70*time.Second, "sends acknowledged after the proxy kill")
	time.Sleep(2 * time.Second)
	load.stopAndWait()
	consumed := checkConsumedAll(t, cons, load, 2*time.Minute)
	attempts, _ := load.snapshot()
	gap := longestGap(okTimes(attempts), killed, time.Now())
	failed := 0
	for _, a := range attempts {
		if !a.ok {
			failed++
		}
	}
	t.Logf("CHAOS proxy4 proxy kill: kill -9 of the proxy the clients used; longest pause between acknowledged sends %v (the clients' route refresh finds the other proxy); %d failed attempts repeated; consumer received all %d acknowledged messages (lost 0), %d deliveries",
		gap.Round(time.Millisecond), failed, consumed.distinctAcked, consumed.deliveries)
}
