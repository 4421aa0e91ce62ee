package admin

// Topic message types (the topic attribute message.type, RocketMQ 5.x) as mqadmin shows them:
// GET_TOPIC_CONFIG (351, header topic) to a master of the topic's route. topicStatus prints the
// type under its table (and in each JSON row), topicList -c in a column; a broker that does not
// serve the request or a topic without the attribute shows nothing in topicStatus and "-" in
// topicList.

import (
	"context"
	"fmt"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// TopicConfigAt returns the topic's config as the broker at addr holds it.
func (t *Tool) TopicConfigAt(ctx context.Context, addr, topic string) (*protocol.TopicConfig, error) {
	resp, err := t.call(ctx, addr, remoting.GetTopicConfig, map[string]string{"topic": topic}, nil)
	if err != nil {
		return nil, fmt.Errorf("get config of topic %s: %w", topic, err)
	}
	var tc protocol.TopicConfig
	if err := protocol.Decode(resp.Body, &tc); err != nil {
		return nil, fmt.Errorf("decode config of topic %s from %s: %w", topic, addr, err)
	}
	return &tc, nil
}

// topicMessageType is the message.type of topic at the first master that answers ("" when
// none does or the topic has no such attribute).
func (t *Tool) topicMessageType(ctx context.Context, masters []BrokerAddr, topic string) string {
	for _, m := range masters {
		if tc, err := t.TopicConfigAt(ctx, m.Addr, topic); err == nil {
			return tc.TopicMessageType()
		}
	}
	return ""
}
