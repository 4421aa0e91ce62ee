package admin

// updateTopic: UPDATE_AND_CREATE_TOPIC (17) to one broker (-b) or to every master of a cluster
// (-c), as Java's UpdateTopicSubCommand. Header: topic, defaultTopic=TBW102, readQueueNums,
// writeQueueNums, perm, topicFilterType, topicSysFlag=0, order. Java's -o (order) is --order here
// because -o selects the output format. With --order the order configuration
// "brokerName:writeQueueNums;..." is also put in every name server's ORDER_TOPIC_CONFIG namespace.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// TopicResult is one broker's outcome of a topic change.
type TopicResult struct {
	BrokerName string `json:"brokerName,omitempty"`
	Addr       string `json:"addr"`
	Success    bool   `json:"success"`
	Error      string `json:"error,omitempty"`
}

// UpdateTopicResult is what UpdateTopic did.
type UpdateTopicResult struct {
	TopicConfig protocol.TopicConfig `json:"topicConfig"`
	Brokers     []TopicResult        `json:"brokers"`
	// OrderConf is the ORDER_TOPIC_CONFIG value set on the name servers, if --order.
	OrderConf string `json:"orderConf,omitempty"`
	// Attributes is the attribute modification list sent (-a), if any.
	Attributes string `json:"attributes,omitempty"`
}

// UpdateTopic creates or updates tc on the broker at brokerAddr, or, when brokerAddr is "", on
// every master of cluster. It tries every target and returns the per-broker outcome with an
// error joining the failures.
func (t *Tool) UpdateTopic(ctx context.Context, tc protocol.TopicConfig, cluster, brokerAddr string) (*UpdateTopicResult, error) {
	return t.UpdateTopicAttributes(ctx, tc, "", cluster, brokerAddr)
}

// UpdateTopicAttributes is UpdateTopic that also changes the topic's attributes by attrs, a
// modification list "+key=value,-key" (RocketMQ 5.x: "+message.type=FIFO"); the brokers
// validate it and refuse unknown keys or values.
func (t *Tool) UpdateTopicAttributes(ctx context.Context, tc protocol.TopicConfig, attrs, cluster, brokerAddr string) (*UpdateTopicResult, error) {
	if err := message.ValidateTopic(tc.TopicName); err != nil {
		return nil, usagef("%v", err)
	}
	if tc.TopicFilterType == "" {
		tc.TopicFilterType = protocol.FilterSingleTag
	}
	ext := map[string]string{
		"topic":           tc.TopicName,
		"defaultTopic":    protocol.AutoCreateTopicKey,
		"readQueueNums":   strconv.Itoa(int(tc.ReadQueueNums)),
		"writeQueueNums":  strconv.Itoa(int(tc.WriteQueueNums)),
		"perm":            strconv.Itoa(int(tc.Perm)),
		"topicFilterType": tc.TopicFilterType,
		"topicSysFlag":    strconv.Itoa(int(tc.TopicSysFlag)),
		"order":           strconv.FormatBool(tc.Order),
	}
	if attrs != "" {
		ext["attributes"] = attrs
	}
	var replies []brokerReply
	if brokerAddr != "" {
		replies = t.callBrokers(ctx, []BrokerAddr{{Addr: brokerAddr}}, remoting.UpdateAndCreateTopic, ext, nil)
	} else {
		var err error
		if replies, err = t.callMasters(ctx, cluster, remoting.UpdateAndCreateTopic, ext, nil); err != nil {
			return nil, err
		}
	}
	res := &UpdateTopicResult{TopicConfig: tc, Attributes: attrs}
	targets := make([]BrokerAddr, 0, len(replies))
	for _, r := range replies {
		tr := TopicResult{BrokerName: r.Broker.BrokerName, Addr: r.Broker.Addr, Success: r.Err == nil}
		if r.Err != nil {
			tr.Error = r.Err.Error()
		}
		res.Brokers = append(res.Brokers, tr)
		targets = append(targets, r.Broker)
	}
	errs := []error{replyErrors(replies)}
	if tc.Order {
		if err := t.setOrderConf(ctx, res, targets, brokerAddr); err != nil {
			errs = append(errs, err)
		}
	}
	return res, errors.Join(errs...)
}

