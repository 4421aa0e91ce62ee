package admin

// A consumer group's lag in time: per queue that is behind, the age of its oldest unconsumed
// message, the one at the committed offset (or the first one after it when that was cleaned
// up), read with one PULL_MESSAGE that commits nothing (pullOnce). At most maxLagTimeReads
// queues are read per command; the others show an unknown lag time.

import (
	"context"
	"time"

	"rocketraft/protocol"
)

// maxLagTimeReads bounds the reads of one consumerProgress.
const maxLagTimeReads = 64

// addLagTimes fills LagTimeMs of res's queues and its maximum over the queues it could read
// (0: not behind, -1: behind but no queue could be read).
func (t *Tool) addLagTimes(ctx context.Context, res *ConsumerProgress, now time.Time) {
	routes := map[string]*protocol.TopicRouteData{}
	reads, behind, measured := 0, false, false
	defer func() {
		if behind && !measured {
			res.LagTimeMs = -1
		}
	}()
	for i := range res.Queues {
		q := &res.Queues[i]
		if q.Diff <= 0 {
			continue
		}
		q.LagTimeMs, behind = -1, true
		if reads == maxLagTimeReads {
			continue
		}
		reads++
		rd, ok := routes[q.Topic]
		if !ok {
			rd, _ = t.TopicRoute(ctx, q.Topic)
			routes[q.Topic] = rd
		}
		if rd == nil {
			continue
		}
		addr, err := routeReadAddr(rd, q.BrokerName)
		if err != nil {
			continue
		}
		msgs, _, err := t.pullOnce(ctx, addr, q.Topic, q.QueueID, max(q.ConsumerOffset, 0), 1)
		if err != nil || len(msgs) == 0 {
			continue
		}
		q.LagTimeMs, measured = max(0, now.UnixMilli()-msgs[0].StoreTimestamp), true
		res.LagTimeMs = max(res.LagTimeMs, q.LagTimeMs)
	}
}

// lagTime renders a lag time: "0" when not behind, "unknown", or a duration to the second
// (to the millisecond below a second).
func lagTime(ms int64) string {
	switch {
	case ms < 0:
		return "unknown"
	case ms == 0:
		return "0"
	case ms < 1000:
		return (time.Duration(ms) * time.Millisecond).String()
	}
	return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
}
