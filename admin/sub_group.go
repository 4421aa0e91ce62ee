package admin

// updateSubGroup: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200, body SubscriptionGroupConfig) to one
// broker (-b) or every master of a cluster (-c), as Java's UpdateSubGroupSubCommand; flags keep
// Java's letters except -o (consumeMessageOrderly), which is --consumeMessageOrderly here because
// -o selects the output format. Java's spellings still work: "--consumeMessageOrderly true",
// "--consumeMessageOrderly=true", the bare flag, and "-o true"/"-o false" (the output format
// takes only table or json, so a boolean there can only mean the orderly flag). Unset flags take
// Java's defaults (a full config is sent, as Java does).
//
// deleteSubGroup: DELETE_SUBSCRIPTIONGROUP (207, header groupName, cleanOffset) likewise. Java
// with -c also deletes the group's %RETRY% and %DLQ% topics; here that is left to deleteTopic.
//
// consumerConnection: GET_CONSUMER_CONNECTION_LIST (203) to the masters of the group's retry
// topic route (or -b), members merged by client id; each line ends with the brokers the client
// is connected to (ours, after Java's columns). producerConnection: GET_PRODUCER_CONNECTION_LIST
// (204) to the masters of the topic's route. Both print Java's layout.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// GroupResult is one broker's outcome of a subscription group change.
type GroupResult struct {
	BrokerName string `json:"brokerName,omitempty"`
	Addr       string `json:"addr"`
	Success    bool   `json:"success"`
	Error      string `json:"error,omitempty"`
}

// groupTargets sends one request to brokerAddr or every master of cluster.
func (t *Tool) groupTargets(ctx context.Context, cluster, brokerAddr string, code int32, ext map[string]string, body []byte) ([]GroupResult, error) {
	var replies []brokerReply
	if brokerAddr != "" {
		replies = t.callBrokers(ctx, []BrokerAddr{{Addr: brokerAddr}}, code, ext, body)
	} else {
		var err error
		if replies, err = t.callMasters(ctx, cluster, code, ext, body); err != nil {
			return nil, err
		}
	}
	out := make([]GroupResult, 0, len(replies))
	for _, r := range replies {
		gr := GroupResult{BrokerName: r.Broker.BrokerName, Addr: r.Broker.Addr, Success: r.Err == nil}
		if r.Err != nil {
			gr.Error = r.Err.Error()
		}
		out = append(out, gr)
	}
	return out, replyErrors(replies)
}

// UpdateSubGroup creates or replaces gc on brokerAddr or on every master of cluster.
func (t *Tool) UpdateSubGroup(ctx context.Context, gc *protocol.SubscriptionGroupConfig, cluster, brokerAddr string) ([]GroupResult, error) {
	if err := message.ValidateGroup(gc.GroupName); err != nil {
		return nil, usagef("%v", err)
	}
	body, err := protocol.Encode(gc)
	if err != nil {
		return nil, fmt.Errorf("encode subscription group: %w", err)
	}
	return t.groupTargets(ctx, cluster, brokerAddr, remoting.UpdateAndCreateSubscriptionGroup, nil, body)
}

// DeleteSubGroup deletes group on brokerAddr or on every master of cluster; cleanOffset also
// drops its consumer offsets (DLedger brokers always drop them).
func (t *Tool) DeleteSubGroup(ctx context.Context, group, cluster, brokerAddr string, cleanOffset bool) ([]GroupResult, error) {
	if group == "" {
		return nil, usagef("-g/--groupName is required")
	}
	ext := map[string]string{"groupName": group, "cleanOffset": strconv.FormatBool(cleanOffset)}
	return t.groupTargets(ctx, cluster, brokerAddr, remoting.DeleteSubscriptionGroup, ext, nil)
}

// SubscriptionGroupString renders gc as Java's SubscriptionGroupConfig.toString does (4.x).
func SubscriptionGroupString(gc *protocol.SubscriptionGroupConfig) string {
	return fmt.Sprintf("SubscriptionGroupConfig [groupName=%s, consumeEnable=%t, consumeFromMinEnable=%t, consumeBroadcastEnable=%t, retryQueueNums=%d, retryMaxTimes=%d, brokerId=%d, whichBrokerWhenConsumeSlowly=%d, notifyConsumerIdsChangedEnable=%t]",
		gc.GroupName, gc.ConsumeEnable, gc.ConsumeFromMinEnable, gc.ConsumeBroadcastEnable, gc.RetryQueueNums, gc.RetryMaxTimes,
		gc.BrokerID, gc.WhichBrokerWhenConsumeSlowly, gc.NotifyConsumerIdsChangedEnable)
}

