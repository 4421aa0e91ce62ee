package admin

// deleteTopic: DELETE_TOPIC_IN_BROKER (215, header topic) to every member of the cluster, masters
// and slaves, then DELETE_TOPIC_IN_NAMESRV (216, header topic and clusterName) to every name
// server, as Java's DeleteTopicSubCommand. If any broker fails the name servers are left alone:
// the brokers that still have the topic would register it again anyway.

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"rocketraft/remoting"
)

// DeleteTopicResult is what DeleteTopic did.
type DeleteTopicResult struct {
	Topic       string        `json:"topic"`
	Cluster     string        `json:"cluster"`
	Brokers     []TopicResult `json:"brokers"`
	NameServers bool          `json:"nameServersUpdated"`
}

// DeleteTopic removes topic from every broker of cluster and then from every name server.
func (t *Tool) DeleteTopic(ctx context.Context, topic, cluster string) (*DeleteTopicResult, error) {
	ci, err := t.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	brokers, err := ClusterBrokers(ci, cluster, false)
	if err != nil {
		return nil, err
	}
	res := &DeleteTopicResult{Topic: topic, Cluster: cluster}
	replies := t.callBrokers(ctx, brokers, remoting.DeleteTopicInBroker, map[string]string{"topic": topic}, nil)
	for _, r := range replies {
		tr := TopicResult{BrokerName: r.Broker.BrokerName, Addr: r.Broker.Addr, Success: r.Err == nil}
		if r.Err != nil {
			tr.Error = r.Err.Error()
		}
		res.Brokers = append(res.Brokers, tr)
	}
	if err := replyErrors(replies); err != nil {
		return res, fmt.Errorf("delete topic %s in brokers (name servers not changed): %w", topic, err)
	}
	if err := t.eachNamesrv(ctx, remoting.DeleteTopicInNamesrv, map[string]string{"topic": topic, "clusterName": cluster}); err != nil {
		return res, fmt.Errorf("delete topic %s in name servers: %w", topic, err)
	}
	res.NameServers = true
	return res, nil
}

var deleteTopicCommand = &command{
	name:    "deleteTopic",
	summary: "Delete a topic from every broker of a cluster and from the name servers",
	args:    "-t <topic> -c <cluster>",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var topic, cluster string
		fs.StringVarP(&topic, "topic", "t", "", "topic name")
		fs.StringVarP(&cluster, "clusterName", "c", "", "cluster to delete the topic from")
		return func(ctx context.Context, t *Tool) error {
			if err := required(fs, "topic", "clusterName"); err != nil {
				return err
			}
			res, err := t.DeleteTopic(ctx, topic, cluster)
			if res == nil {
				return err
			}
			if t.jsonOut() {
				if perr := t.printJSON(res); perr != nil {
					return perr
				}
				return err
			}
			if err != nil {
				for _, b := range res.Brokers {
					if b.Success {
						t.printf("delete topic [%s] from broker %s success.\n", topic, b.Addr)
					}
				}
				return err
			}
			t.printf("delete topic [%s] from cluster [%s] success.\n", topic, cluster)
			t.printf("delete topic [%s] from NameServer success.\n", topic)
			return nil
		}
	},
}
