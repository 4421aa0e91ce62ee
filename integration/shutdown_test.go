package integration

import (
	"syscall"
	"testing"
	"time"
)

// TestRaftLeaderSIGTERMUnderLoad: SIGTERM of the leader of a 3-node group while producers send.
// The leader hands leadership off, unregisters, keeps forwarding the sends of producers whose
// route still names it (they refresh routes only every 30 s and are never recreated), waits for
// its in-flight sends and exits 0 within the drain bound. Not one send fails, none is lost.
func TestRaftLeaderSIGTERMUnderLoad(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3)
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic := uniq("Sigterm")
	first := sendFirst(t, newProducer(t, &cluster{ns: ns}), topic, "create-topic")
	waitTopicRoute(t, &cluster{ns: ns, b: leader}, topic)

	load := startChaosLoad(t, ns.addr, topic, 2, false)
	load.addRaw(attempt{body: first.body, ok: true}, &first)
	load.waitAcked(100, 20*time.Second, "load acknowledged before the SIGTERM")

	// 35 s drain bound (shutdownDrainMaxMillis) + hand-off + in-flight wait + store close.
	const exitBound = 50 * time.Second
	termAt := time.Now()
	if !leader.signalAndWait(syscall.SIGTERM, exitBound) {
		leader.kill()
		t.Fatalf("leader %s did not exit within %v of SIGTERM", leader.proc.name, exitBound)
	}
	took := time.Since(termAt)
	if err := leader.proc.exitErr; err != nil {
		t.Fatalf("leader exited with %v after SIGTERM; log:\n%s", err, tail(leader.proc.logPath, 4096))
	}
	next := g.waitMaster(t, 20*time.Second, leader)
	load.waitAcked(100, 30*time.Second, "load acknowledged after the leader exited")
	load.stopAndWait()

	attempts, _ := load.snapshot()
	var failed []string
	for _, a := range attempts {
		if !a.ok {
			failed = append(failed, short(a.body)+": "+a.err)
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d sends failed across the SIGTERM of the leader (want 0): %s", len(failed), len(attempts), firstFew(failed))
	}
	res := verifyGroup(t, g, load)
	t.Logf("SIGTERM of leader %s: exited 0 after %v, master now %s; %d sends, %d failed, 0 lost, %d duplicates",
		leader.proc.name, took.Round(time.Millisecond), next.proc.name, res.attempts, len(failed), res.duplicates)
}