func targetFlags(fs *pflag.FlagSet, cluster, broker *string) {
	fs.StringVarP(broker, "brokerAddr", "b", "", "this broker only (host:port)")
	fs.StringVarP(cluster, "clusterName", "c", "", "every master of this cluster")
}

func checkTarget(cluster, broker string) error {
	if (cluster == "") == (broker == "") {
		return usagef("give exactly one of -c/--clusterName and -b/--brokerAddr")
	}
	return nil
}

// orderlyArgs rewrites Java's "--consumeMessageOrderly true" and "-o true|false" into
// "--consumeMessageOrderly=<bool>" for pflag.
func orderlyArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if i+1 < len(args) && (a == "--consumeMessageOrderly" || a == "-o") {
			if v := args[i+1]; v == "true" || v == "false" {
				out = append(out, "--consumeMessageOrderly="+v)
				i++
				continue
			}
		}
		if v, ok := strings.CutPrefix(a, "-o="); ok && (v == "true" || v == "false") {
			out = append(out, "--consumeMessageOrderly="+v)
			continue
		}
		out = append(out, a)
	}
	return out
}

var updateSubGroupCommand = &command{
	rewrite: orderlyArgs,
	name:    "updateSubGroup",
	summary: "Create or update a subscription group on a broker or every master of a cluster",
	args:    "-g <group> (-c <cluster> | -b <brokerAddr>) [-s true] [-m true] [-d true] [-q 1] [-r 16] [-i 0] [-w 1] [-a true] [--consumeMessageOrderly]",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		gc := protocol.NewSubscriptionGroupConfig("")
		var cluster, broker string
		targetFlags(fs, &cluster, &broker)
		fs.StringVarP(&gc.GroupName, "groupName", "g", "", "consumer group name")
		fs.BoolVarP(&gc.ConsumeEnable, "consumeEnable", "s", gc.ConsumeEnable, "the group may consume")
		fs.BoolVarP(&gc.ConsumeFromMinEnable, "consumeFromMinEnable", "m", gc.ConsumeFromMinEnable, "a new group may start from the min offset")
		fs.BoolVarP(&gc.ConsumeBroadcastEnable, "consumeBroadcastEnable", "d", gc.ConsumeBroadcastEnable, "broadcasting consumption allowed")
		fs.Int32VarP(&gc.RetryQueueNums, "retryQueueNums", "q", gc.RetryQueueNums, "queues of %RETRY%<group>")
		fs.Int32VarP(&gc.RetryMaxTimes, "retryMaxTimes", "r", gc.RetryMaxTimes, "redeliveries before the DLQ")
		fs.Int64VarP(&gc.BrokerID, "brokerId", "i", gc.BrokerID, "preferred broker id to consume from")
		fs.Int64VarP(&gc.WhichBrokerWhenConsumeSlowly, "whichBrokerWhenConsumeSlowly", "w", gc.WhichBrokerWhenConsumeSlowly, "broker id when consumption lags")
		fs.BoolVarP(&gc.NotifyConsumerIdsChangedEnable, "notifyConsumerIdsChanged", "a", gc.NotifyConsumerIdsChangedEnable, "notify members when membership changes")
		fs.BoolVar(&gc.ConsumeMessageOrderly, "consumeMessageOrderly", false, "orderly group: FIFO consumers of the 5.x proxy get their messages in order (Java's -o; '-o true' is also read)")
		return func(ctx context.Context, t *Tool) error {
			if err := required(fs, "groupName"); err != nil {
				return err
			}
			if err := checkTarget(cluster, broker); err != nil {
				return err
			}
			if gc.RetryQueueNums < 0 || gc.RetryMaxTimes < -1 {
				return usagef("-q must not be negative and -r not below -1")
			}
			res, err := t.UpdateSubGroup(ctx, gc, cluster, broker)
			if t.jsonOut() && res != nil {
				if perr := t.printJSON(map[string]any{"subscriptionGroupConfig": gc, "brokers": res}); perr != nil {
					return perr
				}
				return err
			}
			for _, r := range res {
				if r.Success {
					t.printf("create subscription group to %s success.\n", r.Addr)
				}
			}
			if len(res) > 0 {
				t.printf("%s\n", SubscriptionGroupString(gc))
			}
			return err
		}
	},
}

