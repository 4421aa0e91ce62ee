package bench

import (
	"fmt"
	"io"
	"sync"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
)

// producerSlot holds one of a run's official-client producers and replaces it with a fresh one
// when its route leads to a dead broker. The official client refreshes routes only every 30 s and
// offers no call to refresh one now; a new producer (its own client instance, see instanceName)
// fetches the route from the name server on its first send, which is what an application can do.
type producerSlot struct {
	mu      sync.Mutex
	p       rocketmq.Producer
	gen     uint64
	renewed time.Time
	start   func() (rocketmq.Producer, error)
	grace   time.Duration // how long a replaced producer lives on for its sends in flight
	retired map[*time.Timer]rocketmq.Producer
	log     io.Writer
}

func newProducerSlot(p rocketmq.Producer, start func() (rocketmq.Producer, error), grace time.Duration, log io.Writer) *producerSlot {
	return &producerSlot{p: p, start: start, grace: grace, retired: map[*time.Timer]rocketmq.Producer{}, log: log}
}

// get returns the current producer and its generation.
func (s *producerSlot) get() (rocketmq.Producer, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p, s.gen
}

// renew replaces the producer of generation gen by a fresh one, unless that happened already or
// less than minRenewInterval ago. The old one is shut down after grace.
func (s *producerSlot) renew(gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen || time.Since(s.renewed) < minRenewInterval {
		return
	}
	np, err := s.start()
	if err != nil {
		fmt.Fprintf(s.log, "fresh producer for a new route: %v\n", err)
		s.renewed = time.Now()
		return
	}
	old := s.p
	s.p, s.gen, s.renewed = np, s.gen+1, time.Now()
	var t *time.Timer
	t = time.AfterFunc(s.grace, func() {
		s.mu.Lock()
		_, mine := s.retired[t]
		delete(s.retired, t)
		s.mu.Unlock()
		if mine {
			_ = old.Shutdown()
		}
	})
	s.retired[t] = old
}

// producers returns the current producer and every replaced one not shut down yet, taking them
// over (their timers are stopped): for the shutdown at the end of the run.
func (s *producerSlot) producers() []rocketmq.Producer {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []rocketmq.Producer{s.p}
	for t, p := range s.retired {
		t.Stop()
		out = append(out, p)
		delete(s.retired, t)
	}
	return out
}
