package admin

// sendMessage: one SEND_MESSAGE_V2 (310) to the master of a broker group in the topic's route, as
// Java's SendMessageCommand (-t topic, -p body, -k keys, -c tags, -b brokerName, -i queueId).
// Without -b the first broker name of the route is used; without -i the queue is chosen at
// random among its write queues. The message carries a fresh UNIQ_KEY (the msgId printed) and
// WAIT=true. The topic must have a route (no auto-creation through TBW102 here).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// toolsProducerGroup is the producer group of mqadmin's sends.
const toolsProducerGroup = "TOOLS_PRODUCER"

// SendResult is what a send stored.
type SendResult struct {
	BrokerName  string `json:"brokerName"`
	QueueID     int32  `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
	SendStatus  string `json:"sendStatus"`
	MsgID       string `json:"msgId"`
	OffsetMsgID string `json:"offsetMsgId"`
}

// SendMessage sends one message with the given body, keys (space separated) and tags.
// brokerName "" picks the route's first broker; queueID < 0 a random write queue.
func (t *Tool) SendMessage(ctx context.Context, topic, body, keys, tags, brokerName string, queueID int32) (*SendResult, error) {
	if err := message.ValidateTopic(topic); err != nil {
		return nil, usagef("%v", err)
	}
	if body == "" {
		return nil, usagef("-p/--body is required and must not be empty")
	}
	rd, err := t.TopicRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	var qd *protocol.QueueData
	for _, q := range rd.QueueDatas {
		if q != nil && (brokerName == "" || q.BrokerName == brokerName) && q.WriteQueueNums > 0 {
			qd = q
			break
		}
	}
	if qd == nil {
		return nil, fmt.Errorf("%w: no writable queue of topic %s on broker %q in the route", ErrNotFound, topic, brokerName)
	}
	if queueID >= qd.WriteQueueNums {
		return nil, usagef("-i %d: broker %s has %d write queues", queueID, qd.BrokerName, qd.WriteQueueNums)
	}
	if queueID < 0 {
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(qd.WriteQueueNums)))
		queueID = int32(n.Int64())
	}
	var addr string
	for _, bd := range rd.BrokerDatas {
		if bd != nil && bd.BrokerName == qd.BrokerName {
			addr = bd.BrokerAddrs[protocol.MasterID]
		}
	}
	if addr == "" {
		return nil, fmt.Errorf("%w for broker %s", ErrNoMaster, qd.BrokerName)
	}
	uniq := newUniqKey()
	props := map[string]string{message.PropertyUniqClientMessageID: uniq, message.PropertyWaitStoreMsgOK: "true"}
	if keys != "" {
		props[message.PropertyKeys] = strings.Join(strings.Fields(keys), " ")
	}
	if tags != "" {
		props[message.PropertyTags] = tags
	}
	h := protocol.SendMessageRequestHeader{
		ProducerGroup: toolsProducerGroup, Topic: topic, DefaultTopic: protocol.AutoCreateTopicKey, DefaultTopicQueueNums: 4,
		QueueID: queueID, BornTimestamp: time.Now().UnixMilli(), Properties: message.FormatProperties(props), BrokerName: qd.BrokerName,
	}
	resp, err := t.call(ctx, addr, remoting.SendMessageV2, h.ToExtV2(), []byte(body))
	if err != nil {
		return nil, fmt.Errorf("send to %s: %w", topic, err)
	}
	res := &SendResult{BrokerName: qd.BrokerName, QueueID: queueID, SendStatus: "SEND_OK", MsgID: uniq, OffsetMsgID: resp.Ext("msgId")}
	if q, err := strconv.ParseInt(resp.Ext("queueId"), 10, 32); err == nil {
		res.QueueID = int32(q)
	}
	res.QueueOffset, _ = strconv.ParseInt(resp.Ext("queueOffset"), 10, 64)
	return res, nil
}

// newUniqKey returns a 32-hex-digit client message id (random here; Java's embeds the client's
// IP, pid and a counter, but brokers and clients treat it as opaque).
func newUniqKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return strings.ToUpper(hex.EncodeToString(b[:]))
}

var sendMessageCommand = &command{
	name:    "sendMessage",
	summary: "Send one message",
	args:    "-t <topic> -p <body> [-k keys] [-c tags] [-b brokerName] [-i queueId]",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var topic, body, keys, tags, broker string
		var qid int32
		fs.StringVarP(&topic, "topic", "t", "", "topic name")
		fs.StringVarP(&body, "body", "p", "", "message body (UTF-8)")
		fs.StringVarP(&keys, "key", "k", "", "message keys, space separated")
		fs.StringVarP(&tags, "tags", "c", "", "message tag")
		fs.StringVarP(&broker, "broker", "b", "", "broker name (default: the route's first)")
		fs.Int32VarP(&qid, "qid", "i", -1, "queue id (default: random)")
		return func(ctx context.Context, t *Tool) error {
			if err := required(fs, "topic", "body"); err != nil {
				return err
			}
			res, err := t.SendMessage(ctx, topic, body, keys, tags, broker, qid)
			if t.jsonOut() && err == nil {
				return t.printJSON(res)
			}
			t.printf("%-32s  %-4s  %-20s    %s\n", "#Broker Name", "#QID", "#Send Result", "#MsgId")
			if err != nil {
				t.printf("%-32s  %-4s  %-20s    %s\n", "Unknown", "Unknown", "Failed", "None")
				return err
			}
			t.printf("%-32s  %-4d  %-20s    %s\n", res.BrokerName, res.QueueID, res.SendStatus, res.MsgID)
			return nil
		}
	},
}