var deleteSubGroupCommand = &command{
	name:    "deleteSubGroup",
	summary: "Delete a subscription group from a broker or every master of a cluster",
	args:    "-g <group> (-c <cluster> | -b <brokerAddr>) [-r]",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var cluster, broker, group string
		var clean bool
		targetFlags(fs, &cluster, &broker)
		fs.StringVarP(&group, "groupName", "g", "", "consumer group name")
		fs.BoolVarP(&clean, "removeOffset", "r", false, "also delete the group's consumer offsets")
		return func(ctx context.Context, t *Tool) error {
			if err := required(fs, "groupName"); err != nil {
				return err
			}
			if err := checkTarget(cluster, broker); err != nil {
				return err
			}
			res, err := t.DeleteSubGroup(ctx, group, cluster, broker, clean)
			if t.jsonOut() && res != nil {
				if perr := t.printJSON(res); perr != nil {
					return perr
				}
				return err
			}
			for _, r := range res {
				if !r.Success {
					continue
				}
				if cluster != "" {
					t.printf("delete subscription group [%s] from broker [%s] in cluster [%s] success.\n", group, r.Addr, cluster)
				} else {
					t.printf("delete subscription group [%s] from broker [%s] success.\n", group, r.Addr)
				}
			}
			return err
		}
	},
}

// ConsumerConnection merges GET_CONSUMER_CONNECTION_LIST of group from brokerAddr, or from the
// masters of the group's retry topic route.
// The second result maps each client id to the brokers it is connected to.
func (t *Tool) ConsumerConnection(ctx context.Context, group, brokerAddr string) (*protocol.ConsumerConnection, map[string][]string, error) {
	var targets []BrokerAddr
	if brokerAddr != "" {
		targets = []BrokerAddr{{Addr: brokerAddr}}
	} else {
		rd, err := t.TopicRoute(ctx, message.RetryTopicPrefix+group)
		if err != nil {
			return nil, nil, fmt.Errorf("consumer group %s: %w", group, err)
		}
		targets = RouteMasters(rd)
	}
	merged := &protocol.ConsumerConnection{SubscriptionTable: map[string]protocol.SubscriptionData{}}
	seen, at := map[string]protocol.Connection{}, map[string][]string{}
	var errs []error
	for _, r := range t.callBrokers(ctx, targets, remoting.GetConsumerConnectionList, map[string]string{"consumerGroup": group}, nil) {
		if r.Err != nil {
			errs = append(errs, r.Err)
			continue
		}
		var cc protocol.ConsumerConnection
		if err := protocol.Decode(r.Resp.Body, &cc); err != nil {
			errs = append(errs, fmt.Errorf("decode consumer connections from %s: %w", r.Broker.Addr, err))
			continue
		}
		for _, c := range cc.ConnectionSet {
			seen[c.ClientID] = c
			at[c.ClientID] = append(at[c.ClientID], r.Broker.Addr)
		}
		maps.Copy(merged.SubscriptionTable, cc.SubscriptionTable)
		merged.ConsumeType = cmp.Or(merged.ConsumeType, cc.ConsumeType)
		merged.MessageModel = cmp.Or(merged.MessageModel, cc.MessageModel)
		merged.ConsumeFromWhere = cmp.Or(merged.ConsumeFromWhere, cc.ConsumeFromWhere)
	}
	if len(seen) == 0 {
		return nil, nil, fmt.Errorf("consumer group %s is not online: %w", group, errors.Join(append(errs, ErrNotFound)...))
	}
	for _, id := range slices.Sorted(maps.Keys(seen)) {
		merged.ConnectionSet = append(merged.ConnectionSet, seen[id])
	}
	return merged, at, nil
}

