package broker

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"rocketraft/message"
	"rocketraft/metrics"
)

// stats is the broker's one set of traffic counters. Every send, send-back, pull and POP is
// recorded here once, by the record* methods below, and both views read the same counters:
// GET_BROKER_RUNTIME_INFO (admin.go: msgPutTotalTodayNow, msgGetTotalTodayNow, putTps,
// getTransferedTps) and the status page take the totals, Prometheus (metrics_collect.go) the
// per-topic counters. The counters are atomics, so the send and pull paths pay no lock and, once
// a topic and group have been seen, no allocation.
type stats struct {
	started  time.Time
	putTotal atomic.Int64 // records stored by sends and send-backs
	getTotal atomic.Int64 // messages handed out by pulls and POPs
	topics   sync.Map     // topic → *topicMetrics
	tps      tpsSampler
}

// topicMetrics are one topic's counters. in is indexed by message type (sends, by the topic the
// producer named); out (pulls and POPs) and dlq by consumer group.
type topicMetrics struct {
	in      [numMessageTypes]inCounters
	lastPut atomic.Int64 // unix ms
	out     sync.Map     // group → *outCounters
	dlq     sync.Map     // group → *atomic.Int64: messages of this topic the group sent to its DLQ
}

type inCounters struct {
	msgs, bytes atomic.Int64
	size        *metrics.Histogram
}

type outCounters struct{ msgs, bytes atomic.Int64 }

func newStats() *stats { return &stats{started: time.Now()} }

// totals is the topic's messages in (every type) and out (every group), for the status page's
// per-topic rates (statusview.go).
func (tm *topicMetrics) totals() (in, out int64) {
	for i := range tm.in {
		in += tm.in[i].msgs.Load()
	}
	tm.out.Range(func(_, v any) bool {
		out += v.(*outCounters).msgs.Load()
		return true
	})
	return in, out
}

func (s *stats) topic(t string) *topicMetrics {
	if v, ok := s.topics.Load(t); ok {
		return v.(*topicMetrics)
	}
	tm := &topicMetrics{}
	for i := range tm.in {
		tm.in[i].size = metrics.NewHistogram(metrics.MessageSizeBuckets)
	}
	v, _ := s.topics.LoadOrStore(t, tm)
	return v.(*topicMetrics)
}

// recordSend counts a producer's successful send of records to topic (the topic it named), as
// p says it was read: its message type, and where it went (a send to %RETRY%<group> past its
// retry limit lands in %DLQ%<group> and is also counted as sent to the DLQ, by its RETRY_TOPIC).
// storedAt (Unix milliseconds) is the records' store timestamp, the topic's last put: the send
// path stamped it, so counting the send does not read the clock again.
func (s *stats) recordSend(topic string, p *sendPlan, records [][]byte, storedAt int64) {
	s.putTotal.Add(int64(len(records)))
	s.topic(topic).addIn(p.metricType, records, storedAt)
	if p.toDLQ {
		orig := topic
		if p.known.Has&message.KnownRetryTopic != 0 {
			orig = p.known.RetryTopic
		}
		s.recordDLQ(orig, strings.TrimPrefix(topic, message.RetryTopicPrefix), len(records))
	}
}

// addIn counts records stored in the topic as messages in of type mt; at (Unix milliseconds) is
// when they were stored, the topic's last put.
func (tm *topicMetrics) addIn(mt int, records [][]byte, at int64) {
	if at <= 0 { // a commit log that did not say
		at = time.Now().UnixMilli()
	}
	tm.lastPut.Store(at)
	c := &tm.in[mt]
	var n int64
	for _, r := range records {
		n += int64(len(r))
		c.size.Observe(float64(len(r)))
	}
	c.msgs.Add(int64(len(records)))
	c.bytes.Add(n)
}

// recordSendBack counts the copies (records) of a message of origTopic that group handed back.
// A copy for the retry topic is a delayed message in of that topic (RocketMQ counts it when the
// scheduler delivers it there; here when it is stored); a copy for the DLQ counts as sent to the
// DLQ by its original topic.
func (s *stats) recordSendBack(origTopic, group, storedTopic string, records [][]byte, toDLQ bool) {
	s.putTotal.Add(int64(len(records)))
	if toDLQ {
		s.topic(storedTopic).lastPut.Store(time.Now().UnixMilli())
		s.recordDLQ(origTopic, group, len(records))
		return
	}
	s.topic(storedTopic).addIn(msgDelay, records, time.Now().UnixMilli())
}

// recordGet counts n messages (bytes long) handed to group from topic by a pull or a POP. The
// Prometheus view leaves retry and DLQ topics out, as RocketMQ's pull processor does (they are
// the same messages again); the totals count them.
func (s *stats) recordGet(topic, group string, n, bytes int) {
	s.getTotal.Add(int64(n))
	if strings.HasPrefix(topic, message.RetryTopicPrefix) || strings.HasPrefix(topic, message.DLQTopicPrefix) {
		return
	}
	tm := s.topic(topic)
	v, ok := tm.out.Load(group)
	if !ok {
		v, _ = tm.out.LoadOrStore(group, &outCounters{})
	}
	c := v.(*outCounters)
	c.msgs.Add(int64(n))
	c.bytes.Add(int64(bytes))
}

// recordDLQ counts n messages of topic that group gave up on (moved to %DLQ%<group>).
func (s *stats) recordDLQ(topic, group string, n int) {
	tm := s.topic(topic)
	v, ok := tm.dlq.Load(group)
	if !ok {
		v, _ = tm.dlq.LoadOrStore(group, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(int64(n))
}

// tpsWindow is how many one-second samples stats keeps: enough for the
// 10 s / 60 s / 600 s rates RocketMQ reports as putTps and getTransferedTps.
const tpsWindow = 601

// tpsSampler records the put and get totals once a second.
type tpsSampler struct {
	mu   sync.Mutex
	puts [tpsWindow]int64
	gets [tpsWindow]int64
	n    int // samples taken
}

func (s *stats) sample() {
	s.tps.mu.Lock()
	i := s.tps.n % tpsWindow
	s.tps.puts[i] = s.putTotal.Load()
	s.tps.gets[i] = s.getTotal.Load()
	s.tps.n++
	s.tps.mu.Unlock()
}

// rates returns "r10 r60 r600" messages per second over the last 10, 60 and
// 600 seconds (or as many as were sampled), as RocketMQ formats them.
func (s *stats) rates(get bool) string {
	s.tps.mu.Lock()
	defer s.tps.mu.Unlock()
	series := &s.tps.puts
	if get {
		series = &s.tps.gets
	}
	out := ""
	for _, w := range []int{10, 60, 600} {
		r := 0.0
		if s.tps.n > 1 {
			back := min(w, s.tps.n-1)
			last := (s.tps.n - 1) % tpsWindow
			first := (s.tps.n - 1 - back) % tpsWindow
			r = float64(series[last]-series[first]) / float64(back)
		}
		if out != "" {
			out += " "
		}
		out += strconv.FormatFloat(r, 'f', 2, 64)
	}
	return out
}
