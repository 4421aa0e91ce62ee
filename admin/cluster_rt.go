package admin

// clusterRT, as Java's ClusterSendMsgRTCommand: sends -a messages of -s bytes to every master
// (to the broker-name topic, queue 0, which every broker creates for itself) and prints per
// broker the average send RT in milliseconds with the success and failure counts. Java repeats
// every -i seconds until killed; here --rounds bounds the repetitions (default 1, 0 = until
// interrupted). -p prints each result as a "time|machineRoom|cluster|broker|rt" log line instead
// of the table, like Java's -p (which writes those lines to its log).

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// BrokerRT is one master's result of a clusterRT round.
type BrokerRT struct {
	Cluster    string  `json:"cluster"`
	BrokerName string  `json:"brokerName"`
	Addr       string  `json:"brokerAddr"`
	RTMillis   float64 `json:"rt"`
	Success    int     `json:"successCount"`
	Fail       int     `json:"failCount"`
	LastError  string  `json:"lastError,omitempty"`
}

// ClusterRT runs one round: amount sends of size bytes to every master of cluster ("" = all).
func (t *Tool) ClusterRT(ctx context.Context, cluster string, amount, size int) ([]BrokerRT, error) {
	ci, err := t.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	masters, err := ClusterBrokers(ci, cluster, true)
	if err != nil {
		return nil, err
	}
	body := []byte(strings.Repeat("a", size))
	out := make([]BrokerRT, 0, len(masters))
	for _, m := range masters {
		r := BrokerRT{Cluster: m.Cluster, BrokerName: m.BrokerName, Addr: m.Addr}
		var elapsed time.Duration
		for range amount {
			start := time.Now()
			err := t.sendRaw(ctx, m.Addr, m.BrokerName, m.BrokerName, body)
			if err != nil {
				r.Fail++
				r.LastError = err.Error()
				continue
			}
			elapsed += time.Since(start)
			r.Success++
		}
		if r.Success > 0 {
			r.RTMillis = float64(elapsed.Microseconds()) / 1000 / float64(r.Success)
		}
		out = append(out, r)
	}
	return out, nil
}

// sendRaw sends one message to queue 0 of topic at addr.
func (t *Tool) sendRaw(ctx context.Context, addr, brokerName, topic string, body []byte) error {
	props := map[string]string{message.PropertyUniqClientMessageID: newUniqKey(), message.PropertyWaitStoreMsgOK: "true"}
	h := protocol.SendMessageRequestHeader{
		ProducerGroup: toolsProducerGroup, Topic: topic, DefaultTopic: protocol.AutoCreateTopicKey, DefaultTopicQueueNums: 4,
		BornTimestamp: time.Now().UnixMilli(), Properties: message.FormatProperties(props), BrokerName: brokerName,
	}
	if _, err := t.call(ctx, addr, remoting.SendMessageV2, h.ToExtV2(), body); err != nil {
		return fmt.Errorf("send to %s at %s: %w", topic, addr, err)
	}
	return nil
}

var clusterRTCommand = &command{
	name:    "clusterRT",
	summary: "Send test messages to every master and print the send RT",
	args:    "[-c cluster] [-a amount] [-s size] [-i interval] [--rounds n] [-p] [-m machineRoom]",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var cluster, room string
		var amount, size, rounds int
		var interval int64
		var printLog bool
		fs.StringVarP(&cluster, "clusterName", "c", "", "cluster name (default: every cluster)")
		fs.IntVarP(&amount, "amount", "a", 100, "messages sent to each master per round")
		fs.IntVarP(&size, "size", "s", 128, "message body size in bytes")
		fs.Int64VarP(&interval, "interval", "i", 10, "seconds between rounds")
		fs.IntVar(&rounds, "rounds", 1, "rounds to run (0 = until interrupted; Java always repeats)")
		fs.BoolVarP(&printLog, "printLog", "p", false, "print results as log lines (time|machineRoom|cluster|broker|rt)")
		fs.StringVarP(&room, "machineRoom", "m", "noname", "machine room name in -p lines")
		return func(ctx context.Context, t *Tool) error {
			if amount <= 0 || size <= 0 || interval < 0 || rounds < 0 {
				return usagef("-a and -s must be positive, -i and --rounds not negative")
			}
			if !printLog && !t.jsonOut() {
				t.printf("%-24s  %-24s  %-4s  %-8s  %-8s\n", "#Cluster Name", "#Broker Name", "#RT", "#successCount", "#failCount")
			}
			for round := 1; ; round++ {
				res, err := t.ClusterRT(ctx, cluster, amount, size)
				if err != nil {
					return err
				}
				t.printRT(res, printLog, room)
				if rounds != 0 && round >= rounds {
					return rtError(res)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Duration(interval) * time.Second):
				}
			}
		}
	},
}

func (t *Tool) printRT(res []BrokerRT, printLog bool, room string) {
	if t.jsonOut() {
		_ = t.printJSON(res)
		return
	}
	for _, r := range res {
		if printLog {
			t.printf("%s|%s|%s|%s|%.2f\n", time.Now().In(t.cfg.Location).Format("2006-01-02 15:04:05"), room, r.Cluster, r.BrokerName, r.RTMillis)
			continue
		}
		t.printf("%-24s  %-24s  %-8.2f  %-16d  %-16d\n", r.Cluster, r.BrokerName, r.RTMillis, r.Success, r.Fail)
	}
	for _, r := range res {
		if r.Fail > 0 {
			t.warnf("%s (%s): %d sends failed, last: %s", r.BrokerName, r.Addr, r.Fail, r.LastError)
		}
	}
}

// rtError makes the exit status 1 when a master failed every send.
func rtError(res []BrokerRT) error {
	for _, r := range res {
		if r.Success == 0 {
			return fmt.Errorf("every send to %s (%s) failed: %s", r.BrokerName, r.Addr, r.LastError)
		}
	}
	return nil
}
