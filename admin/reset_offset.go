package admin

// resetOffsetByTime: INVOKE_BROKER_TO_RESET_OFFSET (222; header topic, group, timestamp, isForce)
// to every master of the topic's route, as Java's ResetOffsetByTimeCommand; each broker commits
// the offsets and tells the group's live consumers (RESET_CONSUMER_CLIENT_OFFSET), and answers
// the table it set (fastjson MessageQueue-keyed ResetOffsetBody). -s takes milliseconds, "now",
// or Java's yyyy-MM-dd#HH:mm:ss:SSS in local time.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// javaTimeLayout is Java mqadmin's -s format (yyyy-MM-dd#HH:mm:ss:SSS).
const javaTimeLayout = "2006-01-02#15:04:05" // then ":SSS"

// ParseResetTime parses resetOffsetByTime's -s: "now", milliseconds since the epoch, or
// yyyy-MM-dd#HH:mm:ss:SSS in loc. -1 (the queues' ends) passes through.
func ParseResetTime(s string, now time.Time, loc *time.Location) (int64, error) {
	if s == "now" {
		return now.UnixMilli(), nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < -1 {
			return 0, usagef("-s %d: a timestamp cannot be negative (-1 means the queues' ends)", ms)
		}
		return ms, nil
	}
	bad := usagef("-s %q: want milliseconds, now, or yyyy-MM-dd#HH:mm:ss:SSS", s)
	// Go layouts take fractional seconds only after '.' or ',': split off the milliseconds.
	i := strings.LastIndexByte(s, ':')
	if i < 0 || len(s)-i != 4 {
		return 0, bad
	}
	ms, err := strconv.Atoi(s[i+1:])
	if err != nil || ms < 0 {
		return 0, bad
	}
	t, err := time.ParseInLocation(javaTimeLayout, s[:i], loc)
	if err != nil {
		return 0, bad
	}
	return t.UnixMilli() + int64(ms), nil
}

// ResetOffset is one queue's new offset.
type ResetOffset struct {
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
	Offset     int64  `json:"offset"`
}

// ResetOffsetByTime rewinds (or, with force, moves) group's offsets of topic to timestamp on
// every master of the topic's route and returns the offsets set, by broker and queue.
func (t *Tool) ResetOffsetByTime(ctx context.Context, group, topic string, timestamp int64, force bool) ([]ResetOffset, error) {
	rd, err := t.TopicRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	masters := RouteMasters(rd)
	if len(masters) == 0 {
		return nil, fmt.Errorf("%w in the route of topic %s", ErrNoMaster, topic)
	}
	ext := map[string]string{"topic": topic, "group": group, "timestamp": strconv.FormatInt(timestamp, 10), "isForce": strconv.FormatBool(force)}
	replies := t.callBrokers(ctx, masters, remoting.InvokeBrokerToResetOffset, ext, nil)
	var out []ResetOffset
	for _, r := range replies {
		if r.Err != nil {
			continue
		}
		if r.Resp.Remark != "" {
			t.warnf("%s: %s", r.Broker.BrokerName, r.Resp.Remark)
		}
		var body protocol.ResetOffsetBody
		if err := protocol.Decode(r.Resp.Body, &body); err != nil {
			return out, fmt.Errorf("decode reset offsets from %s: %w", r.Broker.Addr, err)
		}
		for mq, off := range body.OffsetTable {
			out = append(out, ResetOffset{BrokerName: mq.BrokerName, QueueID: mq.QueueID, Offset: off})
		}
	}
	slices.SortFunc(out, func(a, b ResetOffset) int {
		return cmp.Or(cmp.Compare(a.BrokerName, b.BrokerName), cmp.Compare(a.QueueID, b.QueueID))
	})
	if err := replyErrors(replies); err != nil {
		return out, fmt.Errorf("reset offsets of group %s on topic %s: %w", group, topic, err)
	}
	return out, nil
}

var resetOffsetByTimeCommand = &command{
	name:    "resetOffsetByTime",
	summary: "Reset a consumer group's offsets of a topic to a point in time",
	args:    "-g <group> -t <topic> -s <timestamp|now|yyyy-MM-dd#HH:mm:ss:SSS> [-f=false]",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var group, topic, ts string
		var force bool
		fs.StringVarP(&group, "group", "g", "", "consumer group name")
		fs.StringVarP(&topic, "topic", "t", "", "topic name")
		fs.StringVarP(&ts, "timestamp", "s", "", "milliseconds, now, or yyyy-MM-dd#HH:mm:ss:SSS (local time); -1 = the queues' ends")
		fs.BoolVarP(&force, "force", "f", true, "also move offsets forward (false: only rewind)")
		fs.BoolP("cplus", "c", false, "accepted for Java compatibility (C++ clients are not distinguished)")
		return func(ctx context.Context, t *Tool) error {
			if err := required(fs, "group", "topic", "timestamp"); err != nil {
				return err
			}
			ms, err := ParseResetTime(ts, time.Now(), t.cfg.Location)
			if err != nil {
				return err
			}
			res, err := t.ResetOffsetByTime(ctx, group, topic, ms, force)
			if t.jsonOut() {
				if res == nil {
					res = []ResetOffset{}
				}
				if perr := t.printJSON(res); perr != nil {
					return perr
				}
				return err
			}
			if len(res) > 0 {
				t.printf("rollback consumer offset by specified group[%s], topic[%s], force[%t], timestamp(string)[%s], timestamp(long)[%d]\n", group, topic, force, ts, ms)
				t.printf("%-40s  %-40s  %-40s\n", "#brokerName", "#queueId", "#offset")
				for _, r := range res {
					t.printf("%-40s  %-40d  %-40d\n", r.BrokerName, r.QueueID, r.Offset)
				}
			}
			return err
		}
	},
}
