package broker

import (
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
