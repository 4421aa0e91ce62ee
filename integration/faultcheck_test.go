package integration

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// The fault lab's checker (faultlab_test.go runs it): it trusts only what the clients saw and
// what a raw reader finds in every node's queues, never the broker's own bookkeeping. Besides
// chaosLoad's producers (every acknowledged send with queue, offset and msgId, every failed
// attempt) it runs an ordered producer (official Go client, a queue selector by message group,
// sync sends, a sequence number per group in the body), a push consumer that records when each
// message arrived, and a poller of the consumer group's committed offsets on the registered
// master. Every finding is attributed to the fault whose window (its start to the next fault's
// start) holds the moment it happened.

// ---- ordered producer ----

// orderedLoad sends, per message group, sequence numbers 0, 1, 2... with SendSync; a failed send
// is retried with the same body until acknowledged, and only then does the group's next number
// go out. Its queue selector maps a group to a fixed queue id.
type orderedLoad struct {
	producerBook
	nsAddr string
	topic  string
	queues int
	nAcked atomic.Int64
}

// orderedGroups is how many message groups the ordered producer interleaves (one sender each).
const orderedGroups = 4

// groupQueueSelector sends a message group's messages to queue id group % queues, whatever order
// the route lists the queues in (hashing over the list would move a group if the list changed).
type groupQueueSelector struct{ queues int }

func (s groupQueueSelector) Select(m *primitive.Message, mqs []*primitive.MessageQueue, _ string) *primitive.MessageQueue {
	h := fnv.New32a()
	h.Write([]byte(m.GetShardingKey()))
	want := int(h.Sum32() % uint32(s.queues))
	if g, err := strconv.Atoi(strings.TrimPrefix(m.GetShardingKey(), "g")); err == nil {
		want = g % s.queues
	}
	for _, mq := range mqs {
		if mq.QueueId == want {
			return mq
		}
	}
	return nil // the client reports "route info not found"; the attempt is retried
}

func startOrderedLoad(t testing.TB, nsAddr, topic string, queues int) *orderedLoad {
	l := &orderedLoad{producerBook: producerBook{t: t, name: "ordered producers"}, nsAddr: nsAddr, topic: topic, queues: queues}
	for g := range orderedGroups {
		l.wg.Add(1)
		go l.run(g)
	}
	t.Cleanup(l.stopAndWait)
	return l
}

