package integration

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// TestCommittedOffsetsSurviveRestart (g): a group's committed consumer offsets survive a broker
// restart.
//
//  1. Send set A; a push consumer of group G (from the first offset) consumes all of A.
//  2. Wait until the broker reports (QUERY_CONSUMER_OFFSET) G's committed offset on every
//     queue equal to the queue's max offset: the client commits every 5 s and on shutdown,
//     so waiting for the broker's own answer keeps the test independent of that timing.
//  3. Stop the consumer, send set B, stop the broker (SIGTERM) and start it again on the same
//     data directory.
//  4. The committed offsets read back unchanged, and a new consumer of G receives exactly B.
//
// No duplicates are allowed: every offset of A was confirmed committed before the restart,
// so a redelivered A message means an offset was lost (the consumer starts from the first
// offset when none is stored, so a lost offset shows as redelivery).
func TestCommittedOffsetsSurviveRestart(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	topic := uniq("Offsets")
	group := uniq("GOffsets")
	p := newProducer(t, c)
	setA := bodies(sendSync(t, p, topic, "A", 40, nil))

	c1 := startPushConsumer(t, c, group, topic, all)
	eventually(t, 60*time.Second, "first consumer receives set A", func() error {
		return countErr("first consumer", c1.got.count(), len(setA))
	})
	committed := map[int]int64{}
	eventually(t, 30*time.Second, "broker reports the group's offsets committed at the end of each queue", func() error {
		for q := range 4 {
			max, err := maxOffset(c.b.addr, topic, q)
			if err != nil {
				return err
			}
			off, found, err := consumerOffset(c.b.addr, group, topic, q)
			if err != nil {
				return err
			}
			if max > 0 && (!found || off != max) {
				return fmt.Errorf("queue %d: committed offset %d (found=%v), max offset %d", q, off, found, max)
			}
			committed[q] = off
		}
		return nil
	})
	c1.shutdown()
	if d := diffBodies(setA, c1.got.snapshot()); len(d.missing)+len(d.extra)+len(d.dups) > 0 {
		t.Fatalf("first consumer: %s", d)
	}

	setB := bodies(sendSync(t, p, topic, "B", 40, nil))
	if err := c.b.stop(); err != nil {
		t.Fatalf("stopping the broker: %v", err)
	}
	c.b.restart()

	for q, want := range committed {
		off, found, err := consumerOffset(c.b.addr, group, topic, q)
		if err != nil {
			t.Fatalf("after restart, QUERY_CONSUMER_OFFSET queue %d: %v", q, err)
		}
		if want > 0 && (!found || off != want) {
			t.Errorf("after restart, queue %d committed offset is %d (found=%v), was %d", q, off, found, want)
		}
	}

	c2 := startPushConsumer(t, c, group, topic, all)
	eventually(t, 60*time.Second, "second consumer receives set B", func() error {
		return countErr("second consumer", c2.got.count(), len(setB))
	})
	c2.shutdown()
	if d := diffBodies(setB, c2.got.snapshot()); len(d.missing)+len(d.extra)+len(d.dups) > 0 {
		t.Errorf("second consumer (same group, after restart) should get exactly set B: %s", d)
	}
}

// TestPullCommitNeverStepsBack: the commit offset a pull carries never moves a queue's committed
// offset back, in classic mode and on a DLedger leader. A client builds each pull with its
// current offset and the broker serves pulls concurrently with the same connection's
// UPDATE_CONSUMER_OFFSET requests, so a pull built before the client's last persist can be
// served after it; the chaos suite's offset watcher once saw a committed offset go back by one
// that way with no failover near. An explicit UPDATE_CONSUMER_OFFSET still moves it back (resets).
func TestPullCommitNeverStepsBack(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, addr string) {
		topic, group := uniq("PullCommit"), uniq("GPullCommit")
		sendRawOK(t, addr, topic, "one")
		update := func(off int64) {
			t.Helper()
			resp, err := rawRequest(addr, metaCodeUpdateConsumerOffset, map[string]string{
				"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": strconv.FormatInt(off, 10),
			}, nil, 10*time.Second)
			if err != nil || resp.Code != respSuccess {
				t.Fatalf("UPDATE_CONSUMER_OFFSET %d: %v %+v", off, err, resp)
			}
		}
		pullCommitting := func(commit int64) {
			t.Helper()
			resp, err := rawRequest(addr, codePullMessage, map[string]string{
				"consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "0", "maxMsgNums": "1",
				"sysFlag":      "5", // commit offset + subscription, no suspend
				"commitOffset": strconv.FormatInt(commit, 10), "suspendTimeoutMillis": "0",
				"subscription": "*", "subVersion": "0", "expressionType": "TAG",
			}, nil, 10*time.Second)
			if err != nil || resp.Code != respSuccess {
				t.Fatalf("PULL_MESSAGE committing %d: %v %+v", commit, err, resp)
			}
		}
		expect := func(what string, want int64) {
			t.Helper()
			off, found, err := consumerOffset(addr, group, topic, 0)
			if err != nil || !found || off != want {
				t.Fatalf("%s: committed offset %d (found=%v, err=%v), want %d", what, off, found, err, want)
			}
		}
		update(5)
		pullCommitting(3)
		expect("a pull committing 3 after an update to 5", 5)
		pullCommitting(7)
		expect("a pull committing 7", 7)
		update(2)
		expect("an update to 2 (a reset)", 2)
		pullCommitting(2)
		expect("a pull committing the same offset", 2)
	}
	t.Run("classic", func(t *testing.T) {
		c := startCluster(t)
		check(t, c.b.addr)
	})
	t.Run("dledger", func(t *testing.T) {
		g := startRaftGroup(t, startNamesrv(t), 1)
		check(t, g.waitMaster(t, 30*time.Second, nil).addr)
	})
}
