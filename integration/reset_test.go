package integration

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

const codeInvokeBrokerToResetOffset = 222

// resetRowRE matches one "#brokerName #queueId #offset" row of resetOffsetByTime's output.
var resetRowRE = regexp.MustCompile(`(?m)^(\S+)\s+(\d+)\s+(\d+)\s*$`)

// resetAndExpectReplay sends set A, then (after a recorded time) set B, lets a live push
// consumer of a fresh group consume both, runs mqadmin resetOffsetByTime to that time and
// expects the consumer to receive B again (the broker commits the offsets and sends
// RESET_CONSUMER_CLIENT_OFFSET; the Go client applies it after pausing for 10 s), and nothing of
// A. It returns the command's output.
func resetAndExpectReplay(t *testing.T, c *cluster, topic string) string {
	t.Helper()
	p := newProducer(t, c)
	setA := sendSync(t, p, topic, "A", 12, nil)
	time.Sleep(50 * time.Millisecond)
	split := time.Now().UnixMilli()
	time.Sleep(50 * time.Millisecond)
	setB := sendSync(t, p, topic, "B", 12, nil)
	group := uniq("GReset")
	pc := startPushConsumer(t, c, group, topic, all)
	eventually(t, 40*time.Second, "consumer receives A and B", func() error {
		return countErr("consumer", pc.got.count(), len(setA)+len(setB))
	})
	// The commits first, so the reset is a rewind of committed offsets.
	eventually(t, 20*time.Second, "the consumer's offsets committed at the queues' ends", func() error {
		for _, s := range append(setA, setB...) {
			off, found, err := consumerOffset(c.b.addr, group, topic, s.queue)
			if err != nil {
				return err
			}
			if !found || off <= s.offset {
				return fmt.Errorf("queue %d committed %d (found=%v), want past %d", s.queue, off, found, s.offset)
			}
		}
		return nil
	})
	out := runAdmin(t, c, "resetOffsetByTime", "-g", group, "-t", topic, "-s", strconv.FormatInt(split, 10))
	if !strings.Contains(out, "rollback consumer offset by specified group["+group+"]") {
		t.Fatalf("resetOffsetByTime output:\n%s", out)
	}
	perQueueA := map[int]int64{}
	for _, s := range setA {
		perQueueA[s.queue]++
	}
	for _, m := range resetRowRE.FindAllStringSubmatch(out, -1) {
		q, _ := strconv.Atoi(m[2])
		off, _ := strconv.ParseInt(m[3], 10, 64)
		if off != perQueueA[q] {
			t.Errorf("queue %d reset to %d, want %d (the number of A messages in it)\n%s", q, off, perQueueA[q], out)
		}
	}
	eventually(t, 60*time.Second, "consumer receives B again after the reset", func() error {
		return countErr("consumer", pc.got.count(), len(setA)+2*len(setB))
	})
	got := pc.got.snapshot()[len(setA)+len(setB):]
	if d := diffBodies(bodies(setB), got); len(d.missing)+len(d.extra) > 0 {
		t.Errorf("replayed after the reset: %s", d)
	}
	return out
}

// TestResetOffsetByTimeRewindsLiveConsumer: classic mode; resetOffsetByTime rewinds a live
// consumer to the first message stored after a time, and -s accepts Java's date form.
func TestResetOffsetByTimeRewindsLiveConsumer(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	topic := uniq("Reset")
	runAdmin(t, c, "updateTopic", "-b", c.b.addr, "-t", topic, "-r", "2", "-w", "2")
	waitTopicRoute(t, c, topic)
	resetAndExpectReplay(t, c, topic)

	// Java's date form, far in the future: every queue goes to its end (force).
	group := uniq("GFuture")
	if r, err := rawRequest(c.b.addr, metaCodeUpdateConsumerOffset, map[string]string{"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": "0"}, nil, 5*time.Second); err != nil || r.Code != respSuccess {
		t.Fatalf("UPDATE_CONSUMER_OFFSET: %v %+v", err, r)
	}
	out := runAdmin(t, c, "resetOffsetByTime", "-g", group, "-t", topic, "-s", "2999-01-01#00:00:00:000", "-o", "json")
	for q := range 2 {
		want, err := maxOffset(c.b.addr, topic, q)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, fmt.Sprintf(`"queueId": %d,
    "offset": %d`, q, want)) {
			t.Errorf("queue %d not reset to its end %d:\n%s", q, want, out)
		}
	}
}

// TestRaftResetOffsetByTime: the same in a three-node group (offsets committed through Raft on
// the leader); INVOKE_BROKER_TO_RESET_OFFSET sent to a follower is forwarded to the leader, and
// the followers' replicated offset tables receive the reset.
func TestRaftResetOffsetByTime(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3)
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic := uniq("RaftReset")
	resp, err := rawRequest(leader.addr, metaCodeUpdateAndCreateTopic, map[string]string{
		"topic": topic, "readQueueNums": "2", "writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG",
	}, nil, 10*time.Second)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("UPDATE_AND_CREATE_TOPIC: %v %+v", err, resp)
	}
	c := g.asCluster(leader)
	waitTopicRoute(t, c, topic)
	resetAndExpectReplay(t, c, topic)

	// An offline group through a follower: forwarded, committed through Raft, replicated.
	group := uniq("GRaftOffline")
	follower := g.followers(leader)[0]
	if r, err := rawRequest(follower.addr, metaCodeUpdateConsumerOffset, map[string]string{"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": "1"}, nil, 5*time.Second); err != nil || r.Code != respSuccess {
		t.Fatalf("UPDATE_CONSUMER_OFFSET through a follower: %v %+v", err, r)
	}
	resp, err = rawRequest(follower.addr, codeInvokeBrokerToResetOffset, map[string]string{
		"topic": topic, "group": group, "timestamp": "-1", "isForce": "true",
	}, nil, 10*time.Second)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("INVOKE_BROKER_TO_RESET_OFFSET through a follower: %v %+v", err, resp)
	}
	for _, b := range g.nodes {
		eventually(t, 10*time.Second, "reset offsets replicated to "+b.proc.name, func() error {
			tbl, err := allConsumerOffsets(b.addr)
			if err != nil {
				return err
			}
			for q := range 2 {
				want, err := maxOffset(leader.addr, topic, q)
				if err != nil {
					return err
				}
				if got := tbl[topic+"@"+group][strconv.Itoa(q)]; got != want {
					return fmt.Errorf("queue %d: %d, want the max offset %d", q, got, want)
				}
			}
			return nil
		})
	}
	// Bad input is an error answer.
	for _, ext := range []map[string]string{
		{"topic": topic, "group": group},
		{"topic": uniq("NoSuchTopic"), "group": group, "timestamp": "0"},
		{"topic": topic, "group": uniq("NoSuchGroup"), "timestamp": "0"},
	} {
		resp, err := rawRequest(leader.addr, codeInvokeBrokerToResetOffset, ext, nil, 5*time.Second)
		if err != nil || resp.Code == respSuccess {
			t.Errorf("INVOKE_BROKER_TO_RESET_OFFSET %v: %v %+v; want an error code", ext, err, resp)
		}
	}
}
