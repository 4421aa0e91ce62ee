package admin

// queryMsgByUniqueKey: QUERY_MESSAGE (12) with _UNIQUE_KEY_QUERY=true (the broker then uses
// maxNum 32) over all time to every master of the topic's route; kept are the messages whose
// UNIQ_KEY equals the id (the index compares hashes), as Java's QueryMsgByUniqueKeySubCommand.
//
// queryMsgByOffset: the message at one queue offset (Java's -t -b -i -o; -o is --offset here
// because -o selects the output format), read with one PULL_MESSAGE (11) from the broker group's
// master, or any member when there is none (DLedger followers serve pulls from their replica).
//
// consumeMessage: Java's ConsumeMessageCommand as a one-off reader: PULL_MESSAGE over the chosen
// queues (all of the route, or -b/-i), from --offset, the offset of -s (SEARCH_OFFSET_BY_TIMESTAMP)
// or the queue's min offset, up to -e's offset or the max offset, at most -c messages. It commits
// nothing (commitOffset=0, no commit flag), so the group's offsets do not move.

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

// toolsConsumerGroup is the group mqadmin's reads use, as Java's TOOLS_CONSUMER.
const toolsConsumerGroup = "TOOLS_CONSUMER"

// QueryMsgByUniqueKey returns topic's messages whose UNIQ_KEY (client message id) is id,
// ordered by store time.
func (t *Tool) QueryMsgByUniqueKey(ctx context.Context, topic, id string) ([]MessageInfo, error) {
	msgs, err := t.queryIndex(ctx, topic, id, true, DefaultQueryMaxNum, 0, 1<<62)
	var out []MessageInfo
	for _, m := range msgs {
		if m.UniqKey == id {
			out = append(out, m)
		}
	}
	return out, err
}

// queryIndex sends QUERY_MESSAGE to every master of topic's route and decodes what they return
// (QUERY_NOT_FOUND contributes nothing), sorted by store time.
func (t *Tool) queryIndex(ctx context.Context, topic, key string, uniq bool, maxNum int, begin, end int64) ([]MessageInfo, error) {
	rd, err := t.TopicRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	masters := RouteMasters(rd)
	if len(masters) == 0 {
		return nil, fmt.Errorf("%w in the route of topic %s", ErrNoMaster, topic)
	}
	ext := map[string]string{
		"topic": topic, "key": key, "maxNum": strconv.Itoa(maxNum),
		"beginTimestamp": strconv.FormatInt(begin, 10), "endTimestamp": strconv.FormatInt(end, 10),
		"_UNIQUE_KEY_QUERY": strconv.FormatBool(uniq),
	}
	var out []MessageInfo
	var errs []error
	for _, r := range t.callBrokers(ctx, masters, remoting.QueryMessage, ext, nil) {
		if IsCode(r.Err, remoting.QueryNotFound) {
			continue
		}
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.Broker.BrokerName, r.Err))
			continue
		}
		msgs, err := message.DecodeRecords(r.Resp.Body)
		if err != nil {
			errs = append(errs, fmt.Errorf("decode messages from %s: %w", r.Broker.Addr, err))
		}
		for _, m := range msgs {
			if info := NewMessageInfo(m); info.Topic == topic {
				out = append(out, info)
			}
		}
	}
	sortByStoreTime(out)
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("query topic %s by key %s: %w", topic, key, err)
	}
	return out, nil
}

func sortByStoreTime(msgs []MessageInfo) {
	slices.SortFunc(msgs, func(a, b MessageInfo) int {
		if a.StoreTimestamp != b.StoreTimestamp {
			return int(a.StoreTimestamp - b.StoreTimestamp)
		}
		return strings.Compare(a.OffsetMsgID, b.OffsetMsgID)
	})
}

// routeReadAddr picks where to read brokerName's queues: its master, else its lowest-id member.
func routeReadAddr(rd *protocol.TopicRouteData, brokerName string) (string, error) {
	for _, bd := range rd.BrokerDatas {
		if bd == nil || bd.BrokerName != brokerName {
			continue
		}
		if a := bd.BrokerAddrs[protocol.MasterID]; a != "" {
			return a, nil
		}
		if m := members(bd, false); len(m) > 0 {
			return m[0].Addr, nil
		}
	}
	return "", fmt.Errorf("%w: broker %s is not in the route", ErrNotFound, brokerName)
}

