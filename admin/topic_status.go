package admin

// topicStatus: the topic's route, then GET_TOPIC_STATS_INFO (202, header topic) to the master of
// each broker name; rows sorted by broker name and queue id, as Java's TopicStatusSubCommand.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/spf13/pflag"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// QueueStatus is one queue's offsets.
type QueueStatus struct {
	BrokerName          string `json:"brokerName"`
	QueueID             int32  `json:"queueId"`
	MinOffset           int64  `json:"minOffset"`
	MaxOffset           int64  `json:"maxOffset"`
	LastUpdateTimestamp int64  `json:"lastUpdateTimestamp"`
	// MessageType is the topic's message.type attribute, when it has one (topic_type.go).
	MessageType string `json:"messageType,omitempty"`
}

// TopicStatus returns every queue of topic with its offsets, from each master of its route.
func (t *Tool) TopicStatus(ctx context.Context, topic string) ([]QueueStatus, error) {
	rd, err := t.TopicRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	masters := RouteMasters(rd)
	if len(masters) == 0 {
		return nil, fmt.Errorf("%w in the route of topic %s", ErrNoMaster, topic)
	}
	replies := t.callBrokers(ctx, masters, remoting.GetTopicStatsInfo, map[string]string{"topic": topic}, nil)
	if err := replyErrors(replies); err != nil {
		return nil, fmt.Errorf("get stats of topic %s: %w", topic, err)
	}
	var out []QueueStatus
	for _, r := range replies {
		var st protocol.TopicStatsTable
		if err := protocol.Decode(r.Resp.Body, &st); err != nil {
			return nil, fmt.Errorf("decode topic stats from %s: %w", r.Broker.Addr, err)
		}
		for mq, o := range st.OffsetTable {
			out = append(out, QueueStatus{BrokerName: mq.BrokerName, QueueID: mq.QueueID, MinOffset: o.MinOffset,
				MaxOffset: o.MaxOffset, LastUpdateTimestamp: o.LastUpdateTimestamp})
		}
	}
	slices.SortFunc(out, func(a, b QueueStatus) int {
		return cmp.Or(cmp.Compare(a.BrokerName, b.BrokerName), cmp.Compare(a.QueueID, b.QueueID))
	})
	if mt := t.topicMessageType(ctx, masters, topic); mt != "" {
		for i := range out {
			out[i].MessageType = mt
		}
	}
	return out, nil
}

func itoa32(n int32) string { return strconv.Itoa(int(n)) }

var topicStatusCommand = &command{
	name:    "topicStatus",
	summary: "Show the min and max offset of every queue of a topic",
	args:    "-t <topic>",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var topic string
		fs.StringVarP(&topic, "topic", "t", "", "topic name")
		return func(ctx context.Context, t *Tool) error {
			if err := required(fs, "topic"); err != nil {
				return err
			}
			rows, err := t.TopicStatus(ctx, topic)
			if err != nil {
				return err
			}
			if t.jsonOut() {
				if rows == nil {
					rows = []QueueStatus{}
				}
				return t.printJSON(rows)
			}
			tb := newTable("#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated")
			for _, r := range rows {
				tb.add(r.BrokerName, r.QueueID, r.MinOffset, r.MaxOffset, t.formatMillis(r.LastUpdateTimestamp, ""))
			}
			if err := tb.write(t.cfg.Out); err != nil {
				return err
			}
			if len(rows) > 0 && rows[0].MessageType != "" {
				t.printf("\n#Message Type: %s\n", rows[0].MessageType)
			}
			return nil
		}
	},
}
