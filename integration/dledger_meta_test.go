package integration

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// Request codes this file uses (remoting/code.go).
const (
	metaCodeUpdateConsumerOffset          = 15
	metaCodeUpdateAndCreateTopic          = 17
	metaCodeGetAllTopicConfig             = 21
	metaCodeGetAllConsumerOffset          = 43
	metaCodeGetAllSubscriptionGroupConfig = 201
)

// TestRaftGroupMetadataSurvivesLeaderKill: topic configs, subscription groups and consumer
// offsets go through Raft in DLedger mode, so a new leader knows them all.
//
//  1. UPDATE_AND_CREATE_TOPIC (6 queues) on the leader; the route shows 6 queues.
//  2. Send set A; a clustering push consumer of group G consumes all of A; wait until the
//     leader's QUERY_CONSUMER_OFFSET shows every queue committed at its end, and until both
//     followers' replicated tables (GET_ALL_CONSUMER_OFFSET answers from the local table) hold
//     the same offsets; stop the consumer; send set B.
//  3. Commit an offset of another group with an acknowledged UPDATE_CONSUMER_OFFSET and kill -9
//     the leader as soon as it answers; wait for the new master, which must have that offset.
//  4. The new leader has the topic with 6/6 queues (GET_ALL_TOPIC_CONFIG), the group
//     (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), and every committed offset (no rollback: the largest
//     rollback is reported and must be 0).
//  5. A new consumer of G receives exactly B plus set C sent after the failover: no message of A
//     again (duplicates counted; with offsets confirmed replicated before the kill, 0 allowed).
//  6. The surviving follower forwards UPDATE_AND_CREATE_TOPIC and UPDATE_CONSUMER_OFFSET to the
//     new leader, and answers QUERY_CONSUMER_OFFSET with the leader's value.
func TestRaftGroupMetadataSurvivesLeaderKill(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3)
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic, group := uniq("RaftMeta"), uniq("GRaftMeta")
	const queues = 6

	resp, err := rawRequest(leader.addr, metaCodeUpdateAndCreateTopic, map[string]string{
		"topic": topic, "readQueueNums": strconv.Itoa(queues), "writeQueueNums": strconv.Itoa(queues), "perm": "6",
		"topicFilterType": "SINGLE_TAG",
	}, nil, 10*time.Second)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("UPDATE_AND_CREATE_TOPIC on the leader: %v %+v", err, resp)
	}
	eventually(t, 20*time.Second, "route of "+topic+" with 6 queues", func() error {
		n, err := queueCount(ns.addr, topic)
		if err != nil {
			return err
		}
		if n != queues {
			return fmt.Errorf("route has %d queues", n)
		}
		return nil
	})

	p := newProducer(t, &cluster{ns: ns})
	setA := bodies(sendSync(t, p, topic, "A", 60, nil))
	c1 := startPushConsumer(t, g.asCluster(leader), group, topic, all)
	eventually(t, 40*time.Second, "first consumer receives set A", func() error {
		return countErr("first consumer", c1.got.count(), len(setA))
	})
	committed := map[int]int64{}
	eventually(t, 30*time.Second, "the leader reports the group's offsets committed at the end of each queue", func() error {
		for q := range queues {
			max, err := maxOffset(leader.addr, topic, q)
			if err != nil {
				return err
			}
			off, found, err := consumerOffset(leader.addr, group, topic, q)
			if err != nil {
				return err
			}
			if max > 0 && (!found || off != max) {
				return fmt.Errorf("queue %d: committed offset %d (found=%v), max offset %d", q, off, found, max)
			}
			if max > 0 {
				committed[q] = off
			}
		}
		return nil
	})
	shown := time.Now()
	for _, f := range g.followers(leader) {
		eventually(t, 10*time.Second, "offsets replicated to "+f.proc.name, func() error {
			tbl, err := allConsumerOffsets(f.addr)
			if err != nil {
				return err
			}
			for q, want := range committed {
				if got, ok := tbl[topic+"@"+group][strconv.Itoa(q)]; !ok || got != want {
					return fmt.Errorf("queue %d: replicated %d (present=%v), leader %d", q, got, ok, want)
				}
			}
			return nil
		})
	}
	t.Logf("offsets on both followers %v after the leader showed them", time.Since(shown).Round(time.Millisecond))
	c1.shutdown()
	if d := diffBodies(setA, c1.got.snapshot()); len(d.missing)+len(d.extra) > 0 {
		t.Fatalf("first consumer: %s", d)
	}
	setB := bodies(sendSync(t, p, topic, "B", 60, nil))
	_ = p.Shutdown()

	// An acknowledged (not oneway) UPDATE_CONSUMER_OFFSET is answered only once replicated: the
	// leader is killed the moment the answer arrives, and the new leader must have the value.
	ackGroup := uniq("GRaftAcked")
	resp, err = rawRequest(leader.addr, metaCodeUpdateConsumerOffset, map[string]string{
		"consumerGroup": ackGroup, "topic": topic, "queueId": "1", "commitOffset": "42",
	}, nil, 10*time.Second)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("UPDATE_CONSUMER_OFFSET on the leader: %v %+v", err, resp)
	}
	leader.kill()
	next := g.waitMaster(t, 15*time.Second, leader)
	if off, found, err := consumerOffset(next.addr, ackGroup, topic, 1); err != nil || !found || off != 42 {
		t.Fatalf("acknowledged offset commit after the leader kill: %d (found=%v, err=%v), want 42", off, found, err)
	}

	resp, err = rawRequest(next.addr, metaCodeGetAllTopicConfig, nil, nil, 5*time.Second)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("GET_ALL_TOPIC_CONFIG on the new leader: %v %+v", err, resp)
	}
	var topics struct {
		TopicConfigTable map[string]struct {
			ReadQueueNums  int `json:"readQueueNums"`
			WriteQueueNums int `json:"writeQueueNums"`
			Perm           int `json:"perm"`
		} `json:"topicConfigTable"`
	}
	if err := json.Unmarshal(resp.Body, &topics); err != nil {
		t.Fatalf("GET_ALL_TOPIC_CONFIG body: %v", err)
	}
	if tc, ok := topics.TopicConfigTable[topic]; !ok || tc.ReadQueueNums != queues || tc.WriteQueueNums != queues || tc.Perm != 6 {
		t.Fatalf("new leader's config of %s: %+v (present=%v), want %d/%d perm 6", topic, tc, ok, queues, queues)
	}
	resp, err = rawRequest(next.addr, metaCodeGetAllSubscriptionGroupConfig, nil, nil, 5*time.Second)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("GET_ALL_SUBSCRIPTIONGROUP_CONFIG on the new leader: %v %+v", err, resp)
	}
	var groups struct {
		SubscriptionGroupTable map[string]json.RawMessage `json:"subscriptionGroupTable"`
	}
	if err := json.Unmarshal(resp.Body, &groups); err != nil {
		t.Fatalf("GET_ALL_SUBSCRIPTIONGROUP_CONFIG body: %v", err)
	}
	if _, ok := groups.SubscriptionGroupTable[group]; !ok {
		t.Fatalf("the new leader does not know group %s", group)
	}
	var rollback int64
	for q, want := range committed {
		off, found, err := consumerOffset(next.addr, group, topic, q)
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			off = 0
		}
		rollback = max(rollback, want-off)
	}
	t.Logf("largest consumer-offset rollback across the failover: %d", rollback)
	if rollback != 0 {
		t.Fatalf("consumer offsets rolled back by up to %d after the failover", rollback)
	}

	p2 := newProducer(t, &cluster{ns: ns})
	setC := []string{sendFirst(t, p2, topic, "C-first").body}
	setC = append(setC, bodies(sendSync(t, p2, topic, "C", 19, nil))...)
	_ = p2.Shutdown()

	want := append(append([]string(nil), setB...), setC...)
	c2 := startPushConsumer(t, g.asCluster(next), group, topic, all)
	eventually(t, 40*time.Second, "second consumer receives sets B and C", func() error {
		return countErr("second consumer", c2.got.count(), len(want))
	})
	time.Sleep(500 * time.Millisecond) // room for redeliveries to show up
	c2.shutdown()
	d := diffBodies(want, c2.got.snapshot())
	t.Logf("second consumer: %d received, %d wanted; %d of set A again, %d duplicates", c2.got.count(), len(want), len(d.extra), len(d.dups))
	if len(d.missing)+len(d.extra)+len(d.dups) > 0 {
		t.Fatalf("second consumer (same group, new leader) should get exactly B and C: %s", d)
	}

	var follower *broker
	for _, b := range g.followers(next) {
		if b != leader {
			follower = b
		}
	}
	topic2, group2 := uniq("RaftMetaFwd"), uniq("GRaftMetaFwd")
	resp, err = rawRequest(follower.addr, metaCodeUpdateAndCreateTopic, map[string]string{
		"topic": topic2, "readQueueNums": "3", "writeQueueNums": "3", "perm": "6",
	}, nil, 10*time.Second)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("UPDATE_AND_CREATE_TOPIC on a follower: %v %+v", err, resp)
	}
	for _, b := range []*broker{next, follower} {
		eventually(t, 5*time.Second, topic2+" on "+b.proc.name, func() error {
			resp, err := rawRequest(b.addr, metaCodeGetAllTopicConfig, nil, nil, 5*time.Second)
			if err != nil {
				return err
			}
			var tt struct {
				TopicConfigTable map[string]struct {
					ReadQueueNums int `json:"readQueueNums"`
				} `json:"topicConfigTable"`
			}
			if err := json.Unmarshal(resp.Body, &tt); err != nil {
				return err
			}
			if tc, ok := tt.TopicConfigTable[topic2]; !ok || tc.ReadQueueNums != 3 {
				return fmt.Errorf("%s: %+v present=%v", b.proc.name, tc, ok)
			}
			return nil
		})
	}
	resp, err = rawRequest(follower.addr, metaCodeUpdateConsumerOffset, map[string]string{
		"consumerGroup": group2, "topic": topic2, "queueId": "1", "commitOffset": "7",
	}, nil, 10*time.Second)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("UPDATE_CONSUMER_OFFSET on a follower: %v %+v", err, resp)
	}
	for _, b := range []*broker{next, follower} { // the follower asks the leader: no lag
		if off, found, err := consumerOffset(b.addr, group2, topic2, 1); err != nil || !found || off != 7 {
			t.Fatalf("QUERY_CONSUMER_OFFSET on %s right after a forwarded commit: %d found=%v %v", b.proc.name, off, found, err)
		}
	}
	eventually(t, 5*time.Second, "the forwarded commit in the follower's replica", func() error {
		tbl, err := allConsumerOffsets(follower.addr)
		if err != nil {
			return err
		}
		if got := tbl[topic2+"@"+group2]["1"]; got != 7 {
			return fmt.Errorf("replica has %d", got)
		}
		return nil
	})
}

// allConsumerOffsets reads a broker's GET_ALL_CONSUMER_OFFSET table ("topic@group" -> queue id
// -> offset), which a broker answers from its own table (a follower: its replica).
func allConsumerOffsets(addr string) (map[string]map[string]int64, error) {
	resp, err := rawRequest(addr, metaCodeGetAllConsumerOffset, nil, nil, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if resp.Code != respSuccess {
		return nil, fmt.Errorf("GET_ALL_CONSUMER_OFFSET: code %d %q", resp.Code, resp.Remark)
	}
	var w struct {
		OffsetTable map[string]map[string]int64 `json:"offsetTable"`
	}
	if err := json.Unmarshal(resp.Body, &w); err != nil {
		return nil, fmt.Errorf("GET_ALL_CONSUMER_OFFSET body: %w", err)
	}
	return w.OffsetTable, nil
}
