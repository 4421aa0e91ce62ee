package broker

// VIEW_BROKER_STATS_DATA (315), what mqadmin statsAll reads: a topic's stored messages
// (TOPIC_PUT_NUMS, key topic) or a consumer group's consumption of a topic (GROUP_GET_NUMS, key
// topic@group) over the last minute, hour and day. The figures come from the status sampler
// (statusrates.go): the minute is its last minute; the hour and the day are what it counted
// since it started, when that is less (the sampler keeps no longer history). A group's
// consumption is how far its committed offsets advanced, so messages consumed but not yet
// committed are not counted yet, and a group that first commits while the sampler runs is
// counted from offset 0 (a group that started at the queues' end counts what it skipped).

import (
	"fmt"
	"time"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// handleViewStatsData serves VIEW_BROKER_STATS_DATA from the status sampler's figures.
func (h *runtimeHandlers) handleViewStatsData(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	name, key := req.Ext("statsName"), req.Ext("statsKey")
	rates := h.rates.Load()
	var group bool
	switch name {
	case protocol.StatsTopicPutNums:
	case protocol.StatsGroupGetNums:
		if _, _, ok := protocol.SplitOffsetKey(key); !ok {
			return req.NewResponse(remoting.SystemError, fmt.Sprintf("statsKey %q of %s is not topic@group", key, name))
		}
		group = true
	default:
		return req.NewResponse(remoting.SystemError, fmt.Sprintf("the stats <%s> <%s> not exist: this broker keeps %s and %s",
			name, key, protocol.StatsTopicPutNums, protocol.StatsGroupGetNums))
	}
	if rates == nil {
		return req.NewResponse(remoting.SystemError, "the stats are not sampled yet")
	}
	ks, ok := rates.keyed(key, group, false)
	if !ok {
		return req.NewResponse(remoting.SystemError, fmt.Sprintf("the stats <%s> <%s> not exist", name, key))
	}
	return jsonResponse(req, statsData(ks, time.Now()))
}

// statsData turns one key's figures into the three windows; the hour and the day count what
// was sampled within them (all of it since the sampler started, when that is shorter).
func statsData(ks keyStats, now time.Time) protocol.BrokerStatsData {
	d := protocol.BrokerStatsData{StatsMinute: protocol.BrokerStatsItem{Sum: ks.MinuteSum, Tps: ks.MinuteTps}}
	span := now.Sub(ks.SampledFrom)
	for _, w := range []struct {
		item   *protocol.BrokerStatsItem
		window time.Duration
	}{{&d.StatsHour, time.Hour}, {&d.StatsDay, 24 * time.Hour}} {
		w.item.Sum = max(ks.SinceStart, ks.MinuteSum)
		if secs := min(span, w.window).Seconds(); secs > 0 {
			w.item.Tps = float64(w.item.Sum) / secs
		}
	}
	return d
}