// ProducerConnection merges GET_PRODUCER_CONNECTION_LIST of group from the masters of topic's route.
// The second result maps each client id to the brokers it is connected to.
func (t *Tool) ProducerConnection(ctx context.Context, group, topic string) (*protocol.ProducerConnection, map[string][]string, error) {
	rd, err := t.TopicRoute(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	seen, at := map[string]protocol.Connection{}, map[string][]string{}
	var errs []error
	for _, r := range t.callBrokers(ctx, RouteMasters(rd), remoting.GetProducerConnectionList, map[string]string{"producerGroup": group}, nil) {
		if r.Err != nil {
			errs = append(errs, r.Err)
			continue
		}
		var pc protocol.ProducerConnection
		if err := protocol.Decode(r.Resp.Body, &pc); err != nil {
			errs = append(errs, fmt.Errorf("decode producer connections from %s: %w", r.Broker.Addr, err))
			continue
		}
		for _, c := range pc.ConnectionSet {
			seen[c.ClientID] = c
			at[c.ClientID] = append(at[c.ClientID], r.Broker.Addr)
		}
	}
	if len(seen) == 0 {
		return nil, nil, fmt.Errorf("producer group %s has no connection: %w", group, errors.Join(append(errs, ErrNotFound)...))
	}
	out := &protocol.ProducerConnection{}
	for _, id := range slices.Sorted(maps.Keys(seen)) {
		out.ConnectionSet = append(out.ConnectionSet, seen[id])
	}
	return out, at, nil
}

// brokersOf renders the brokers a client is connected to, after Java's columns.
func brokersOf(at map[string][]string, clientID string) string {
	if len(at[clientID]) == 0 {
		return ""
	}
	return "  broker " + strings.Join(at[clientID], ",")
}

// versionDesc names a client's remoting version as Java's MQVersion.getVersionDesc for the
// versions clients in use send, else the number.
func versionDesc(v int32) string {
	switch v {
	case 317:
		return "V4_5_2"
	case 479:
		return "V5_3_3"
	}
	return strconv.Itoa(int(v))
}

var consumerConnectionCommand = &command{
	name:    "consumerConnection",
	summary: "List a consumer group's connections and subscriptions",
	args:    "-g <group> [-b brokerAddr]",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var group, broker string
		fs.StringVarP(&group, "consumerGroup", "g", "", "consumer group name")
		fs.StringVarP(&broker, "brokerAddr", "b", "", "ask this broker only")
		return func(ctx context.Context, t *Tool) error {
			if err := required(fs, "consumerGroup"); err != nil {
				return err
			}
			cc, at, err := t.ConsumerConnection(ctx, group, broker)
			if err != nil {
				return err
			}
			if t.jsonOut() {
				return t.printJSON(cc)
			}
			for i, c := range cc.ConnectionSet {
				t.printf("%03d  %-36s %-22s %-10s %s%s\n", i+1, c.ClientID, c.ClientAddr, c.Language, versionDesc(c.Version), brokersOf(at, c.ClientID))
			}
			t.printf("\nBelow is subscription:\n")
			for i, topic := range slices.Sorted(maps.Keys(cc.SubscriptionTable)) {
				t.printf("%03d  Topic: %-40s SubExpression: %s\n", i+1, topic, cc.SubscriptionTable[topic].SubString)
			}
			t.printf("\nConsumeType: %s\nMessageModel: %s\nConsumeFromWhere: %s\n", cc.ConsumeType, cc.MessageModel, cc.ConsumeFromWhere)
			return nil
		}
	},
}

var producerConnectionCommand = &command{
	name:    "producerConnection",
	summary: "List a producer group's connections",
	args:    "-g <producerGroup> -t <topic>",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var group, topic string
		fs.StringVarP(&group, "producerGroup", "g", "", "producer group name")
		fs.StringVarP(&topic, "topic", "t", "", "a topic the group produces to (its route names the brokers)")
		return func(ctx context.Context, t *Tool) error {
			if err := required(fs, "producerGroup", "topic"); err != nil {
				return err
			}
			pc, at, err := t.ProducerConnection(ctx, group, topic)
			if err != nil {
				return err
			}
			if t.jsonOut() {
				return t.printJSON(pc)
			}
			for i, c := range pc.ConnectionSet {
				t.printf("%04d  %-32s %-22s %-8s %s%s\n", i+1, c.ClientID, c.ClientAddr, c.Language, versionDesc(c.Version), brokersOf(at, c.ClientID))
			}
			return nil
		}
	},
}
