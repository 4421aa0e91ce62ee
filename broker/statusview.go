package broker

// The parts of /status an operator reads to see what the broker is doing now (statusrates.go
// keeps the samples): rates overall and per topic, each consumer group's online clients,
// consume rate and lag in time, the connected clients, and on a Raft leader each follower's
// match index and lag. Every list is bounded like the lists of statuspage.go.

import (
	"time"

	"rocketraft/protocol"
	"rocketraft/storage"
)

// Bounds of the work /status does for the figures below.
const (
	statusMaxClients = 500
	// statusMaxTimeReads bounds the store reads of one /status for the groups' time lag (one
	// read per queue that is behind).
	statusMaxTimeReads = 256
)

// rateCounters reads the totals statusRates samples: the put and get counters kept for
// GET_BROKER_RUNTIME_INFO (stats.go) and the committed offsets.
func (s *statusPages) rateCounters() rateCounters {
	c := rateCounters{Put: s.stats.putTotal.Load(), Get: s.stats.getTotal.Load(),
		Topics: map[string][2]int64{}, Groups: map[string]int64{}}
	s.stats.topics.Range(func(k, v any) bool {
		in, out := v.(*topicMetrics).totals()
		c.Topics[k.(string)] = [2]int64{in, out}
		return len(c.Topics) < rateMaxKeys
	})
	for k, qs := range s.offsets.Wrapper().OffsetTable {
		if len(c.Groups) == rateMaxKeys {
			break
		}
		var sum int64
		for _, off := range qs {
			sum += max(off, 0)
		}
		c.Groups[k] = sum
	}
	return c
}

// StatusClient is one client connection as the broker's client table has it.
type StatusClient struct {
	Kind     string `json:"kind"` // producer or consumer
	Group    string `json:"group"`
	ClientID string `json:"clientId"`
	Addr     string `json:"addr"`
	Language string `json:"language"`
	Version  int32  `json:"version"`
}

// statusClients lists the connected producers and consumers, group by group, at most
// statusMaxClients; the second result counts each consumer group's online clients.
func (s *statusPages) statusClients() ([]StatusClient, map[string]int) {
	out, online := []StatusClient{}, map[string]int{}
	add := func(kind, group string, conns []protocol.Connection) {
		for _, c := range conns {
			if len(out) < statusMaxClients {
				out = append(out, StatusClient{Kind: kind, Group: group, ClientID: c.ClientID, Addr: c.ClientAddr, Language: c.Language, Version: c.Version})
			}
		}
	}
	for _, g := range s.clients.ProducerGroups() {
		add("producer", g, s.clients.ProducerConnections(g))
	}
	for _, g := range s.clients.ConsumerGroups() {
		if info, ok := s.clients.ConsumerGroup(g); ok {
			online[g] = len(info.Connections)
			add("consumer", g, info.ConsumerConnection().ConnectionSet)
		}
	}
	return out, online
}

// addGroupFigures fills each group's online clients, consume rate and time lag: the age of its
// oldest unconsumed message, the store time of the message at the committed offset of each
// queue that is behind (at most statusMaxTimeReads reads in all; a group left without a read
// has LagTimeMs -1).
func addGroupFigures(gs []StatusGroup, online map[string]int, rates map[string]float64, storeTime func(topic string, q int32, off int64) int64, now time.Time) {
	reads := 0
	for i := range gs {
		g := &gs[i]
		g.Online = online[g.Group]
		g.ConsumePerSec = rates[protocol.OffsetKey(g.Topic, g.Group)]
		for _, q := range g.Queues {
			if q.Lag <= 0 {
				continue
			}
			if reads == statusMaxTimeReads {
				g.LagTimeMs = -1
				break
			}
			reads++
			if ts := storeTime(g.Topic, q.QueueID, max(q.ConsumerOffset, 0)); ts > 0 {
				if oldest := now.UnixMilli() - ts; oldest > g.LagTimeMs {
					g.LagTimeMs, g.OldestUnconsumed = oldest, ts
				}
			}
		}
	}
}

// storeTimeAt is the store time of the message at offset of a queue (the first one after it
// when it was cleaned up), 0 when there is none.
func storeTimeAt(st *storage.Store) func(topic string, q int32, off int64) int64 {
	return func(topic string, q int32, off int64) int64 {
		return lastStoreTime(st, topic, q, max(off, st.MinOffset(topic, q))+1)
	}
}

// addLiveFigures adds the rates, uptime, clients and followers to a /status record whose
// topics and consumerGroups addStatusLists filled.
func (s *statusPages) addLiveFigures(status map[string]any, rates *statusRates) {
	now := time.Now()
	status["startedAt"] = s.stats.started.UnixMilli()
	status["uptimeMs"] = now.Sub(s.stats.started).Milliseconds()
	clients, online := s.statusClients()
	status["clients"] = clients
	if rp, err := s.place.raft(); err == nil {
		if fs := rp.node.Followers(); fs != nil {
			status["followers"] = fs // the leader's view (dledger/followers.go)
		}
	}
	if rates == nil {
		return
	}
	status["rates"] = rates.status()
	if ts, ok := status["topics"].([]StatusTopic); ok {
		tr := rates.topicRates()
		for i := range ts {
			r := tr[ts[i].Topic]
			ts[i].InPerSec, ts[i].OutPerSec = r[0], r[1]
		}
	}
	if gs, ok := status["consumerGroups"].([]StatusGroup); ok {
		st, release, err := s.place.acquire()
		if err != nil {
			return
		}
		defer release()
		addGroupFigures(gs, online, rates.groupRates(), storeTimeAt(st), now)
	}
}
