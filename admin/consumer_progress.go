package admin

// consumerProgress: GET_CONSUME_STATS (208, header consumerGroup and optional topic) to the
// masters that may hold the group's offsets, merged, as Java's ConsumerProgressSubCommand.
//
// With -t the masters are those of the topic's route. Without it they are every master of the
// clusters that host the group's retry topic %RETRY%<group> (every cluster when that topic has no
// route), asked without a topic so each reports all the group's topics. Diff is broker offset minus
// consumer offset, counting a negative consumer offset (none committed) as 0.
//
// Without -g every group is listed instead (consumer_groups.go).

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/pflag"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// QueueProgress is one queue's consumption by a group.
type QueueProgress struct {
	Topic          string `json:"topic"`
	BrokerName     string `json:"brokerName"`
	QueueID        int32  `json:"queueId"`
	BrokerOffset   int64  `json:"brokerOffset"`
	ConsumerOffset int64  `json:"consumerOffset"`
	Diff           int64  `json:"diff"`
	LastTimestamp  int64  `json:"lastTimestamp"`
	// LagTimeMs is the age of the queue's oldest unconsumed message: 0 when not behind, -1
	// when unknown (consumer_lagtime.go).
	LagTimeMs int64 `json:"lagTimeMs"`
}

// ConsumerProgress is a group's consumption over all its queues.
type ConsumerProgress struct {
	Group      string  `json:"group"`
	ConsumeTps float64 `json:"consumeTps"`
	DiffTotal  int64   `json:"diffTotal"`
	// LagTimeMs is the largest of the queues' lag times: how long the oldest message the group
	// has not consumed has been waiting.
	LagTimeMs int64           `json:"lagTimeMs"`
	Queues    []QueueProgress `json:"queues"`
}

// ConsumerProgress gathers group's consume stats for topic, or for all its topics when topic is "".
func (t *Tool) ConsumerProgress(ctx context.Context, group, topic string) (*ConsumerProgress, error) {
	masters, err := t.progressMasters(ctx, group, topic)
	if err != nil {
		return nil, err
	}
	ext := map[string]string{"consumerGroup": group}
	if topic != "" {
		ext["topic"] = topic
	}
	replies := t.callBrokers(ctx, masters, remoting.GetConsumeStats, ext, nil)
	if err := replyErrors(replies); err != nil {
		return nil, fmt.Errorf("get consume stats of group %s: %w", group, err)
	}
	res := &ConsumerProgress{Group: group, Queues: []QueueProgress{}}
	for _, r := range replies {
		var cs protocol.ConsumeStats
		if err := protocol.Decode(r.Resp.Body, &cs); err != nil {
			return nil, fmt.Errorf("decode consume stats from %s: %w", r.Broker.Addr, err)
		}
		res.ConsumeTps += cs.ConsumeTps
		for mq, o := range cs.OffsetTable {
			q := QueueProgress{Topic: mq.Topic, BrokerName: mq.BrokerName, QueueID: mq.QueueID, BrokerOffset: o.BrokerOffset,
				ConsumerOffset: o.ConsumerOffset, Diff: o.BrokerOffset - max(o.ConsumerOffset, 0), LastTimestamp: o.LastTimestamp}
			res.DiffTotal += q.Diff
			res.Queues = append(res.Queues, q)
		}
	}
	if len(res.Queues) == 0 {
		return nil, fmt.Errorf("%w: no consume stats for group %s: the offset table is empty, maybe it has not consumed any message", ErrNotFound, group)
	}
	slices.SortFunc(res.Queues, func(a, b QueueProgress) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.BrokerName, b.BrokerName), cmp.Compare(a.QueueID, b.QueueID))
	})
	t.addLagTimes(ctx, res, time.Now())
	return res, nil
}

// progressMasters picks the masters to ask for group's stats (see the file comment).
func (t *Tool) progressMasters(ctx context.Context, group, topic string) ([]BrokerAddr, error) {
	if topic != "" {
		rd, err := t.TopicRoute(ctx, topic)
		if err != nil {
			return nil, err
		}
		masters := RouteMasters(rd)
		if len(masters) == 0 {
			return nil, fmt.Errorf("%w in the route of topic %s", ErrNoMaster, topic)
		}
		return masters, nil
	}
	clusters := map[string]bool{}
	rd, err := t.TopicRoute(ctx, message.RetryTopicPrefix+group)
	switch {
	case err == nil:
		for _, bd := range rd.BrokerDatas {
			clusters[bd.Cluster] = true
		}
	case IsCode(err, remoting.TopicNotExist):
		// No retry topic: ask every master.
	default:
		return nil, err
	}
	ci, err := t.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	all, err := ClusterBrokers(ci, "", true)
	if err != nil {
		return nil, err
	}
	var masters []BrokerAddr
	for _, b := range all {
		if len(clusters) == 0 || clusters[b.Cluster] {
			masters = append(masters, b)
		}
	}
	if len(masters) == 0 {
		return nil, fmt.Errorf("%w registered with the name server", ErrNoMaster)
	}
	return masters, nil
}

var consumerProgressCommand = &command{
	name:    "consumerProgress",
	summary: "Show a consumer group's offsets and lag per queue, or list the groups",
	args:    "[-g <group> [-t <topic>]]",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var group, topic string
		fs.StringVarP(&group, "groupName", "g", "", "consumer group (without it: list every group with its lag)")
		fs.StringVarP(&topic, "topicName", "t", "", "only this topic")
		return func(ctx context.Context, t *Tool) error {
			if group == "" {
				if topic != "" {
					return usagef("-t/--topicName needs -g/--groupName")
				}
				return t.printConsumerGroups(ctx)
			}
			res, err := t.ConsumerProgress(ctx, group, topic)
			if err != nil {
				return err
			}
			if t.jsonOut() {
				return t.printJSON(res)
			}
			tb := newTable("#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime", "#Lag Time")
			for _, q := range res.Queues {
				tb.add(q.Topic, q.BrokerName, q.QueueID, q.BrokerOffset, q.ConsumerOffset, q.Diff, t.formatMillis(q.LastTimestamp, "N/A"), lagTime(q.LagTimeMs))
			}
			if err := tb.write(t.cfg.Out); err != nil {
				return err
			}
			t.printf("\nConsume TPS: %.2f\nDiff Total: %d\nLag Time: %s\n", res.ConsumeTps, res.DiffTotal, lagTime(res.LagTimeMs))
			return nil
		}
	},
}
