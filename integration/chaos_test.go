package integration

// Chaos tests of a three-node DLedger group with real processes and the unmodified official Go
// client: the leader killed (-9) over and over under load, a follower killed under load, and
// both followers killed (minority left). Each ends by reading every queue on every node with raw
// pulls and comparing the nodes' commitlogs byte for byte.
//
// The short versions run in make test. make chaos runs the long leader-kill loop by setting
// RR_CHAOS_KILLS (and the interval and restart delay) and prints the figures; see chaosParams.

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// chaosParams are the leader-kill loop's knobs, from the environment:
//
//	RR_CHAOS_KILLS          kills of the leader (default 3; make chaos: 20)
//	RR_CHAOS_INTERVAL       time between kills (default 6s; make chaos: 15s)
//	RR_CHAOS_RESTART_DELAY  time from a kill to the restart of the killed node (default 2s; make chaos: 5s)
//	RR_CHAOS_PRODUCERS      concurrent producers (default 2)
//	RR_CHAOS_HEARTBEAT_MS   dLegerHeartbeatTimeoutMs (and election timeout) of the nodes (default 0 = 500 ms)
//	RR_CHAOS_DISK_BUSY      1: a writer fsyncs 4 MiB chunks to the test's disk all along (make chaos: 1)
type chaosParams struct {
	kills        int
	interval     time.Duration
	restartDelay time.Duration
	producers    int
	heartbeatMs  int
	diskBusy     bool
}

func chaosParamsFromEnv(t testing.TB) chaosParams {
	t.Helper()
	p := chaosParams{kills: 3, interval: 6 * time.Second, restartDelay: 2 * time.Second, producers: 2}
	atoi := func(key string, dst *int) {
		if v := os.Getenv(key); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				t.Fatalf("%s=%q: want a non-negative integer", key, v)
			}
			*dst = n
		}
	}
	dur := func(key string, dst *time.Duration) {
		if v := os.Getenv(key); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				t.Fatalf("%s=%q: want a positive duration such as 15s", key, v)
			}
			*dst = d
		}
	}
	atoi("RR_CHAOS_KILLS", &p.kills)
	dur("RR_CHAOS_INTERVAL", &p.interval)
	dur("RR_CHAOS_RESTART_DELAY", &p.restartDelay)
	atoi("RR_CHAOS_PRODUCERS", &p.producers)
	atoi("RR_CHAOS_HEARTBEAT_MS", &p.heartbeatMs)
	busy := 0
	atoi("RR_CHAOS_DISK_BUSY", &busy)
	p.diskBusy = busy > 0
	if p.kills < 1 || p.producers < 1 {
		t.Fatalf("RR_CHAOS_KILLS and RR_CHAOS_PRODUCERS must be >= 1")
	}
	if p.restartDelay+2*time.Second > p.interval {
		t.Fatalf("RR_CHAOS_INTERVAL (%v) must exceed RR_CHAOS_RESTART_DELAY (%v) by at least 2s", p.interval, p.restartDelay)
	}
	return p
}

// chaosProps: commitlog and consume-queue files small enough that a run crosses several, large
// enough that the long run does not make thousands; frequent Raft snapshots so log truncation
// and catch-up after a restart are exercised too.
func chaosProps(extra map[string]string) []brokerOpt {
	opts := []brokerOpt{
		withProp("mappedFileSizeCommitLog", strconv.Itoa(2<<20)),
		withProp("mapedFileSizeConsumeQueue", strconv.Itoa(3000*20)),
		withProp("dLegerSnapshotIntervalSec", "2"),
		withProp("dLegerSnapshotThreshold", "1024"),
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		opts = append(opts, withProp(k, extra[k]))
	}
	return opts
}

// ---- load ----

// attempt is one SendSync (or raw send) of a message body.
type attempt struct {
	body          string
	start, finish time.Time
	ok            bool
	err           string // why it was not SEND_OK
}

// chaosLoad runs producers that send continuously with SendSync, each message body unique to
// one producer and sequence number. A send that fails is retried with the same body (what an
// application does to get at-least-once delivery), so a failure whose outcome was in fact a
// stored message leaves a duplicate: every duplicate must be explained by such a failure.
type chaosLoad struct {
	producerBook
	nsAddr   string
	topic    string
	recreate bool // start a new producer after a failure (to get a fresh route)

	nAttempts, nAcked, nFailed atomic.Int64
	producersStarted           atomic.Int64
}

