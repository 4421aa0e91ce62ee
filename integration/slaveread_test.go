package integration

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestRaftGroupSlaveRead: with slaveReadEnable and accessMessageInMemoryMaxRatio=0 (so any read
// behind the commitlog end counts as "not in memory"), the leader's pull answers suggest broker id
// 1 (whichBrokerWhenConsumeSlowly) to a reader that is behind and 0 to one at the end; the
// official push consumer follows the suggestions to the followers, which serve its pulls, and it
// receives every message.
func TestRaftGroupSlaveRead(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, withProp("slaveReadEnable", "true"), withProp("accessMessageInMemoryMaxRatio", "0"))
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic, group := uniq("SlaveRead"), uniq("GSlaveRead")
	var acked []sent
	for i := range 100 {
		acked = append(acked, sendRawOK(t, leader.addr, topic, fmt.Sprintf("sr-%03d", i)))
	}
	if got := pullSuggestion(t, leader.addr, group, topic, 0); got != 1 {
		t.Fatalf("pull from offset 0 of 100 on the leader suggests broker %d, want 1 (reader behind)", got)
	}
	if got := pullSuggestion(t, leader.addr, group, topic, 99); got != 0 {
		t.Fatalf("pull of the last message on the leader suggests broker %d, want 0 (reader at the end)", got)
	}
	// A follower sends a caught-up reader back to the master.
	f := g.followers(leader)[0]
	eventually(t, 10*time.Second, "follower applied the sends", func() error {
		if n, err := maxOffset(f.addr, topic, 0); err != nil || n != 100 {
			return fmt.Errorf("follower max offset %d, %v", n, err)
		}
		return nil
	})
	if got := pullSuggestion(t, f.addr, group, topic, 99); got != 0 {
		t.Fatalf("pull of the last message on a follower suggests broker %d, want 0", got)
	}
	// An offset beyond a replica's end is one it has not applied yet: the follower answers
	// "retry" at the same offset, where the leader (whose end it is past) moves the consumer.
	for _, c := range []struct {
		b        *broker
		code     int
		nextWant string
	}{{f, codePullRetryImmediately, "150"}, {leader, codePullOffsetMoved, "100"}} {
		resp, err := rawRequest(c.b.addr, codePullMessage, map[string]string{
			"consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "150",
			"maxMsgNums": "1", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
			"subscription": "*", "subVersion": "0", "expressionType": "TAG",
		}, nil, 10*time.Second)
		if err != nil || int(resp.Code) != c.code || resp.ExtFields["nextBeginOffset"] != c.nextWant {
			t.Fatalf("pull at 150 (end 100) from %s: %v %+v; want code %d, nextBeginOffset %s", c.b.addr, err, resp, c.code, c.nextWant)
		}
	}

	before := map[*broker]int64{}
	for _, b := range g.followers(leader) {
		before[b] = msgGetTotal(t, b)
	}
	c := startPushConsumer(t, g.asCluster(leader), group, topic, all)
	eventually(t, 40*time.Second, "the consumer receives every message", func() error {
		return countErr("consumer", c.got.count(), len(acked))
	})
	c.shutdown()
	if d := diffBodies(bodies(acked), c.got.snapshot()); len(d.missing) > 0 {
		t.Fatalf("consumer: %s", d)
	}
	served := int64(0)
	for _, b := range g.followers(leader) {
		served += msgGetTotal(t, b) - before[b]
	}
	if served == 0 {
		t.Fatalf("no follower served a message to the consumer although the leader suggested reading from broker 1")
	}
	t.Logf("slave read: %d messages consumed, %d of them pulled from followers", c.got.count(), served)
}

// Pull answer codes (RocketMQ's ResponseCode).
const (
	codePullRetryImmediately = 20
	codePullOffsetMoved      = 21
)

// pullSuggestion sends one raw pull of queue 0 at off and returns the answer's suggestWhichBrokerId.
func pullSuggestion(t testing.TB, addr, group, topic string, off int64) int64 {
	t.Helper()
	resp, err := rawRequest(addr, codePullMessage, map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": strconv.FormatInt(off, 10),
		"maxMsgNums": "1", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
		"subscription": "*", "subVersion": "0", "expressionType": "TAG",
	}, nil, 10*time.Second)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("pull %s/0@%d from %s: %v %+v", topic, off, addr, err, resp)
	}
	id, err := strconv.ParseInt(resp.ExtFields["suggestWhichBrokerId"], 10, 64)
	if err != nil {
		t.Fatalf("suggestWhichBrokerId %q: %v", resp.ExtFields["suggestWhichBrokerId"], err)
	}
	return id
}

var msgGetTotalRE = regexp.MustCompile(`"msgGetTotalTodayNow"\s*:\s*"(\d+)"`)

// msgGetTotal is a broker's count of messages served to pulls (GET_BROKER_RUNTIME_INFO).
func msgGetTotal(t testing.TB, b *broker) int64 {
	t.Helper()
	resp, err := rawRequest(b.addr, codeGetBrokerRuntimeInfo, nil, nil, 5*time.Second)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("runtime info of %s: %v %+v", b.proc.name, err, resp)
	}
	m := msgGetTotalRE.FindSubmatch(resp.Body)
	if m == nil {
		t.Fatalf("runtime info of %s has no msgGetTotalTodayNow: %s", b.proc.name, resp.Body)
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}
