package broker

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// stats counts traffic for GET_BROKER_RUNTIME_INFO and the admin views. The
// counters are atomics so the send and pull paths pay no lock.
type stats struct {
	started  time.Time
	putTotal atomic.Int64
	getTotal atomic.Int64
	topics   sync.Map // topic → *topicStats
	tps      tpsSampler
}

type topicStats struct {
	put     atomic.Int64
	get     atomic.Int64
	lastPut atomic.Int64 // unix ms
}

func newStats() *stats { return &stats{started: time.Now()} }

func (s *stats) topic(t string) *topicStats {
	if v, ok := s.topics.Load(t); ok {
		return v.(*topicStats)
	}
	v, _ := s.topics.LoadOrStore(t, &topicStats{})
	return v.(*topicStats)
}

func (s *stats) recordPut(topic string, n int) {
	s.putTotal.Add(int64(n))
	ts := s.topic(topic)
	ts.put.Add(int64(n))
	ts.lastPut.Store(time.Now().UnixMilli())
}

func (s *stats) recordGet(topic string, n int) {
	s.getTotal.Add(int64(n))
	s.topic(topic).get.Add(int64(n))
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