// pullOnce reads up to n messages of one queue from offset with PULL_MESSAGE, committing
// nothing. It returns the messages and the next offset; none found is not an error.
func (t *Tool) pullOnce(ctx context.Context, addr, topic string, qid int32, offset int64, n int) ([]*message.Message, int64, error) {
	ext := map[string]string{
		"consumerGroup": toolsConsumerGroup, "topic": topic, "queueId": strconv.Itoa(int(qid)),
		"queueOffset": strconv.FormatInt(offset, 10), "maxMsgNums": strconv.Itoa(n),
		"sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
		"subscription": "*", "subVersion": "0", "expressionType": "TAG",
	}
	resp, err := t.invoke(ctx, addr, remoting.NewRequest(remoting.PullMessage, ext, nil))
	if err != nil {
		return nil, offset, err
	}
	next := offset
	if v, perr := strconv.ParseInt(resp.Ext("nextBeginOffset"), 10, 64); perr == nil {
		next = v
	}
	switch resp.Code {
	case remoting.Success:
		msgs, err := message.DecodeRecords(resp.Body)
		if err != nil {
			return nil, next, fmt.Errorf("decode pulled messages from %s: %w", addr, err)
		}
		return msgs, next, nil
	case remoting.PullNotFound, remoting.PullRetryImmediately, remoting.PullOffsetMoved:
		return nil, next, nil
	}
	return nil, next, &ResponseError{Addr: addr, Code: resp.Code, Remark: resp.Remark}
}

// queueOffset asks addr one of GET_MAX_OFFSET, GET_MIN_OFFSET or SEARCH_OFFSET_BY_TIMESTAMP.
func (t *Tool) queueOffset(ctx context.Context, addr string, code int32, topic string, qid int32, ts int64) (int64, error) {
	ext := map[string]string{"topic": topic, "queueId": strconv.Itoa(int(qid))}
	if code == remoting.SearchOffsetByTimestamp {
		ext["timestamp"] = strconv.FormatInt(ts, 10)
	}
	resp, err := t.call(ctx, addr, code, ext, nil)
	if err != nil {
		return 0, err
	}
	off, err := strconv.ParseInt(resp.Ext("offset"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s answered a bad offset %q: %w", addr, resp.Ext("offset"), err)
	}
	return off, nil
}

// QueryMsgByOffset returns the message at offset of queue qid of topic on brokerName.
func (t *Tool) QueryMsgByOffset(ctx context.Context, topic, brokerName string, qid int32, offset int64) (*MessageInfo, error) {
	rd, err := t.TopicRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	addr, err := routeReadAddr(rd, brokerName)
	if err != nil {
		return nil, err
	}
	msgs, _, err := t.pullOnce(ctx, addr, topic, qid, offset, 1)
	if err != nil {
		return nil, fmt.Errorf("pull %s queue %d offset %d: %w", topic, qid, offset, err)
	}
	for _, m := range msgs {
		if m.QueueOffset == offset {
			info := NewMessageInfo(m)
			return &info, nil
		}
	}
	return nil, fmt.Errorf("%w: no message at offset %d of %s queue %d on %s", ErrNotFound, offset, topic, qid, brokerName)
}

// ConsumeRange selects what ConsumeMessages reads; zero values mean "all".
type ConsumeRange struct {
	BrokerName string
	QueueID    int32 // -1: every queue
	Offset     int64 // -1: from Begin's offset, or the min offset
	Begin, End int64 // store times in ms; 0: unbounded
	Max        int
}

// ConsumeMessages reads topic's messages as described by r, queue by queue.
func (t *Tool) ConsumeMessages(ctx context.Context, topic string, r ConsumeRange) ([]MessageInfo, error) {
	rd, err := t.TopicRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	if r.Max <= 0 {
		r.Max = 128
	}
	var out []MessageInfo
	for _, qd := range rd.QueueDatas {
		if qd == nil || (r.BrokerName != "" && qd.BrokerName != r.BrokerName) {
			continue
		}
		addr, err := routeReadAddr(rd, qd.BrokerName)
		if err != nil {
			return out, err
		}
		for q := int32(0); q < qd.ReadQueueNums && len(out) < r.Max; q++ {
			if r.QueueID >= 0 && q != r.QueueID {
				continue
			}
			msgs, err := t.consumeQueue(ctx, addr, topic, q, r, r.Max-len(out))
			out = append(out, msgs...)
			if err != nil {
				return out, fmt.Errorf("read %s queue %d on %s: %w", topic, q, qd.BrokerName, err)
			}
		}
	}
	return out, nil
}

func (t *Tool) consumeQueue(ctx context.Context, addr, topic string, q int32, r ConsumeRange, limit int) ([]MessageInfo, error) {
	var err error
	from := r.Offset
	if from < 0 {
		if r.Begin > 0 {
			from, err = t.queueOffset(ctx, addr, remoting.SearchOffsetByTimestamp, topic, q, r.Begin)
		} else {
			from, err = t.queueOffset(ctx, addr, remoting.GetMinOffset, topic, q, 0)
		}
		if err != nil {
			return nil, err
		}
	}
	end, err := t.queueOffset(ctx, addr, remoting.GetMaxOffset, topic, q, 0)
	if err != nil {
		return nil, err
	}
	if r.End > 0 {
		if end, err = t.queueOffset(ctx, addr, remoting.SearchOffsetByTimestamp, topic, q, r.End); err != nil {
			return nil, err
		}
	}
	var out []MessageInfo
	for off := from; off < end && len(out) < limit; {
		msgs, next, err := t.pullOnce(ctx, addr, topic, q, off, min(32, limit-len(out)))
		if err != nil {
			return out, err
		}
		for _, m := range msgs {
			if m.QueueOffset >= off && m.QueueOffset < end && len(out) < limit {
				out = append(out, NewMessageInfo(m))
			}
		}
		if next <= off {
			break
		}
		off = next
	}
	return out, nil
}

var queryMsgByUniqueKeyCommand = &command{
	name:    "queryMsgByUniqueKey",
	summary: "Find a message by its unique key (client message id)",
	args:    "-t <topic> -i <msgId> [-a]",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var topic, id string
		var all bool
		fs.StringVarP(&topic, "topic", "t", "", "topic name")
		fs.StringVarP(&id, "msgId", "i", "", "unique key (the msgId a send returns)")
		fs.BoolVarP(&all, "showAll", "a", false, "print every message with this key (a retried send may store it twice)")
		return func(ctx context.Context, t *Tool) error {
			if err := required(fs, "topic", "msgId"); err != nil {
				return err
			}
			msgs, err := t.QueryMsgByUniqueKey(ctx, topic, id)
			if err != nil {
				return err
			}
			if len(msgs) == 0 {
				return fmt.Errorf("%w: no message of topic %s with unique key %s", ErrNotFound, topic, id)
			}
			if !all {
				msgs = msgs[:1]
			}
			if t.jsonOut() {
				return t.printJSON(msgs)
			}
			for i, m := range msgs {
				if i > 0 {
					t.printf("\n")
				}
				t.printMessage(m)
			}
			return nil
		}
	},
}