func (l *orderedLoad) newProducer() (rocketmq.Producer, error) {
	p, err := rocketmq.NewProducer(
		producer.WithNameServer([]string{l.nsAddr}),
		producer.WithGroupName(uniq("PGorder")),
		producer.WithInstanceName(uniq("order")),
		producer.WithRetry(0),
		producer.WithSendMsgTimeout(3*time.Second),
		producer.WithQueueSelector(groupQueueSelector{l.queues}),
	)
	if err != nil {
		return nil, err
	}
	if err := p.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// orderedBody is the body of a group's message seq.
func orderedBody(g, seq int) string { return fmt.Sprintf("ord-g%d-%07d-%s", g, seq, chaosPad) }

// parseOrdered returns the group and sequence number of an ordered body.
func parseOrdered(body string) (g, seq int, ok bool) {
	f := strings.SplitN(body, "-", 4)
	if len(f) < 3 || f[0] != "ord" || !strings.HasPrefix(f[1], "g") {
		return 0, 0, false
	}
	g, err1 := strconv.Atoi(f[1][1:])
	seq, err2 := strconv.Atoi(f[2])
	return g, seq, err1 == nil && err2 == nil
}

func (l *orderedLoad) run(g int) {
	defer l.wg.Done()
	var p rocketmq.Producer
	defer func() {
		if p != nil {
			l.closeProducer(p)
		}
	}()
	var created time.Time
	for seq := 0; !l.stop.Load(); seq++ {
		body := orderedBody(g, seq)
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
			m := primitive.NewMessage(l.topic, []byte(body))
			m.WithShardingKey("g" + strconv.Itoa(g))
			a := attempt{body: body, start: time.Now()}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			r, err := p.SendSync(ctx, m)
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
			if time.Since(created) > 300*time.Millisecond {
				l.closeProducer(p) // a new instance asks the name server for the route at once
				p = nil
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// ---- deliveries and committed offsets ----

// deliveryLog records when the push consumer received each message.
type deliveryLog struct {
	mu    sync.Mutex
	times []time.Time
}

func (d *deliveryLog) callback(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	now := time.Now()
	d.mu.Lock()
	for range msgs {
		d.times = append(d.times, now)
	}
	d.mu.Unlock()
	return consumer.ConsumeSuccess, nil
}

// firstAfter is the first delivery at or after t (zero if none).
func (d *deliveryLog) firstAfter(t time.Time) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := sort.Search(len(d.times), func(i int) bool { return !d.times[i].Before(t) })
	if i == len(d.times) {
		return time.Time{}
	}
	return d.times[i]
}

// offsetPoller asks the registered master for the consumer group's committed offset of every
// queue every 100 ms (QUERY_CONSUMER_OFFSET), as a client resuming after a rebalance would.
type offsetPoller struct {
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	samples map[int][]polledOffset
}

type polledOffset struct {
	at   time.Time
	off  int64
	addr string
}

func startOffsetPoller(t testing.TB, g *raftGroup, group, topic string, queues int) *offsetPoller {
	p := &offsetPoller{stop: make(chan struct{}), done: make(chan struct{}), samples: map[int][]polledOffset{}}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			addrs, err := registeredAddrs(g.ns.addr, g.name)
			if err != nil || addrs[0] == "" {
				continue
			}
			for q := range queues {
				at := time.Now()
				off, found, err := consumerOffset(addrs[0], group, topic, q)
				if err != nil || !found {
					continue
				}
				p.mu.Lock()
				p.samples[q] = append(p.samples[q], polledOffset{at, off, addrs[0]})
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *offsetPoller) close() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// regressions lists every drop of a queue's committed offset below an earlier reading (no test
// here resets offsets, so none is explained); readings of the same drop count once.
func (p *offsetPoller) regressions() (samples int, out []polledRegression) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for q, ss := range p.samples {
		samples += len(ss)
		var best polledOffset
		var last polledRegression
		for i, s := range ss {
			if i > 0 && s.off < best.off {
				if len(out) > 0 && last.queue == q && last.was == best {
					out[len(out)-1].readings++ // the same drop read again
					continue
				}
				last = polledRegression{queue: q, was: best, seen: s, readings: 1}
				out = append(out, last)
			}
			if i == 0 || s.off > best.off {
				best = s
			}
		}
	}
	return samples, out
}

// polledRegression is one drop of a queue's committed offset below the highest value read
// before it, and how many readings showed it.
type polledRegression struct {
	queue     int
	was, seen polledOffset
	readings  int
}

// ---- per-fault attribution and the table ----

// faultWindow is one fault: when it began, when it was healed, and (next) when the following
// fault began or the run ended; findings between start and next are the fault's.
type faultWindow struct {
	nemesis, what     string
	start, end, next  time.Time
	toSend, toDeliver time.Duration // from end; -1: none seen
}

// nemesisRow is one line of the table, summed over runs.
type nemesisRow struct {
	runs                    map[int]bool
	faults, acked           int
	lost, unexpected, order int
	regressions, duplicates int
	dupWhy                  map[string]int
	dupLogged               int
	toSend, toDeliver       durations
	findings                []string
}

// faultTable accumulates the rows of every run (runs are sequential: no lock).
type faultTable struct {
	order []string
	rows  map[string]*nemesisRow
}

func newFaultTable() *faultTable { return &faultTable{rows: map[string]*nemesisRow{}} }

func (ft *faultTable) row(name string) *nemesisRow {
	r := ft.rows[name]
	if r == nil {
		r = &nemesisRow{runs: map[int]bool{}, dupWhy: map[string]int{}}
		ft.rows[name] = r
		ft.order = append(ft.order, name)
	}
	return r
}

// pctl is the p-th percentile (nearest rank) of d, "-" if empty.
func pctl(d durations, p int) string {
	if len(d) == 0 {
		return "-"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := min(len(s)-1, max(0, (len(s)*p+99)/100-1))
	return s[i].Round(time.Millisecond).String()
}

// lines renders the table.
func (ft *faultTable) lines() []string {
	out := []string{fmt.Sprintf("%-34s %4s %6s %7s %4s %5s %4s %5s %4s  %-17s %-17s  %s",
		"nemesis", "runs", "faults", "acked", "lost", "unexp", "ord", "offrg", "dup", "->SEND_OK p50/p99", "->deliver p50/p99", "duplicates why")}
	names := slices.Clone(ft.order)
	for _, n := range names {
		r := ft.rows[n]
		var why []string
		for _, k := range slices.Sorted(maps.Keys(r.dupWhy)) {
			why = append(why, fmt.Sprintf("%d %s", r.dupWhy[k], k))
		}
		out = append(out, fmt.Sprintf("%-34s %4d %6d %7d %4d %5d %4d %5d %4d  %-17s %-17s  %s",
			n, len(r.runs), r.faults, r.acked, r.lost, r.unexpected, r.order, r.regressions, r.duplicates,
			pctl(r.toSend, 50)+"/"+pctl(r.toSend, 99), pctl(r.toDeliver, 50)+"/"+pctl(r.toDeliver, 99), strings.Join(why, ", ")))
	}
	return out
}

// windowOf names the fault whose window holds at ("baseline" before the first fault).
func windowOf(ws []faultWindow, at time.Time) string {
	name := "baseline"
	for _, w := range ws {
		if !at.Before(w.start) {
			name = w.nemesis
		}
	}
	return name
}

// checkedLoad is one producer's record for the checker.
type checkedLoad struct {
	topic    string
	attempts []attempt
	acked    []sent
	ordered  bool
}

// runVerdict is what checkFaultRun found in one run.
type runVerdict struct {
	acked, sends, lost, unexpected, order, regressions, duplicates int
	storedUnacked                                                  int
	commitLogBytes                                                 int64
	offsetSamples                                                  int
}

// checkFaultRun (offsetsFail: a committed-offset regression fails the run, else it is logged and
// counted) stops nothing but the group at its very end: it restarts stopped members, waits
// until every node holds what the leader holds, reads every queue of every load's topic on every
// node from offset 0, attributes each finding to a fault window, adds the run to the table, and
// finally stops the nodes and compares their commitlogs byte for byte over the common prefix.
func checkFaultRun(t testing.TB, run int, g *raftGroup, loads []checkedLoad, ws []faultWindow, poller *offsetPoller, offsetsFail bool, ft *faultTable) runVerdict {
	t.Helper()
	for _, b := range g.nodes {
		if !b.running() {
			b.restart()
		}
	}
	leader := g.waitMaster(t, 30*time.Second, nil)
	var v runVerdict
	for _, w := range ws {
		r := ft.row(w.nemesis)
		r.runs[run] = true
		r.faults++
		if w.toSend >= 0 {
			r.toSend = append(r.toSend, w.toSend)
		}
		if w.toDeliver >= 0 {
			r.toDeliver = append(r.toDeliver, w.toDeliver)
		}
	}
	finding := func(at time.Time, what string) {
		r := ft.row(windowOf(ws, at))
		if len(r.findings) < 20 {
			r.findings = append(r.findings, what)
		}
		t.Errorf("run %d, %s: %s", run, windowOf(ws, at), what)
	}
	for _, l := range loads {
		queues := routedQueues(t, g.ns.addr, l.topic)
		for _, s := range l.acked {
			queues = max(queues, s.queue+1)
		}
		g.waitOffsetsConverged(t, 90*time.Second, leader, l.topic, queues)
		ackAt := map[string]time.Time{}
		firstFail, failEnd := map[string]time.Time{}, map[string]time.Time{}
		fails := map[string][]string{}
		tries := map[string]int{}
		for _, a := range l.attempts {
			tries[a.body]++
			if a.ok {
				ackAt[a.body] = a.finish
				continue
			}
			if _, ok := firstFail[a.body]; !ok {
				firstFail[a.body], failEnd[a.body] = a.start, a.finish
			}
			fails[a.body] = append(fails[a.body], a.err)
		}
		v.sends += len(tries)
		v.acked += len(l.acked)
		for _, s := range l.acked {
			ft.row(windowOf(ws, ackAt[s.body])).acked++
		}
		// Every node: every acknowledged send at its queue and offset, and the same records as
		// the leader (the reference).
		var ref map[int][]*record
		for _, b := range append([]*broker{leader}, g.followers(leader)...) {
			got := readQueues(t, b.addr, l.topic, queues)
			for _, s := range l.acked {
				recs := got[s.queue]
				if s.offset >= int64(len(recs)) || string(recs[s.offset].Body) != s.body {
					v.lost++
					ft.row(windowOf(ws, ackAt[s.body])).lost++
					finding(ackAt[s.body], fmt.Sprintf("LOST on %s: %s acknowledged at %d/%d (offsetMsgId %s) at %s", b.proc.name,
						short(s.body), s.queue, s.offset, s.offsetMsgID, ackAt[s.body].Format("15:04:05.000")))
				}
			}
			if ref == nil {
				ref = got
				continue
			}
			for q := range queues {
				if !slices.EqualFunc(ref[q], got[q], sameRecord) {
					finding(time.Now(), fmt.Sprintf("REPLICAS DIFFER: %s: queue %d of %s holds %d records, leader %s %d (or other ones)", b.proc.name, q, l.topic, len(got[q]), leader.proc.name, len(ref[q])))
				}
			}
		}
		copies := map[string]int{}
		storedAt := map[string]time.Time{}
		for q := range queues {
			for _, r := range ref[q] {
				body := string(r.Body)
				copies[body]++
				if _, ok := storedAt[body]; !ok {
					storedAt[body] = time.UnixMilli(r.StoreTimestamp)
				}
			}
		}
		for _, body := range slices.Sorted(maps.Keys(copies)) {
			n := copies[body]
			if tries[body] == 0 {
				v.unexpected++
				ft.row(windowOf(ws, storedAt[body])).unexpected++
				finding(storedAt[body], fmt.Sprintf("UNEXPECTED: %q stored %d time(s), never sent", short(body), n))
				continue
			}
			_, acked := ackAt[body]
			if !acked {
				v.storedUnacked++
			}
			need := n - 1 // failed attempts needed besides the acknowledged one
			if !acked {
				need = n
			}
			if n == 1 && acked {
				continue
			}
			extra := n - 1
			if extra == 0 {
				continue // stored once, never acknowledged: the outcome the client could not know
			}
			v.duplicates += extra
			r := ft.row(windowOf(ws, firstFail[body]))
			r.duplicates += extra
			if len(fails[body]) < need {
				finding(firstFail[body], fmt.Sprintf("UNEXPLAINED DUPLICATE: %s stored %d times, %d attempts, %d failed", short(body), n, tries[body], len(fails[body])))
				continue
			}
			why := "retry after " + errClass(fails[body][0])
			if !acked {
				why = "unacknowledged sends stored (" + errClass(fails[body][0]) + ")"
			}
			r.dupWhy[why] += extra
			if r.dupLogged < 3 {
				r.dupLogged++
				t.Logf("run %d, %s: duplicate %s stored %d times: %s; first failed attempt %s-%s: %s", run, windowOf(ws, firstFail[body]),
					short(body), n, why, firstFail[body].Format("15:04:05.000"), failEnd[body].Format("15:04:05.000"), summarizeErrs(fails[body]))
			}
		}
		if l.ordered {
			checkOrder(l, ref, ackAt, ws, &v, ft, finding)
		}
	}
	if poller != nil {
		n, regs := poller.regressions()
		v.offsetSamples = n
		for _, rg := range regs {
			v.regressions++
			ft.row(windowOf(ws, rg.seen.at)).regressions++
			report := finding
			if !offsetsFail {
				report = func(_ time.Time, what string) {
					t.Logf("run %d, %s: %s (RR_FAULTS_OFFSETS=report)", run, windowOf(ws, rg.seen.at), what)
				}
			}
			report(rg.seen.at, fmt.Sprintf("OFFSET REGRESSION queue %d: %d read from %s at %s, then %d from %s at %s (%d readings below)", rg.queue,
				rg.was.off, rg.was.addr, rg.was.at.Format("15:04:05.000"), rg.seen.off, rg.seen.addr, rg.seen.at.Format("15:04:05.000"), rg.readings))
		}
	}
	for _, b := range g.nodes {
		if rs, err := raftStatusOf(b.addr); err == nil && rs.Diverged != nil {
			finding(time.Now(), fmt.Sprintf("DIVERGED: %s: %s", b.proc.name, rs.Diverged.Message))
		}
	}
	for _, b := range g.nodes {
		if err := b.stop(); err != nil {
			t.Error(err)
		}
	}
	v.commitLogBytes = compareCommitLogs(t, g.nodes)
	return v
}

// checkOrder walks each queue of the ordered topic on the reference node: a group's acknowledged
// copy of seq n must come after its acknowledged copy of every m < n, in the queue the selector
// names. A stale copy of an earlier seq stored after a later one (a retried send whose first
// attempt landed late) is a duplicate, already counted and explained above.
func checkOrder(l checkedLoad, ref map[int][]*record, ackAt map[string]time.Time, ws []faultWindow, v *runVerdict, ft *faultTable, finding func(time.Time, string)) {
	ackedAt := map[string]sent{}
	for _, s := range l.acked {
		ackedAt[s.body] = s
	}
	queues := len(ref)
	for q, recs := range ref {
		last := map[int]int{} // group -> highest acknowledged seq seen so far in this queue
		for _, r := range recs {
			body := string(r.Body)
			g, seq, ok := parseOrdered(body)
			if !ok {
				continue
			}
			s, acked := ackedAt[body]
			if !acked || s.queue != q || s.offset != r.QueueOffset {
				continue // not the acknowledged copy
			}
			if want := g % max(1, queues); q != want {
				v.order++
				ft.row(windowOf(ws, ackAt[body])).order++
				finding(ackAt[body], fmt.Sprintf("ORDER: group %d seq %d stored in queue %d, its selector names %d", g, seq, q, want))
			}
			if prev, seen := last[g]; seen && seq < prev {
				v.order++
				ft.row(windowOf(ws, ackAt[body])).order++
				finding(ackAt[body], fmt.Sprintf("ORDER: group %d seq %d stored at %d/%d after seq %d", g, seq, q, r.QueueOffset, prev))
			}
			last[g] = max(last[g], seq)
		}
	}
}

// errClass shortens a send error to its kind, for the duplicates' causes.
func errClass(e string) string {
	switch {
	case strings.Contains(e, "outcome is unknown"):
		return "an unknown-outcome answer"
	case strings.Contains(e, "timeout") || strings.Contains(e, "deadline"):
		return "a timeout"
	case strings.Contains(e, "connection") || strings.Contains(e, "EOF") || strings.Contains(e, "broken pipe"):
		return "a connection error"
	case strings.Contains(e, "code") || strings.Contains(e, "status"):
		return "an error answer"
	}
	if len(e) > 40 {
		e = e[:40]
	}
	return strconv.Quote(e)
}

// FuzzParseOrdered: the ordered-body parser never panics, and reads back what orderedBody wrote.
func FuzzParseOrdered(f *testing.F) {
	f.Add("ord-g3-0000042-" + chaosPad)
	f.Add("ord-g-1-x")
	f.Add("p0-0000001-" + chaosPad)
	f.Add("")
	f.Fuzz(func(t *testing.T, body string) {
		if g, seq, ok := parseOrdered(body); ok && g >= 0 && seq >= 0 && seq < 1e7 {
			if g2, seq2, ok2 := parseOrdered(orderedBody(g, seq)); !ok2 || g2 != g || seq2 != seq {
				t.Fatalf("round trip of group %d seq %d from %q: %d %d %v", g, seq, body, g2, seq2, ok2)
			}
		}
	})
}
