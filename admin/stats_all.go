package admin

// statsAll, as Java's StatsAllSubCommand: for every topic (retry and dead-letter topics
// skipped), its messages in per second over the last minute and in the last 24 hours, summed
// over the masters of its route (VIEW_BROKER_STATS_DATA, 315, TOPIC_PUT_NUMS), and per consumer
// group of the topic (QUERY_TOPIC_CONSUME_BY_WHO, 300) the same for consumption (GROUP_GET_NUMS,
// key topic@group) with the group's accumulation (GET_CONSUME_STATS diff). Our brokers count
// the 24 hours from when their sampler started when that is less (broker/statsdata.go). A
// broker that does not answer contributes nothing, as in Java.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// TopicTraffic is one row of statsAll: a topic, and one of its consumer groups ("" when none).
type TopicTraffic struct {
	Topic         string  `json:"topic"`
	ConsumerGroup string  `json:"consumerGroup"`
	Accumulation  int64   `json:"accumulation"`
	InTPS         float64 `json:"inTps"`
	OutTPS        float64 `json:"outTps"`
	InMsg24Hour   int64   `json:"inMsg24Hour"`
	OutMsg24Hour  int64   `json:"outMsg24Hour"`
}

// StatsAll returns the rows for every topic, or for topic only; active keeps the rows with
// traffic in the last 24 hours.
func (t *Tool) StatsAll(ctx context.Context, topic string, active bool) ([]TopicTraffic, error) {
	topics := []string{topic}
	if topic == "" {
		all, err := t.TopicList(ctx)
		if err != nil {
			return nil, err
		}
		topics = all
	}
	out := []TopicTraffic{}
	for _, tp := range topics {
		if strings.HasPrefix(tp, message.RetryTopicPrefix) || strings.HasPrefix(tp, "%DLQ%") {
			continue
		}
		rows, err := t.topicTraffic(ctx, tp)
		if err != nil {
			if topic != "" {
				return nil, err
			}
			continue // as Java: a topic whose route fails is left out
		}
		for _, r := range rows {
			if !active || r.InMsg24Hour > 0 || r.OutMsg24Hour > 0 {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// topicTraffic is one topic's rows.
func (t *Tool) topicTraffic(ctx context.Context, topic string) ([]TopicTraffic, error) {
	rd, err := t.TopicRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	masters := RouteMasters(rd)
	in := TopicTraffic{Topic: topic}
	in.InTPS, in.InMsg24Hour = t.statsSum(ctx, masters, protocol.StatsTopicPutNums, topic)
	groups := t.consumingGroups(ctx, masters, topic)
	if len(groups) == 0 {
		return []TopicTraffic{in}, nil
	}
	var rows []TopicTraffic
	for _, g := range groups {
		r := in
		r.ConsumerGroup = g
		r.OutTPS, r.OutMsg24Hour = t.statsSum(ctx, masters, protocol.StatsGroupGetNums, protocol.OffsetKey(topic, g))
		for _, rep := range t.callBrokers(ctx, masters, remoting.GetConsumeStats, map[string]string{"consumerGroup": g, "topic": topic}, nil) {
			var cs protocol.ConsumeStats
			if rep.Err == nil && protocol.Decode(rep.Resp.Body, &cs) == nil {
				for _, o := range cs.OffsetTable {
					r.Accumulation += max(0, o.BrokerOffset-max(o.ConsumerOffset, 0))
				}
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// statsSum adds one stats key's minute rate and 24-hour count over the masters (Java's
// compute24HourSum: the day's sum, else the hour's, else the minute's).
func (t *Tool) statsSum(ctx context.Context, masters []BrokerAddr, name, key string) (tps float64, day int64) {
	for _, r := range t.callBrokers(ctx, masters, remoting.ViewBrokerStatsData, map[string]string{"statsName": name, "statsKey": key}, nil) {
		var d protocol.BrokerStatsData
		if r.Err != nil || protocol.Decode(r.Resp.Body, &d) != nil {
			continue
		}
		tps += d.StatsMinute.Tps
		switch {
		case d.StatsDay.Sum != 0:
			day += d.StatsDay.Sum
		case d.StatsHour.Sum != 0:
			day += d.StatsHour.Sum
		default:
			day += d.StatsMinute.Sum
		}
	}
	return tps, day
}

var statsAllCommand = &command{
	name:    "statsAll",
	summary: "Show each topic's and consumer group's messages per second and in the last 24 hours",
	args:    "[-t <topic>] [-a]",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var topic string
		var active bool
		fs.StringVarP(&topic, "topic", "t", "", "only this topic")
		fs.BoolVarP(&active, "activeTopic", "a", false, "only the topics with traffic in the last 24 hours")
		return func(ctx context.Context, t *Tool) error {
			rows, err := t.StatsAll(ctx, topic, active)
			if err != nil {
				return err
			}
			if t.jsonOut() {
				return t.printJSON(rows)
			}
			tb := newTable("#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour")
			for _, r := range rows {
				if r.ConsumerGroup == "" {
					tb.add(r.Topic, "", 0, fmt.Sprintf("%.2f", r.InTPS), "", r.InMsg24Hour, "NO_CONSUMER")
					continue
				}
				tb.add(r.Topic, r.ConsumerGroup, r.Accumulation, fmt.Sprintf("%.2f", r.InTPS), fmt.Sprintf("%.2f", r.OutTPS), r.InMsg24Hour, r.OutMsg24Hour)
			}
			return tb.write(t.cfg.Out)
		}
	},
}

// consumingGroups is QUERY_TOPIC_CONSUME_BY_WHO (300) of topic on every master, merged and sorted.
func (t *Tool) consumingGroups(ctx context.Context, masters []BrokerAddr, topic string) []string {
	groups := map[string]bool{}
	for _, r := range t.callBrokers(ctx, masters, remoting.QueryTopicConsumeByWho, map[string]string{"topic": topic}, nil) {
		var gl struct {
			GroupList []string `json:"groupList"`
		}
		if r.Err == nil && protocol.Decode(r.Resp.Body, &gl) == nil {
			for _, g := range gl.GroupList {
				groups[g] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(groups))
}
