package integration

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// failoverWatch samples, while a chaos test kills leaders, what clients see of a DLedger group:
// the topic's route at the name server (does it name a master, so a client that refreshes its
// route now can send?) and the consumer group's committed offsets on the registered master (do
// they ever go backwards across a failover?).
type failoverWatch struct {
	t            testing.TB
	g            *raftGroup
	topic, group string
	queues       int

	stop chan struct{}
	wg   sync.WaitGroup

	mu              sync.Mutex
	routePolls      int
	routeNoMaster   int           // polls whose route had no brokerId 0 for the group
	longestNoMaster time.Duration // longest run of such polls
	noMasterSince   time.Time
	samples         map[int][]offsetSample // queue -> committed offsets in time order
	kills           []time.Time
}

// offsetSample is one committed offset read from the registered master.
type offsetSample struct {
	at  time.Time
	off int64
}

// Polling periods: routes as often as a client could refresh, offsets well under the client's
// 5 s commit period.
const (
	watchRoutePeriod  = 10 * time.Millisecond
	watchOffsetPeriod = 100 * time.Millisecond
)

func startFailoverWatch(t testing.TB, g *raftGroup, topic, group string, queues int) *failoverWatch {
	w := &failoverWatch{t: t, g: g, topic: topic, group: group, queues: queues,
		stop: make(chan struct{}), samples: map[int][]offsetSample{}}
	w.wg.Add(2)
	go w.every(watchRoutePeriod, w.pollRoute)
	go w.every(watchOffsetPeriod, w.pollOffsets)
	t.Cleanup(w.close)
	return w
}

func (w *failoverWatch) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	waitGroup(w.t, &w.wg, 10*time.Second, "failover watch stops")
}

// killed records the time of a leader kill, for judging offset rollbacks.
func (w *failoverWatch) killed(at time.Time) {
	w.mu.Lock()
	w.kills = append(w.kills, at)
	w.mu.Unlock()
}

// every runs poll each period until the watch stops.
func (w *failoverWatch) every(period time.Duration, poll func()) {
	defer w.wg.Done()
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
			poll()
		}
	}
}

// pollRoute records whether the topic's route names a master for the group.
func (w *failoverWatch) pollRoute() {
	addrs, err := routeAddrs(w.g.ns.addr, w.topic)
	if err != nil {
		return // the name server is not under test here
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.routePolls++
	if addrs[0] == "" {
		w.routeNoMaster++
		if w.noMasterSince.IsZero() {
			w.noMasterSince = now
		}
		w.longestNoMaster = max(w.longestNoMaster, now.Sub(w.noMasterSince))
	} else {
		w.noMasterSince = time.Time{}
	}
}

// pollOffsets samples the group's committed offset of every queue on the registered master.
func (w *failoverWatch) pollOffsets() {
	addrs, err := registeredAddrs(w.g.ns.addr, w.g.name)
	if err != nil || addrs[0] == "" {
		return
	}
	for q := range w.queues {
		// The time the question was asked: a leader killed after that may still have answered.
		asked := time.Now()
		off, found, err := consumerOffset(addrs[0], w.group, w.topic, q)
		if err != nil || !found {
			continue
		}
		w.mu.Lock()
		w.samples[q] = append(w.samples[q], offsetSample{asked, off})
		w.mu.Unlock()
	}
}

// offsetReport is what the offset samples show.
type offsetReport struct {
	samples     int
	maxRollback int64    // largest drop of a queue's committed offset below an earlier reading
	rollbacks   int      // readings below an earlier one
	violations  []string // drops of a value the leader had shown for replicationGrace before a kill
}

// replicationGrace bounds how long a committed offset the leader shows may stay unreplicated:
// the offset batcher proposes every 100 ms, so a value shown this long before a kill must
// survive it.
const replicationGrace = time.Second

// offsets analyses the samples. A value shown by the master may be lost only if the master died
// within replicationGrace after showing it (it was acknowledged but not yet replicated, as
// RocketMQ acknowledges offset commits before persisting them); any other drop is a violation.
func (w *failoverWatch) offsets() offsetReport {
	w.mu.Lock()
	defer w.mu.Unlock()
	var r offsetReport
	for q, ss := range w.samples {
		r.samples += len(ss)
		for j, s := range ss {
			dropped, violated := false, false
			for _, e := range ss[:j] {
				if e.off <= s.off {
					continue
				}
				dropped = true
				r.maxRollback = max(r.maxRollback, e.off-s.off)
				if !violated && !w.killedWithin(e.at, s.at) {
					violated = true
					r.violations = append(r.violations, fmt.Sprintf("queue %d: %d shown at %s, %d at %s",
						q, e.off, e.at.Format("15:04:05.000"), s.off, s.at.Format("15:04:05.000")))
				}
			}
			if dropped {
				r.rollbacks++
			}
		}
	}
	return r
}

// killedWithin reports whether a kill happened after shown but within replicationGrace of it, and
// before seen.
func (w *failoverWatch) killedWithin(shown, seen time.Time) bool {
	return slices.ContainsFunc(w.kills, func(k time.Time) bool {
		return !k.Before(shown) && k.Sub(shown) < replicationGrace && k.Before(seen)
	})
}

// routeReport returns the route polls, those without a master, and the longest such run.
func (w *failoverWatch) routeReport() (polls, noMaster int, longest time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.routePolls, w.routeNoMaster, w.longestNoMaster
}
