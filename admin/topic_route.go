package admin

// topicRoute: GET_ROUTEINFO_BY_TOPIC (105). JSON output is the route data itself, indented (what
// Java's TopicRouteSubCommand prints); the table has one row per broker address with the queue
// data of its broker name.

import (
	"context"

	"github.com/spf13/pflag"

	"rocketraft/protocol"
)

var topicRouteCommand = &command{
	name:    "topicRoute",
	summary: "Show a topic's route: brokers and queues",
	args:    "-t <topic>",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var topic string
		fs.StringVarP(&topic, "topic", "t", "", "topic name")
		return func(ctx context.Context, t *Tool) error {
			if err := required(fs, "topic"); err != nil {
				return err
			}
			rd, err := t.TopicRoute(ctx, topic)
			if err != nil {
				return err
			}
			if t.jsonOut() {
				return t.printJSON(rd)
			}
			return t.printRouteTable(rd)
		}
	},
}

func (t *Tool) printRouteTable(rd *protocol.TopicRouteData) error {
	queues := map[string]*protocol.QueueData{}
	for _, q := range rd.QueueDatas {
		queues[q.BrokerName] = q
	}
	tb := newTable("#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Read Queues", "#Write Queues", "#Perm")
	seen := map[string]bool{}
	for _, bd := range rd.BrokerDatas {
		seen[bd.BrokerName] = true
		read, write, perm := "-", "-", "-"
		if q := queues[bd.BrokerName]; q != nil {
			read, write, perm = itoa32(q.ReadQueueNums), itoa32(q.WriteQueueNums), protocol.PermString(q.Perm)
		}
		ms := members(bd, false)
		if len(ms) == 0 {
			tb.add(bd.Cluster, bd.BrokerName, "-", "-", read, write, perm)
		}
		for _, m := range ms {
			tb.add(bd.Cluster, bd.BrokerName, m.ID, m.Addr, read, write, perm)
		}
	}
	// Queue data of a broker name with no live broker.
	for _, q := range rd.QueueDatas {
		if !seen[q.BrokerName] {
			tb.add("-", q.BrokerName, "-", "-", q.ReadQueueNums, q.WriteQueueNums, protocol.PermString(q.Perm))
		}
	}
	if err := tb.write(t.cfg.Out); err != nil {
		return err
	}
	if rd.OrderTopicConf != "" {
		t.printf("\nOrder topic conf: %s\n", rd.OrderTopicConf)
	}
	return nil
}
