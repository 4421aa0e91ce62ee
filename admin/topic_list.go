package admin

// topicList: GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206). With -c, as Java's TopicListSubCommand,
// each topic other than %RETRY%/%DLQ% ones gets its cluster (from its route) and the consumer
// groups a master reports for it (QUERY_TOPIC_CONSUME_BY_WHO, 300), and, ours, its message type
// (topic_type.go); a topic whose lookups fail is listed with blanks.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// TopicList returns every topic the name server knows, sorted.
func (t *Tool) TopicList(ctx context.Context) ([]string, error) {
	resp, err := t.callNamesrv(ctx, remoting.GetAllTopicListFromNameserver, nil)
	if err != nil {
		return nil, fmt.Errorf("get topic list: %w", err)
	}
	var tl protocol.TopicList
	if err := protocol.Decode(resp.Body, &tl); err != nil {
		return nil, fmt.Errorf("decode topic list: %w", err)
	}
	slices.Sort(tl.TopicList)
	return tl.TopicList, nil
}

// TopicUsage is a topic with its cluster, message type (message.type attribute, "" when none)
// and consumer groups.
type TopicUsage struct {
	Cluster     string   `json:"cluster"`
	Topic       string   `json:"topic"`
	MessageType string   `json:"messageType,omitempty"`
	Groups      []string `json:"groups"`
}

// TopicUsages lists the non-system topics with their cluster and consumer groups.
func (t *Tool) TopicUsages(ctx context.Context) ([]TopicUsage, error) {
	topics, err := t.TopicList(ctx)
	if err != nil {
		return nil, err
	}
	var out []TopicUsage
	for _, topic := range topics {
		if strings.HasPrefix(topic, message.RetryTopicPrefix) || strings.HasPrefix(topic, message.DLQTopicPrefix) {
			continue
		}
		u := TopicUsage{Topic: topic, Groups: []string{}}
		if rd, err := t.TopicRoute(ctx, topic); err == nil {
			masters := RouteMasters(rd)
			if len(rd.BrokerDatas) > 0 {
				u.Cluster = rd.BrokerDatas[0].Cluster
			}
			if len(masters) > 0 {
				u.Groups = t.consumedBy(ctx, masters[0].Addr, topic)
			}
			u.MessageType = t.topicMessageType(ctx, masters, topic)
		}
		out = append(out, u)
	}
	return out, nil
}

// consumedBy asks one broker which groups consume topic; failures give no groups.
func (t *Tool) consumedBy(ctx context.Context, addr, topic string) []string {
	resp, err := t.call(ctx, addr, remoting.QueryTopicConsumeByWho, map[string]string{"topic": topic}, nil)
	if err != nil {
		return []string{}
	}
	var gl struct {
		GroupList []string `json:"groupList"`
	}
	if err := protocol.Decode(resp.Body, &gl); err != nil || gl.GroupList == nil {
		return []string{}
	}
	slices.Sort(gl.GroupList)
	return gl.GroupList
}

var topicListCommand = &command{
	name:    "topicList",
	summary: "List the topics known to the name server",
	args:    "[-c]",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var withCluster bool
		fs.BoolVarP(&withCluster, "clusterModel", "c", false, "also show each topic's cluster and consumer groups")
		return func(ctx context.Context, t *Tool) error {
			if !withCluster {
				topics, err := t.TopicList(ctx)
				if err != nil {
					return err
				}
				if t.jsonOut() {
					return t.printJSON(protocol.TopicList{TopicList: topics})
				}
				for _, topic := range topics {
					t.printf("%s\n", topic)
				}
				return nil
			}
			usages, err := t.TopicUsages(ctx)
			if err != nil {
				return err
			}
			if t.jsonOut() {
				if usages == nil {
					usages = []TopicUsage{}
				}
				return t.printJSON(usages)
			}
			tb := newTable("#Cluster Name", "#Topic", "#Message Type", "#Consumer Group")
			for _, u := range usages {
				mt := cmp.Or(u.MessageType, "-")
				if len(u.Groups) == 0 {
					tb.add(u.Cluster, u.Topic, mt, "")
				}
				for _, g := range u.Groups {
					tb.add(u.Cluster, u.Topic, mt, g)
				}
			}
			return tb.write(t.cfg.Out)
		}
	},
}
