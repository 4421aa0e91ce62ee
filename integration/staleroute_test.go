package integration

import (
	"strings"
	"testing"
	"time"
)

// TestRaftGroupStaleRouteAfterTransfer: producers keep the route they read at start (the client
// refreshes routes only every 30 s) while leadership is transferred twice; their sends keep going
// to the old leader, which forwards them to the new one: not one send fails, none is lost.
func TestRaftGroupStaleRouteAfterTransfer(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, withProp("allowUnauthenticatedRaftAdmin", "true"))
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic := uniq("StaleRoute")
	first := createTopicBySend(t, ns.addr, newProducer(t, &cluster{ns: ns}), topic, "create-topic")
	waitTopicRoute(t, &cluster{ns: ns, b: leader}, topic)

	load := startChaosLoad(t, ns.addr, topic, 2, false) // never replaced: the route stays stale
	started := time.Now()
	load.addRaw(attempt{body: first.body, ok: true}, &first)
	load.waitAcked(100, 20*time.Second, "load acknowledged before the transfers")

	prev := leader
	for _, target := range g.followers(leader) {
		id := target.props["dLegerSelfId"]
		out := mqadminRaft(t, ns.addr, "transferLeader", "-b", g.name, "-t", id)
		if !strings.Contains(out, "success") {
			t.Fatalf("transferLeader to %s:\n%s", id, out)
		}
		if next := g.waitMaster(t, 10*time.Second, prev); next != target {
			t.Fatalf("after the transfer to %s the registered master is %s", id, next.proc.name)
		}
		prev = target
		load.waitAcked(100, 20*time.Second, "load acknowledged after the transfer to "+id)
	}
	stale := time.Since(started)
	load.stopAndWait()
	if stale >= 30*time.Second {
		t.Logf("warning: the transfers took %v; the producers may have refreshed their routes", stale.Round(time.Millisecond))
	}

	attempts, _ := load.snapshot()
	var failed []string
	for _, a := range attempts {
		if !a.ok {
			failed = append(failed, short(a.body)+": "+a.err)
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d sends failed with a stale route (want 0): %s", len(failed), len(attempts), firstFew(failed))
	}
	res := verifyGroup(t, g, load)
	t.Logf("stale route: %d sends over two leadership transfers within %v of the producers' start, %d failed, 0 lost, %d duplicates",
		res.attempts, stale.Round(time.Millisecond), len(failed), res.duplicates)
}
