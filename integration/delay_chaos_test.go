package integration

// Delayed messages and retries across leader kills in a three-node DLedger group: a delivery
// step and the progress it advances are one Raft entry (broker/schedule.go, fsm/schedule.go),
// so a new leader continues exactly where the old one's committed steps stopped.
//
// RR_CHAOS_DELAY_KILLS sets the number of leader kills of TestChaosDelayedAcrossLeaderKills
// (default 2; make chaos: CHAOS_DELAY_KILLS, 8).

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// chaosDelayLevels are short levels so everything sent is due soon after the last kill.
const chaosDelayLevels = "1s 2s 3s 4s"

// TestChaosDelayedAcrossLeaderKills: delayed messages (levels 1-4) are sent all along while the
// leader is killed (-9) and restarted several times. Afterwards every acknowledged message is in
// its real topic, every stored schedule record was delivered exactly once (a duplicate in the
// real topic must be a duplicate send, i.e. twice in SCHEDULE_TOPIC_XXXX too), none was
// delivered before its due time, and the nodes agree.
func TestChaosDelayedAcrossLeaderKills(t *testing.T) {
	t.Parallel()
	kills := 2
	if v := os.Getenv("RR_CHAOS_DELAY_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("RR_CHAOS_DELAY_KILLS=%q: want a positive integer", v)
		}
		kills = n
	}
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, withProp("messageDelayLevel", chaosDelayLevels),
		withProp("dLegerSnapshotIntervalSec", "2"), withProp("dLegerSnapshotThreshold", "256"))
	g.waitMaster(t, 20*time.Second, nil)
	topic := uniq("ChaosDelay")

	p := newProducer(t, &cluster{ns: ns})
	var (
		mu      sync.Mutex
		acked   = map[string]int{} // body -> level
		sendErr atomic.Int64
		stop    = make(chan struct{})
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			body, level := fmt.Sprintf("d-%d", i), 1+i%4
			m := primitive.NewMessage(topic, []byte(body))
			m.WithDelayTimeLevel(level)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			r, err := p.SendSync(ctx, m)
			cancel()
			if err != nil || r.Status != primitive.SendOK {
				sendErr.Add(1)
				time.Sleep(50 * time.Millisecond)
				continue
			}
			mu.Lock()
			acked[body] = level
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()

	started := time.Now()
	for k := 1; k <= kills; k++ {
		time.Sleep(3 * time.Second)
		leader := g.waitMaster(t, 20*time.Second, nil)
		killedAt := time.Now()
		leader.kill()
		next := g.waitMaster(t, 20*time.Second, leader)
		t.Logf("delay kill %d/%d: %s killed, %s master after %v", k, kills, leader.addr, next.addr, time.Since(killedAt).Round(time.Millisecond))
		time.Sleep(time.Second)
		leader.restart()
	}
	time.Sleep(2 * time.Second)
	close(stop)
	<-done
	_ = p.Shutdown()
	mu.Lock()
	nAcked := len(acked)
	mu.Unlock()
	t.Logf("sent for %v: %d acknowledged, %d failed attempts", time.Since(started).Round(time.Second), nAcked, sendErr.Load())
	if nAcked == 0 {
		t.Fatal("nothing acknowledged")
	}

	leader := g.waitMaster(t, 20*time.Second, nil)
	eventually(t, 60*time.Second, "every level delivered through its end on the leader", func() error {
		offs, err := delayOffsets(leader.addr)
		if err != nil {
			return err
		}
		for level := 1; level <= 4; level++ {
			end, err := maxOffset(leader.addr, scheduleTopic, level-1)
			if err != nil {
				return err
			}
			if offs[level] != end {
				return fmt.Errorf("level %d delivered through %d of %d", level, offs[level], end)
			}
		}
		return nil
	})

	// What was scheduled (per body: store times) and what was delivered, on the leader.
	scheduled := map[string][]int64{}
	for q := 0; q < 4; q++ {
		recs, err := readQueue(leader.addr, scheduleTopic, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Properties["REAL_TOPIC"] == topic {
				scheduled[string(r.Body)] = append(scheduled[string(r.Body)], r.StoreTimestamp)
			}
		}
	}
	queues := routedQueues(t, ns.addr, topic)
	delivered := map[string][]*record{}
	for q := 0; q < queues; q++ {
		recs, err := readQueue(leader.addr, topic, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			delivered[string(r.Body)] = append(delivered[string(r.Body)], r)
		}
	}
	levels := []int64{1000, 2000, 3000, 4000}
	var lost, dups, mismatched, early int
	for body := range acked {
		if len(delivered[body]) == 0 {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged %s was never delivered (scheduled %d times)", body, len(scheduled[body]))
			}
		}
	}
	for body, recs := range delivered {
		if len(recs) != len(scheduled[body]) {
			mismatched++
			if mismatched <= 5 {
				t.Errorf("%s: delivered %d times, scheduled %d times", body, len(recs), len(scheduled[body]))
			}
		}
		dups += len(recs) - 1
		first := slices.Min(scheduled[body])
		for _, r := range recs {
			level := acked[body]
			if level == 0 {
				continue // a send whose answer was lost: its level is unknown here
			}
			if r.StoreTimestamp-first < levels[level-1] {
				early++
				t.Errorf("%s (level %d) delivered %d ms after it was stored", body, level, r.StoreTimestamp-first)
			}
		}
	}
	t.Logf("CHAOS delay: %d kills, %d acknowledged, %d scheduled bodies, %d delivered bodies, lost %d, duplicate deliveries %d (each a duplicate send: scheduled twice), delivered early %d",
		kills, nAcked, len(scheduled), len(delivered), lost, dups, early)

	// Every node holds the same deliveries.
	g.waitOffsetsConverged(t, 30*time.Second, leader, topic, queues)
	for _, b := range g.nodes {
		for q := 0; q < queues; q++ {
			ref, err1 := readQueue(leader.addr, topic, q)
			got, err2 := readQueue(b.addr, topic, q)
			if err1 != nil || err2 != nil {
				t.Fatalf("read %s/%d: %v %v", topic, q, err1, err2)
			}
			if !slices.EqualFunc(ref, got, sameRecord) {
				t.Fatalf("%s: queue %d differs from the leader's", b.proc.name, q)
			}
		}
	}
}

// TestChaosRetryAcrossLeaderKill: a message a consumer keeps failing is redelivered and reaches
// the DLQ even though the leader is killed (-9) while the second retry copy waits in
// SCHEDULE_TOPIC_XXXX: the copy and its level's progress are replicated, and the new leader
// delivers it.
func TestChaosRetryAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	// Level 4 (the second retry: 3 + reconsumeTimes 1) is 5 s, so the kill comes while the
	// retry copy waits in SCHEDULE_TOPIC_XXXX, after the consumer's send-back was answered.
	g := startRaftGroup(t, ns, 3, withProp("messageDelayLevel", "1s 5s 1s 5s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"))
	leader := g.waitMaster(t, 20*time.Second, nil)
	checkRetryToDLQ(t, g.asCluster(leader), func() *broker {
		time.Sleep(time.Second)
		old := g.waitMaster(t, 20*time.Second, nil)
		killedAt := time.Now()
		old.kill()
		next := g.waitMaster(t, 20*time.Second, old)
		t.Logf("retry: killed leader %s; %s master after %v", old.addr, next.addr, time.Since(killedAt).Round(time.Millisecond))
		old.restart()
		return next
	})
}