// producerBook is what every load of sync producers keeps (chaosLoad, orderedLoad): each
// attempt and each acknowledged send for the checker, and the goroutines to stop and wait for.
type producerBook struct {
	t    testing.TB
	name string // "chaos producers", in the stop messages

	stop     atomic.Bool
	wg       sync.WaitGroup // producer loops
	shutdown sync.WaitGroup // producer shutdowns in flight

	mu       sync.Mutex
	attempts []attempt
	acked    []sent
}

// closeProducer shuts p down in the background (a shutdown can wait on a dead broker); stopAndWait
// waits for it.
func (b *producerBook) closeProducer(p rocketmq.Producer) {
	b.shutdown.Add(1)
	go func() {
		defer b.shutdown.Done()
		_ = p.Shutdown()
	}()
}

// stopAndWait stops the producer loops and waits, bounded, for them and their shutdowns.
func (b *producerBook) stopAndWait() {
	if b.stop.Swap(true) {
		return
	}
	waitGroup(b.t, &b.wg, 30*time.Second, b.name+" stop")
	waitGroup(b.t, &b.shutdown, 30*time.Second, b.name+" shut down")
}

// snapshot copies what was recorded so far.
func (b *producerBook) snapshot() ([]attempt, []sent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.attempts), slices.Clone(b.acked)
}

const chaosPad = "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz"

func startChaosLoad(t testing.TB, nsAddr, topic string, producers int, recreate bool) *chaosLoad {
	l := &chaosLoad{producerBook: producerBook{t: t, name: "chaos producers"}, nsAddr: nsAddr, topic: topic, recreate: recreate}
	for g := range producers {
		l.wg.Add(1)
		go l.run(g)
	}
	t.Cleanup(func() { l.stopAndWait() })
	return l
}

func (l *chaosLoad) newProducer() (rocketmq.Producer, error) {
	p, err := rocketmq.NewProducer(
		producer.WithNameServer(strings.Split(l.nsAddr, ";")), // several: proxies (proxy4_test.go)
		producer.WithGroupName(uniq("PGchaos")),
		producer.WithInstanceName(uniq("chaos")),
		producer.WithRetry(0), // retries are ours, with the same body, and recorded
		producer.WithSendMsgTimeout(3*time.Second),
	)
	if err != nil {
		return nil, err
	}
	if err := p.Start(); err != nil {
		return nil, err
	}
	l.producersStarted.Add(1)
	return p, nil
}