var queryMsgByOffsetCommand = &command{
	name:    "queryMsgByOffset",
	summary: "Show the message at a queue offset",
	args:    "-t <topic> -b <brokerName> -i <queueId> --offset <offset>",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var topic, broker string
		var qid int32
		var offset int64
		fs.StringVarP(&topic, "topic", "t", "", "topic name")
		fs.StringVarP(&broker, "brokerName", "b", "", "broker name")
		fs.Int32VarP(&qid, "queueId", "i", -1, "queue id")
		fs.Int64Var(&offset, "offset", -1, "queue offset (Java's -o)")
		return func(ctx context.Context, t *Tool) error {
			if err := required(fs, "topic", "brokerName"); err != nil {
				return err
			}
			if qid < 0 || offset < 0 {
				return usagef("-i/--queueId and --offset are required and must not be negative")
			}
			m, err := t.QueryMsgByOffset(ctx, topic, broker, qid, offset)
			if err != nil {
				return err
			}
			if t.jsonOut() {
				return t.printJSON(m)
			}
			t.printMessage(*m)
			return nil
		}
	},
}

var consumeMessageCommand = &command{
	name:    "consumeMessage",
	summary: "Print a topic's messages without committing offsets",
	args:    "-t <topic> [-b brokerName] [-i queueId] [--offset n] [-s beginMs] [-e endMs] [-c count]",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var topic string
		r := ConsumeRange{}
		fs.StringVarP(&topic, "topic", "t", "", "topic name")
		fs.StringVarP(&r.BrokerName, "brokerName", "b", "", "only this broker's queues")
		fs.Int32VarP(&r.QueueID, "queueId", "i", -1, "only this queue")
		fs.Int64Var(&r.Offset, "offset", -1, "start at this queue offset (Java's -o)")
		fs.Int64VarP(&r.Begin, "beginTimestamp", "s", 0, "start at the first message stored at or after this time, ms")
		fs.Int64VarP(&r.End, "endTimestamp", "e", 0, "stop before the first message stored at or after this time, ms")
		fs.IntVarP(&r.Max, "MessageNumber", "c", 128, "most messages to print")
		fs.StringP("consumerGroup", "g", "", "accepted for Java compatibility; reads commit nothing")
		return func(ctx context.Context, t *Tool) error {
			if err := required(fs, "topic"); err != nil {
				return err
			}
			if r.Max <= 0 {
				return usagef("-c must be positive")
			}
			msgs, err := t.ConsumeMessages(ctx, topic, r)
			if t.jsonOut() && err == nil {
				if msgs == nil {
					msgs = []MessageInfo{}
				}
				return t.printJSON(msgs)
			}
			for _, m := range msgs {
				t.printf("MSGID: %s MessageExt [queueId=%d, queueOffset=%d, storeTimestamp=%s, topic=%s, tags=%s, keys=%s, msgId=%s] BODY: %s\n",
					m.OffsetMsgID, m.QueueID, m.QueueOffset, t.formatMillis(m.StoreTimestamp, "0"), m.Topic, m.Tags, m.Keys, m.UniqKey, m.Body)
			}
			if err != nil {
				return err
			}
			t.printf("Consume ok: %d messages\n", len(msgs))
			return nil
		}
	},
}
