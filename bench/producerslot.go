package bench

import (
	"io"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
)

// producerSlot holds one of a run's official-client producers and replaces it with a fresh one
// when its route leads to a dead broker. The official client refreshes routes only every 30 s and
// offers no call to refresh one now; a new producer (its own client instance, see instanceName)
// fetches the route from the name server on its first send, which is what an application can do.
// A replaced producer is shut down after grace, when its sends in flight are over.
type producerSlot struct {
	renewable[rocketmq.Producer]
	grace   time.Duration
	retired map[*time.Timer]rocketmq.Producer // guarded by renewable.mu
}

func newProducerSlot(p rocketmq.Producer, start func() (rocketmq.Producer, error), grace time.Duration, log io.Writer) *producerSlot {
	s := &producerSlot{grace: grace, retired: map[*time.Timer]rocketmq.Producer{}}
	s.renewable = renewable[rocketmq.Producer]{v: p, fresh: start, what: "producer", log: log, replaced: s.retire}
	return s
}

// retire schedules old's shutdown; called with s.mu held.
func (s *producerSlot) retire(old rocketmq.Producer) {
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
	out := []rocketmq.Producer{s.v}
	for t, p := range s.retired {
		t.Stop()
		out = append(out, p)
		delete(s.retired, t)
	}
	return out
}