func (l *chaosLoad) run(g int) {
	defer l.wg.Done()
	var p rocketmq.Producer
	defer func() {
		if p != nil {
			l.closeProducer(p)
		}
	}()
	var created time.Time
	for i := 0; !l.stop.Load(); i++ {
		body := fmt.Sprintf("p%d-%07d-%s", g, i, chaosPad)
		for !l.stop.Load() {
			if p == nil {
				var err error
				if p, err = l.newProducer(); err != nil {
					p = nil
					time.Sleep(100 * time.Millisecond)
					continue
				}
				created = time.Now()
			}
			a := attempt{body: body, start: time.Now()}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			r, err := p.SendSync(ctx, primitive.NewMessage(l.topic, []byte(body)))
			cancel()
			a.finish = time.Now()
			switch {
			case err != nil:
				a.err = err.Error()
			case r.Status != primitive.SendOK:
				a.err = fmt.Sprintf("status %d", r.Status)
			default:
				a.ok = true
			}
			l.nAttempts.Add(1)
			l.mu.Lock()
			l.attempts = append(l.attempts, a)
			if a.ok {
				l.acked = append(l.acked, sent{body, r.MessageQueue.QueueId, r.QueueOffset, r.MsgID, r.OffsetMsgID})
			}
			l.mu.Unlock()
			if a.ok {
				l.nAcked.Add(1)
				break
			}
			l.nFailed.Add(1)
			if l.recreate && time.Since(created) > 300*time.Millisecond {
				// The client refreshes routes only every 30 s: a new instance asks the name
				// server at once.
				l.closeProducer(p)
				p = nil
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// addRaw records a raw send (the failover probe) as an attempt.
func (l *chaosLoad) addRaw(a attempt, s *sent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts = append(l.attempts, a)
	if s != nil {
		l.acked = append(l.acked, *s)
	}
}

// waitAcked waits until at least n more sends than now have been acknowledged.
func (l *chaosLoad) waitAcked(n int64, timeout time.Duration, what string) {
	l.t.Helper()
	target := l.nAcked.Load() + n
	eventually(l.t, timeout, what, func() error {
		if got := l.nAcked.Load(); got < target {
			return fmt.Errorf("%d of %d acknowledged (%d failed attempts)", got, target, l.nFailed.Load())
		}
		return nil
	})
}

// ---- verification ----

// chaosResult is what verifyGroup found.
type chaosResult struct {
	attempts, distinct, acked int
	stored, storedUnacked     int
	duplicates                int // extra copies, each explained by a failed attempt
	failedAttempts            int
	commitLogBytes            int64
}

// verifyGroup restarts any stopped member, waits until every node has applied the same number of
// messages on every queue, reads every queue on every node with raw pulls and checks: offsets
// dense from 0; every acknowledged send at the queue and offset it was acknowledged with on every
// node (0 lost); the same records on every node; every stored body one that was sent, and every
// duplicate explained by a failed attempt of the same body (an outcome the client could not know,
// then a retry). Then it stops the group cleanly and compares the commitlogs byte for byte over
// their common prefix.
func verifyGroup(t testing.TB, g *raftGroup, l *chaosLoad) chaosResult {
	t.Helper()
	l.stopAndWait()
	for _, b := range g.nodes {
		if !b.running() {
			b.restart()
		}
	}
	attempts, acked := l.snapshot()
	queues := 0
	if n, err := queueCount(g.ns.addr, l.topic); err == nil {
		queues = n
	}
	for _, s := range acked {
		queues = max(queues, s.queue+1)
	}
	leader := g.waitMaster(t, 20*time.Second, nil)
	g.waitOffsetsConverged(t, 60*time.Second, leader, l.topic, queues)

	var ref map[int][]*record
	for _, b := range g.nodes {
		got := readQueues(t, b.addr, l.topic, queues)
		checkAcked(t, b.proc.name, got, acked)
		if ref == nil {
			ref = got
			continue
		}
		for q := range queues {
			if !slices.EqualFunc(ref[q], got[q], sameRecord) {
				t.Fatalf("%s: queue %d (%d records) differs from %s (%d records)", b.proc.name, q, len(got[q]), g.nodes[0].proc.name, len(ref[q]))
			}
		}
	}

	tries, fails := map[string]int{}, map[string][]string{}
	for _, a := range attempts {
		tries[a.body]++
		if !a.ok {
			fails[a.body] = append(fails[a.body], a.err)
		}
	}
	ackedSet := map[string]bool{}
	for _, s := range acked {
		ackedSet[s.body] = true
	}
	copies := map[string]int{}
	stored := 0
	for _, recs := range ref {
		for _, r := range recs {
			copies[string(r.Body)]++
			stored++
		}
	}
	res := chaosResult{attempts: len(attempts), distinct: len(tries), acked: len(ackedSet), stored: stored}
	var unknown, unexplained []string
	explained := 0
	for _, body := range slices.Sorted(maps.Keys(copies)) {
		n := copies[body]
		if tries[body] == 0 {
			unknown = append(unknown, short(body))
			continue
		}
		if !ackedSet[body] {
			res.storedUnacked++
		}
		if n == 1 {
			continue
		}
		res.duplicates += n - 1
		// n copies need n-1 failed attempts besides the acknowledged one (n if none was).
		need := n - 1
		if !ackedSet[body] {
			need = n
		}
		if len(fails[body]) < need {
			unexplained = append(unexplained, fmt.Sprintf("%s stored %d times, %d attempts, %d failed", short(body), n, tries[body], len(fails[body])))
			continue
		}
		if explained < 5 {
			t.Logf("duplicate %s: stored %d times; explained by %d failed attempt(s) before the retry: %s", short(body), n, len(fails[body]), summarizeErrs(fails[body]))
		}
		explained++
	}
	if explained > 5 {
		t.Logf("... and %d more duplicates, each after a failed attempt of the same body", explained-5)
	}
	for _, a := range attempts {
		if !a.ok {
			res.failedAttempts++
		}
	}
	if len(unknown) > 0 {
		t.Errorf("%d stored message(s) were never sent: %s", len(unknown), firstFew(unknown))
	}
	if len(unexplained) > 0 {
		t.Errorf("%d duplicate(s) not explained by a failed attempt: %s", len(unexplained), firstFew(unexplained))
	}

	for _, b := range g.nodes {
		if err := b.stop(); err != nil {
			t.Fatal(err)
		}
	}
	res.commitLogBytes = compareCommitLogs(t, g.nodes)
	return res
}

// summarizeErrs lists distinct error texts (shortened) with their counts, in first-seen order.
func summarizeErrs(errs []string) string {
	count := map[string]int{}
	var order []string
	for _, e := range errs {
		if len(e) > 160 {
			e = e[:160] + "..."
		}
		if count[e] == 0 {
			order = append(order, e)
		}
		count[e]++
	}
	var sb strings.Builder
	for i, e := range order {
		if i > 0 {
			sb.WriteString("; ")
		}
		fmt.Fprintf(&sb, "%dx %q", count[e], e)
	}
	return sb.String()
}

// short names a chaos body without its padding.
func short(body string) string {
	if i := strings.LastIndexByte(body, '-'); i > 0 && strings.HasPrefix(body[i+1:], "0123") {
		return body[:i]
	}
	return body
}

// readQueues reads queues 0..n-1 of topic from addr with raw pulls, from offset 0 to the
// queue's max offset.
func readQueues(t testing.TB, addr, topic string, n int) map[int][]*record {
	t.Helper()
	group := uniq("CHAOSREAD")
	out := map[int][]*record{}
	deadline := time.Now().Add(3 * time.Minute)
	// One connection for the whole read (dialled again after an error): a connection per pull
	// ran the client out of ephemeral ports reading millions of records (TIME_WAIT).
	var conn net.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	send := func(ext map[string]string) (*remotingCmd, error) {
		if conn == nil {
			c, err := dialRemoting(addr, 10*time.Second)
			if err != nil {
				return nil, err
			}
			conn = c
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		resp, err := roundTrip(conn, codePullMessage, ext, nil)
		if err != nil {
			conn.Close()
			conn = nil
		}
		return resp, err
	}
	for q := range n {
		hi, err := maxOffset(addr, topic, q)
		if err != nil {
			t.Fatalf("max offset of %s/%d at %s: %v", topic, q, addr, err)
		}
		for off := int64(0); off < hi; {
			if time.Now().After(deadline) {
				t.Fatalf("reading %s/%d at %s: still at offset %d of %d", topic, q, addr, off, hi)
			}
			recs, next, err := pullVia(send, group, topic, q, off, "*", "TAG")
			if err != nil {
				t.Fatalf("raw pull %s/%d@%d from %s: %v", topic, q, off, addr, err)
			}
			if next <= off {
				t.Fatalf("raw pull %s/%d@%d from %s (max %d): nextBeginOffset %d does not advance", topic, q, off, addr, hi, next)
			}
			out[q] = append(out[q], recs...)
			off = next
		}
	}
	return out
}

// ---- figures ----

type durations []time.Duration

func (d durations) String() string {
	if len(d) == 0 {
		return "n/a"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	r := func(x time.Duration) time.Duration { return x.Round(time.Millisecond) }
	p99 := s[min(len(s)-1, (len(s)*99+99)/100-1)]
	return fmt.Sprintf("min %v / median %v / p99 %v / max %v", r(s[0]), r(s[len(s)/2]), r(p99), r(s[len(s)-1]))
}

// ---- tests ----

// TestChaosLeaderKillLoop: producers (the official client, RR_CHAOS_PRODUCERS of them) send
// continuously while the leader is killed with SIGKILL every RR_CHAOS_INTERVAL and restarted
// RR_CHAOS_RESTART_DELAY later, RR_CHAOS_KILLS times. After each kill it measures the failover:
// kill -9 to a new master (brokerId 0) in the name server's route, and to the first SEND_OK from
// that master (a raw send probe). A producer whose send fails is replaced by a new one (the
// client refreshes routes only every 30 s) and retries the same body. Then verifyGroup: 0 lost,
// every duplicate explained, offsets dense, identical replicas.
func TestChaosLeaderKillLoop(t *testing.T) {
	t.Parallel()
	chaosLeaderKillLoop(t, map[string]string{})
}

// TestChaosLeaderKillLoopWALStore is the kill loop with the Raft log in raft-wal
// (dLegerLogStore=wal), the store nodes created before the commitlog became the default keep:
// each message is written to the log and, once applied, to the commitlog.
func TestChaosLeaderKillLoopWALStore(t *testing.T) {
	t.Parallel()
	chaosLeaderKillLoop(t, map[string]string{"dLegerLogStore": "wal"})
}

func chaosLeaderKillLoop(t *testing.T, extra map[string]string) {
	cp := chaosParamsFromEnv(t)
	if cp.heartbeatMs > 0 {
		extra["dLegerHeartbeatTimeoutMs"] = strconv.Itoa(cp.heartbeatMs)
		extra["dLegerElectionTimeoutMs"] = strconv.Itoa(cp.heartbeatMs)
	}
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, chaosProps(extra)...)
	g.waitMaster(t, 20*time.Second, nil)
	var disk *diskLoad
	if cp.diskBusy {
		disk = startDiskLoad(t)
	}
	topic := uniq("ChaosLeaderKill")
	first := createTopicBySend(t, ns.addr, newProducer(t, &cluster{ns: ns}), topic, "create-topic")

	load := startChaosLoad(t, ns.addr, topic, cp.producers, true)
	load.addRaw(attempt{body: first.body, ok: true}, &first)
	load.waitAcked(100, 30*time.Second, "load acknowledged before the first kill")
	// A consumer group reads along (committing offsets every 5 s, as the client does), while a
	// watcher samples the topic's route and the group's committed offsets on the master.
	queues := routedQueues(t, ns.addr, topic)
	group := uniq("GChaos")
	cons := startPushConsumer(t, g.asCluster(g.waitMaster(t, 20*time.Second, nil)), group, topic, all)
	watch := startFailoverWatch(t, g, topic, group, queues)

	var toRoute, toAck durations
	start := time.Now()
	next := time.Now().Add(cp.interval / 2)
	for k := 1; k <= cp.kills; k++ {
		time.Sleep(time.Until(next))
		leader := g.waitMaster(t, 20*time.Second, nil)
		killed := time.Now()
		next = killed.Add(cp.interval)
		ackedBefore := load.nAcked.Load()
		logMarks := g.logSizes()
		leader.kill()
		watch.killed(killed)
		master := g.waitMaster(t, 20*time.Second, leader)
		reg := time.Since(killed)
		campaigns := g.countSince(logMarks, "fast failover: the leader's process is gone")
		ack := probeFirstAck(t, load, master, topic, k, 20*time.Second).Sub(killed)
		toRoute, toAck = append(toRoute, reg), append(toAck, ack)
		t.Logf("kill %d/%d: kill -9 of leader %s -> master %s registered after %v, its first SEND_OK after %v (%d sends acknowledged before this kill; %d fast-failover campaign(s))",
			k, cp.kills, leader.proc.name, master.proc.name, reg.Round(time.Millisecond), ack.Round(time.Millisecond), ackedBefore, campaigns)
		time.Sleep(time.Until(killed.Add(cp.restartDelay)))
		leader.restart()
	}
	// Service after the last restart, through the producers.
	load.waitAcked(50, 30*time.Second, "load acknowledged after the last restart")
	elapsed := time.Since(start)
	load.stopAndWait()
	diskNote := "disk not loaded"
	if disk != nil {
		diskNote = disk.stop()
	}
	consumed := checkConsumedAll(t, cons, load, 2*time.Minute)
	watch.close()
	polls, noMaster, longest := watch.routeReport()
	offs := watch.offsets()
	if noMaster > 0 {
		t.Errorf("the route of %s had no master in %d of %d polls (longest %v): a client refreshing then could not send", topic, noMaster, polls, longest)
	}
	if len(offs.violations) > 0 {
		t.Errorf("%d committed offsets went back below a value replicated before the kill: %s", len(offs.violations), firstFew(offs.violations))
	}
	res := verifyGroup(t, g, load)

	t.Logf("CHAOS leader-kill: %d kills every %v (restart after %v), %v of load, %d producers (%d instances started)",
		cp.kills, cp.interval, cp.restartDelay, elapsed.Round(time.Second), cp.producers, load.producersStarted.Load())
	t.Logf("CHAOS leader-kill: messages sent %d (attempts %d, failed attempts %d), acknowledged %d, lost 0, stored %d (%d never acknowledged), duplicates %d (each explained by a failed attempt and its retry)",
		res.distinct, res.attempts, res.failedAttempts, res.acked, res.stored, res.storedUnacked, res.duplicates)
	t.Logf("CHAOS leader-kill: %s", diskNote)
	t.Logf("CHAOS leader-kill: failover kill -9 -> new master in route: %v", toRoute)
	t.Logf("CHAOS leader-kill: failover kill -9 -> first SEND_OK from the new master: %v", toAck)
	t.Logf("CHAOS leader-kill: commitlogs of the 3 nodes byte-identical over %d common bytes", res.commitLogBytes)
	t.Logf("CHAOS leader-kill: route of the topic polled every %v: %d polls, %d without a master (longest %v)", watchRoutePeriod, polls, noMaster, longest)
	t.Logf("CHAOS leader-kill: consumer group offsets sampled every %v on the master: %d samples, largest rollback %d (in %d readings, each within %v of a kill of a leader that had acknowledged it unreplicated)",
		watchOffsetPeriod, offs.samples, offs.maxRollback, offs.rollbacks, replicationGrace)
	t.Logf("CHAOS leader-kill: consumer received all %d acknowledged messages; %d deliveries in all, %d of the same body again (%d of them stored twice by a producer retry, %d redelivered)",
		consumed.distinctAcked, consumed.deliveries, consumed.redelivered, min(res.duplicates, consumed.redelivered), max(0, consumed.redelivered-res.duplicates))
}

// consumption is what checkConsumedAll found.
type consumption struct{ distinctAcked, deliveries, redelivered int }

// checkConsumedAll waits (bounded) until the push consumer has received every acknowledged body
// and reports redeliveries (deliveries beyond one per distinct body received).
func checkConsumedAll(t testing.TB, c *pushConsumer, l *chaosLoad, timeout time.Duration) consumption {
	t.Helper()
	_, acked := l.snapshot()
	want := map[string]bool{}
	for _, s := range acked {
		want[s.body] = true
	}
	var got []string
	eventually(t, timeout, "the consumer receives every acknowledged message", func() error {
		got = got[:0]
		seen := map[string]bool{}
		for _, m := range c.got.snapshot() {
			got = append(got, string(m.Body))
			seen[string(m.Body)] = true
		}
		missing := 0
		for b := range want {
			if !seen[b] {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d acknowledged messages not received yet", missing, len(want))
		}
		return nil
	})
	c.shutdown()
	distinct := map[string]bool{}
	for _, b := range got {
		distinct[b] = true
	}
	return consumption{distinctAcked: len(want), deliveries: len(got), redelivered: len(got) - len(distinct)}
}

// diskLoad keeps the disk busy during a chaos run, as other tenants or a compaction would: it
// writes 4 MiB chunks to a file in the test's temporary directory and fsyncs each one, starting
// over every 256 MiB.
type diskLoad struct {
	t       testing.TB
	done    chan struct{}
	wg      sync.WaitGroup
	written atomic.Int64
	syncs   atomic.Int64
	maxSync atomic.Int64 // nanoseconds
	started time.Time
}

func startDiskLoad(t testing.TB) *diskLoad {
	d := &diskLoad{t: t, done: make(chan struct{}), started: time.Now()}
	path := filepath.Join(t.TempDir(), "disk-load")
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		f, err := os.Create(path)
		if err != nil {
			t.Errorf("disk load: %v", err)
			return
		}
		defer os.Remove(path)
		defer f.Close()
		chunk := make([]byte, 4<<20)
		for i := range chunk {
			chunk[i] = byte(i * 7)
		}
		var off int64
		for {
			select {
			case <-d.done:
				return
			default:
			}
			if _, err := f.WriteAt(chunk, off); err != nil {
				t.Errorf("disk load write: %v", err)
				return
			}
			s := time.Now()
			if err := f.Sync(); err != nil {
				t.Errorf("disk load sync: %v", err)
				return
			}
			if el := int64(time.Since(s)); el > d.maxSync.Load() {
				d.maxSync.Store(el)
			}
			d.syncs.Add(1)
			d.written.Add(int64(len(chunk)))
			if off += int64(len(chunk)); off >= 256<<20 {
				off = 0
			}
		}
	}()
	t.Cleanup(func() { d.stop() })
	return d
}

// stop ends the load and describes it.
func (d *diskLoad) stop() string {
	select {
	case <-d.done:
	default:
		close(d.done)
	}
	waitGroup(d.t, &d.wg, 30*time.Second, "disk load stops")
	el := time.Since(d.started).Seconds()
	return fmt.Sprintf("disk kept busy: %.0f MB/s of 4 MiB writes each fsynced (%d fsyncs, slowest %v)",
		float64(d.written.Load())/el/1e6, d.syncs.Load(), time.Duration(d.maxSync.Load()).Round(time.Millisecond))
}

// logSizes records how long each member's log is now (countSince reads what follows).
func (g *raftGroup) logSizes() map[*broker]int64 {
	out := map[*broker]int64{}
	for _, b := range g.nodes {
		if fi, err := os.Stat(b.proc.logPath); err == nil {
			out[b] = fi.Size()
		}
	}
	return out
}

// countSince counts the lines containing s written to the members' logs after marks.
func (g *raftGroup) countSince(marks map[*broker]int64, s string) int {
	n := 0
	for _, b := range g.nodes {
		data, err := os.ReadFile(b.proc.logPath)
		if err != nil || int64(len(data)) < marks[b] {
			continue
		}
		n += strings.Count(string(data[marks[b]:]), s)
	}
	return n
}

// probeFirstAck sends raw SEND_MESSAGEs (queue 0, a unique body each) to master every 20 ms
// until one is SEND_OK, records them with the load, and returns when it was acknowledged.
func probeFirstAck(t testing.TB, l *chaosLoad, master *broker, topic string, k int, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for i := 0; ; i++ {
		body := fmt.Sprintf("probe%d-%d", k, i)
		a := attempt{body: body, start: time.Now()}
		resp, err := sendRaw(master.addr, topic, 0, []byte(body), "")
		a.finish = time.Now()
		switch {
		case err != nil:
			a.err = err.Error()
		case resp.Code != respSuccess:
			a.err = fmt.Sprintf("code %d %s", resp.Code, resp.Remark)
		default:
			off, perr := strconv.ParseInt(resp.ExtFields["queueOffset"], 10, 64)
			if perr != nil {
				t.Fatalf("probe: queueOffset %q", resp.ExtFields["queueOffset"])
			}
			a.ok = true
			l.addRaw(a, &sent{body: body, queue: 0, offset: off, offsetMsgID: resp.ExtFields["msgId"]})
			return a.finish
		}
		l.addRaw(a, nil)
		if time.Now().After(deadline) {
			t.Fatalf("no SEND_OK from the new master %s within %v: %s", master.proc.name, timeout, a.err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestChaosFollowerKill: kill -9 of a follower under load fails no send (the leader keeps a
// quorum with the other follower); after its restart it catches up and the replicas converge.
func TestChaosFollowerKill(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, chaosProps(nil)...)
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic := uniq("ChaosFollowerKill")
	first := createTopicBySend(t, ns.addr, newProducer(t, &cluster{ns: ns}), topic, "create-topic")
	waitTopicRoute(t, &cluster{ns: ns, b: leader}, topic)

	load := startChaosLoad(t, ns.addr, topic, 2, false)
	load.addRaw(attempt{body: first.body, ok: true}, &first)
	load.waitAcked(200, 30*time.Second, "load acknowledged before the kill")
	victim := g.followers(leader)[0]
	victim.kill()
	load.waitAcked(300, 30*time.Second, "load acknowledged with one follower down")
	time.Sleep(2 * time.Second)
	victim.restart()
	load.waitAcked(300, 30*time.Second, "load acknowledged after the follower's restart")
	load.stopAndWait()
	if master := g.waitMaster(t, 5*time.Second, nil); master != leader {
		t.Errorf("leadership moved from %s to %s although only a follower died", leader.proc.name, master.proc.name)
	}

	attempts, _ := load.snapshot()
	var failed []string
	for _, a := range attempts {
		if !a.ok {
			failed = append(failed, a.body[:min(len(a.body), 12)]+": "+a.err)
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d sends failed with a follower down (want 0): %s", len(failed), len(attempts), firstFew(failed))
	}
	res := verifyGroup(t, g, load)
	if res.duplicates != 0 {
		t.Errorf("%d duplicates without a failed send", res.duplicates)
	}
	t.Logf("follower kill: %d sends, %d acknowledged, %d failed, 0 lost; commitlogs identical over %d bytes",
		res.attempts, res.acked, res.failedAttempts, res.commitLogBytes)
}

// TestChaosMinorityLeft: both followers killed under load: no send started after the kills is
// acknowledged while they are down (the producers' and raw sends to the old leader all fail);
// after both restart service resumes and nothing acknowledged is lost.
func TestChaosMinorityLeft(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, chaosProps(nil)...)
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic := uniq("ChaosMinority")
	first := createTopicBySend(t, ns.addr, newProducer(t, &cluster{ns: ns}), topic, "create-topic")

	load := startChaosLoad(t, ns.addr, topic, 2, true)
	load.addRaw(attempt{body: first.body, ok: true}, &first)
	load.waitAcked(200, 30*time.Second, "load acknowledged before the kills")
	followers := g.followers(leader)
	for _, f := range followers {
		f.kill()
	}
	down := time.Now()
	// Raw sends straight to the old leader while the followers are down: never SEND_OK.
	rawCodes := map[string]int{}
	for i := 0; time.Since(down) < 4*time.Second; i++ {
		body := fmt.Sprintf("minority-raw-%d", i)
		a := attempt{body: body, start: time.Now()}
		resp, err := sendRaw(leader.addr, topic, 0, []byte(body), "")
		a.finish = time.Now()
		switch {
		case err != nil:
			a.err = err.Error()
			rawCodes["error"]++
		case resp.Code == respSuccess:
			a.ok = true
			rawCodes["SEND_OK"]++
		default:
			a.err = fmt.Sprintf("code %d %s", resp.Code, resp.Remark)
			rawCodes["code "+strconv.Itoa(resp.Code)]++
		}
		if a.ok {
			t.Errorf("raw send %s to %s acknowledged with both followers down", body, leader.proc.name)
		}
		load.addRaw(a, nil)
		time.Sleep(100 * time.Millisecond)
	}
	restarting := time.Now()
	attemptsDown := load.nAttempts.Load()
	for _, f := range followers {
		f.restart()
	}
	load.waitAcked(200, 30*time.Second, "load acknowledged after the followers' restart")
	recovered := time.Since(restarting)

	attempts, _ := load.snapshot()
	var during, acked []string
	for _, a := range attempts {
		if a.start.After(down) && a.finish.Before(restarting) {
			during = append(during, a.body)
			if a.ok {
				acked = append(acked, short(a.body))
			}
		}
	}
	if len(acked) > 0 {
		t.Errorf("%d send(s) started after both followers died were acknowledged before they restarted: %s", len(acked), firstFew(acked))
	}
	if len(during) == 0 {
		t.Errorf("no send was attempted while the followers were down")
	}
	res := verifyGroup(t, g, load)
	t.Logf("minority left: %d sends attempted with both followers down, 0 acknowledged (raw sends to the old leader: %v); service back %v after the restarts began (%d producer attempts before); %d acknowledged in all, 0 lost, %d duplicates explained",
		len(during), rawCodes, recovered.Round(time.Millisecond), attemptsDown, res.acked, res.duplicates)
}