// setOrderConf puts "brokerName:writeQueueNums;..." for the topic in every name server's
// ORDER_TOPIC_CONFIG namespace and records it in res. A lone broker address is named from the
// cluster info.
func (t *Tool) setOrderConf(ctx context.Context, res *UpdateTopicResult, targets []BrokerAddr, brokerAddr string) error {
	if brokerAddr != "" {
		ci, err := t.ClusterInfo(ctx)
		if err != nil {
			return fmt.Errorf("--order: %w", err)
		}
		b, ok := findBroker(ci, brokerAddr)
		if !ok {
			return fmt.Errorf("--order: broker %s is not registered with the name server, order configuration not set", brokerAddr)
		}
		targets = []BrokerAddr{b}
	}
	conf := orderConf(targets, res.TopicConfig.WriteQueueNums)
	kv := map[string]string{"namespace": protocol.OrderTopicConfigNamespace, "key": res.TopicConfig.TopicName, "value": conf}
	if err := t.eachNamesrv(ctx, remoting.PutKVConfig, kv); err != nil {
		return fmt.Errorf("set order configuration: %w", err)
	}
	res.OrderConf = conf
	return nil
}

// findBroker returns the replica-group member registered at addr.
func findBroker(ci *protocol.ClusterInfo, addr string) (BrokerAddr, bool) {
	all, _ := ClusterBrokers(ci, "", false)
	for _, b := range all {
		if b.Addr == addr {
			return b, true
		}
	}
	return BrokerAddr{}, false
}

// orderConf renders "brokerA:n;brokerB:n" over the distinct broker names of targets.
func orderConf(targets []BrokerAddr, queues int32) string {
	var names []string
	for _, b := range targets {
		if b.BrokerName != "" && !slices.Contains(names, b.BrokerName) {
			names = append(names, b.BrokerName)
		}
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s:%d", n, queues)
	}
	return strings.Join(parts, ";")
}

// TopicConfigString renders tc as Java's TopicConfig.toString does (4.x).
func TopicConfigString(tc protocol.TopicConfig) string {
	return fmt.Sprintf("TopicConfig [topicName=%s, readQueueNums=%d, writeQueueNums=%d, perm=%s, topicFilterType=%s, topicSysFlag=%d, order=%t]",
		tc.TopicName, tc.ReadQueueNums, tc.WriteQueueNums, protocol.PermString(tc.Perm), tc.TopicFilterType, tc.TopicSysFlag, tc.Order)
}

var updateTopicCommand = &command{
	name:    "updateTopic",
	summary: "Create or update a topic on a broker or on every master of a cluster",
	args:    "-t <topic> (-c <cluster> | -b <brokerAddr>) [-r 8] [-w 8] [-p 6] [--order] [--topicFilterType SINGLE_TAG] [-a +message.type=FIFO]",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		tc := protocol.TopicConfig{}
		var cluster, broker, attrs string
		fs.StringVarP(&tc.TopicName, "topic", "t", "", "topic name")
		fs.StringVarP(&cluster, "clusterName", "c", "", "create on every master of this cluster")
		fs.StringVarP(&broker, "brokerAddr", "b", "", "create on this broker (host:port)")
		fs.Int32VarP(&tc.ReadQueueNums, "readQueueNums", "r", 8, "read queue count")
		fs.Int32VarP(&tc.WriteQueueNums, "writeQueueNums", "w", 8, "write queue count")
		fs.Int32VarP(&tc.Perm, "perm", "p", protocol.PermReadWrite, "permission: 2 write, 4 read, 6 read and write")
		fs.BoolVar(&tc.Order, "order", false, "ordered topic (also sets the name servers' order configuration)")
		fs.StringVar(&tc.TopicFilterType, "topicFilterType", protocol.FilterSingleTag, "SINGLE_TAG or MULTI_TAG")
		fs.StringVarP(&attrs, "attributes", "a", "", "attribute changes, e.g. +message.type=FIFO (NORMAL, FIFO, DELAY, TRANSACTION, MIXED) or -message.type")
		return func(ctx context.Context, t *Tool) error {
			if err := required(fs, "topic"); err != nil {
				return err
			}
			if (cluster == "") == (broker == "") {
				return usagef("give exactly one of -c/--clusterName and -b/--brokerAddr")
			}
			if tc.TopicFilterType != protocol.FilterSingleTag && tc.TopicFilterType != protocol.FilterMultiTag {
				return usagef("--topicFilterType must be %s or %s", protocol.FilterSingleTag, protocol.FilterMultiTag)
			}
			res, err := t.UpdateTopicAttributes(ctx, tc, attrs, cluster, broker)
			if res == nil {
				return err
			}
			if t.jsonOut() {
				if perr := t.printJSON(res); perr != nil {
					return perr
				}
				return err
			}
			for _, b := range res.Brokers {
				if b.Success {
					t.printf("create topic to %s success.\n", b.Addr)
				}
			}
			if res.OrderConf != "" {
				t.printf("set cluster orderConf. isOrder=true, orderConf=[%s]\n", res.OrderConf)
			}
			t.printf("%s\n", TopicConfigString(res.TopicConfig))
			if res.Attributes != "" {
				t.printf("attributes: %s\n", res.Attributes)
			}
			return err
		}
	},
}
