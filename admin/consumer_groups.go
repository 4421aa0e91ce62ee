package admin

// consumerProgress without -g: like Java, the groups are those with a retry topic
// (%RETRY%<group>) in the name server's topic list. Each gets its consume TPS and diff total
// (ConsumerProgress) and its online members from GET_CONSUMER_CONNECTION_LIST (203) on the first
// master of its retry topic's route that answers. A group whose figures cannot be had is still
// listed, with blanks.

import (
	"context"
	"fmt"
	"strings"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// GroupSummary is one consumer group's overview.
type GroupSummary struct {
	Group string `json:"group"`
	// Count is the number of online consumers; Type and Model come from them ("" when none).
	Count      int     `json:"count"`
	Type       string  `json:"consumeType,omitempty"`
	Model      string  `json:"messageModel,omitempty"`
	ConsumeTps float64 `json:"consumeTps"`
	DiffTotal  int64   `json:"diffTotal"`
	// LagTimeMs: the age of the group's oldest unconsumed message (0: none, -1: unknown).
	LagTimeMs int64 `json:"lagTimeMs"`
	// Error says why the offsets could not be read; ConsumeTps and DiffTotal are then 0.
	Error string `json:"error,omitempty"`
}

// ConsumerGroups summarizes every consumer group that has a retry topic, sorted by name.
func (t *Tool) ConsumerGroups(ctx context.Context) ([]GroupSummary, error) {
	topics, err := t.TopicList(ctx)
	if err != nil {
		return nil, err
	}
	out := []GroupSummary{}
	for _, topic := range topics {
		group, ok := strings.CutPrefix(topic, message.RetryTopicPrefix)
		if !ok || group == "" {
			continue
		}
		s := GroupSummary{Group: group}
		if p, err := t.ConsumerProgress(ctx, group, ""); err != nil {
			s.Error = err.Error()
		} else {
			s.ConsumeTps, s.DiffTotal, s.LagTimeMs = p.ConsumeTps, p.DiffTotal, p.LagTimeMs
		}
		if cc := t.consumerConnection(ctx, group); cc != nil {
			s.Count, s.Type, s.Model = len(cc.ConnectionSet), consumeTypeName(cc.ConsumeType), cc.MessageModel
		}
		out = append(out, s)
	}
	return out, nil
}

// consumerConnection asks the masters of the group's retry route in turn; nil when none answers.
func (t *Tool) consumerConnection(ctx context.Context, group string) *protocol.ConsumerConnection {
	rd, err := t.TopicRoute(ctx, message.RetryTopicPrefix+group)
	if err != nil {
		return nil
	}
	for _, m := range RouteMasters(rd) {
		resp, err := t.call(ctx, m.Addr, remoting.GetConsumerConnectionList, map[string]string{"consumerGroup": group}, nil)
		if err != nil {
			continue
		}
		var cc protocol.ConsumerConnection
		if protocol.Decode(resp.Body, &cc) == nil {
			return &cc
		}
	}
	return nil
}

// consumeTypeName renders a consume type as Java's group list does.
func consumeTypeName(ct string) string {
	switch ct {
	case protocol.ConsumeActively:
		return "PULL"
	case protocol.ConsumePassively:
		return "PUSH"
	case protocol.ConsumePop:
		return "POP"
	}
	return ct
}

func (t *Tool) printConsumerGroups(ctx context.Context) error {
	groups, err := t.ConsumerGroups(ctx)
	if err != nil {
		return err
	}
	if t.jsonOut() {
		return t.printJSON(groups)
	}
	tb := newTable("#Group", "#Count", "#Type", "#Model", "#TPS", "#Diff Total", "#Lag Time")
	for _, g := range groups {
		diff, lag := fmt.Sprint(g.DiffTotal), lagTime(g.LagTimeMs)
		if g.Error != "" {
			diff, lag = "-", "-"
		}
		tb.add(g.Group, g.Count, g.Type, g.Model, fmt.Sprintf("%.2f", g.ConsumeTps), diff, lag)
	}
	return tb.write(t.cfg.Out)
}
