package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// countLog counts the occurrences of s in b's log.
func countLog(b *broker, s string) int {
	return strings.Count(tail(b.proc.logPath, 64<<20), s)
}

// TestPreferredLeaderReturns: with preferredLeaderId=n1 on every node, n1 leads soon after the
// start (whoever wins the first election hands over once n1 is caught up); kill -9 of n1 makes
// another node master and sends keep succeeding; after n1's restart leadership comes back to it
// within a bounded time. Raw sends run throughout; none acknowledged is lost.
func TestPreferredLeaderReturns(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	start := time.Now()
	g := startRaftGroup(t, ns, 3, withProp("preferredLeaderId", "n1"))
	preferred := g.nodes[1]
	waitPreferred := func(what string, timeout time.Duration) time.Duration {
		t.Helper()
		begin := time.Now()
		eventually(t, timeout, what, func() error {
			addrs, err := routeAddrs(ns.addr, "TBW102")
			if err != nil {
				return err
			}
			if addrs[0] != preferred.addr {
				return fmt.Errorf("route master %q, want n1 at %s (route %v)", addrs[0], preferred.addr, addrs)
			}
			if s, err := raftStatusOf(preferred.addr); err != nil || !s.LeaderReady {
				return fmt.Errorf("n1 is not the ready leader: %v %+v", err, s)
			}
			return nil
		})
		return time.Since(begin)
	}
	waitPreferred("n1 leads after the start", 20*time.Second)
	t.Logf("n1 (preferredLeaderId) is master %v after the group started", time.Since(start).Round(time.Millisecond))

	topic := uniq("Preferred")
	acked := []sent{sendRawOK(t, preferred.addr, topic, "create-topic")}
	waitTopicRoute(t, &cluster{ns: ns, b: preferred}, topic)
	tr := startTrickle(g, topic, 20*time.Millisecond)

	preferred.kill()
	killed := time.Now()
	next := g.waitMaster(t, 10*time.Second, preferred)
	t.Logf("kill -9 of n1: %s is master after %v", next.proc.name, time.Since(killed).Round(time.Millisecond))
	for i := range 3 {
		acked = append(acked, sendRawOK(t, next.addr, topic, fmt.Sprintf("while-n1-down-%d", i)))
	}

	preferred.restart()
	back := waitPreferred("leadership back to n1 after its restart", 20*time.Second)
	t.Logf("n1 restarted and registered; master again %v later (%v after the kill)", back.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	acked = append(acked, sendRawOK(t, preferred.addr, topic, "after-return"))
	trickled, failed := tr.halt()
	acked = append(acked, trickled...)
	if len(trickled) == 0 {
		t.Fatalf("no trickle send was acknowledged (%d failed)", failed)
	}
	handed := 0
	for _, b := range g.nodes {
		handed += countLog(b, "leadership handed to the preferred leader")
	}
	if handed < 1 {
		t.Fatalf("no node logged a hand-over to the preferred leader")
	}

	queues := routedQueues(t, ns.addr, topic)
	for _, b := range g.nodes {
		waitQueuesEqual(t, preferred, b, topic, queues, 20*time.Second)
		checkAcked(t, b.proc.name, readQueues(t, b.addr, topic, queues), acked)
	}
	t.Logf("preferred leader: %d sends acknowledged (%d failed attempts during the changes), 0 lost on 3 nodes; %d hand-over(s) to n1",
		len(acked), failed, handed)
}
