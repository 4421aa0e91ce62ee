package integration

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	first := createTopicBySend(t, ns.addr, newProducer(t, &cluster{ns: ns}), topic, "create-topic")
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

// TestSIGTERMLeaderlessNodeExits: SIGTERM of the last running member of a three-node group,
// which has no leader, exits within shutdownDrainMaxMillis plus leaderlessExitGrace, releasing
// its store lock; started again on the same data directory it opens the store and serves. Two
// ways to lose the leader: the other two members killed (-9; the survivor was the leader), and
// the other two stopped (SIGSTOP: they accept connections but never answer, so Raft's vote
// requests to them wait for the transport's deadline).
func TestSIGTERMLeaderlessNodeExits(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"killed", "stopped"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			const drain = 2 * time.Second
			ns := startNamesrv(t)
			g := startRaftGroup(t, ns, 3, withProp("shutdownDrainMaxMillis", fmt.Sprint(drain.Milliseconds())))
			survivor := g.waitMaster(t, 20*time.Second, nil)
			others := g.followers(survivor)
			for _, o := range others {
				if how == "killed" {
					o.kill()
				} else {
					if !o.proc.signal(syscall.SIGSTOP) {
						t.Fatalf("SIGSTOP %s: not running", o.proc.name)
					}
					t.Cleanup(func() { o.proc.signal(syscall.SIGCONT) })
				}
			}
			eventually(t, 10*time.Second, "the survivor without a leader", func() error {
				rs, err := raftStatusOf(survivor.addr)
				if err != nil {
					return err
				}
				if rs.LeaderID != "" || rs.Role == "leader" {
					return fmt.Errorf("%s is %s and sees leader %q", survivor.proc.name, rs.Role, rs.LeaderID)
				}
				return nil
			})

			const leaderlessExitGrace = 15 * time.Second
			termAt := time.Now()
			if !survivor.signalAndWait(syscall.SIGTERM, drain+leaderlessExitGrace) {
				survivor.signalAndWait(syscall.SIGQUIT, 10*time.Second) // stacks in its log
				t.Fatalf("%s (leaderless, %s peers) did not exit within %v of SIGTERM", survivor.proc.name, how, drain+leaderlessExitGrace)
			}
			took := time.Since(termAt)
			exit := survivor.proc.exitErr
			lock := filepath.Join(survivor.storeRoot, "dledger-"+survivor.props["dLegerSelfId"], "store", "lock")
			if err := tryLock(lock); err != nil {
				t.Fatalf("store lock after the exit: %v", err)
			}

			// Same data directory again: it opens the store and, with a peer back, serves.
			if how == "stopped" {
				for _, o := range others {
					o.proc.signal(syscall.SIGCONT)
				}
			} else {
				others[0].start(t)
			}
			survivor.start(t)
			if err := survivor.waitReady(30 * time.Second); err != nil {
				t.Fatalf("%s after restart on the same data directory: %v", survivor.proc.name, err)
			}
			t.Logf("leaderless %s (peers %s): exited after %v of SIGTERM (shutdownDrainMaxMillis %v, bound %v), exit %v; store lock free; restarted and registered",
				survivor.proc.name, how, took.Round(time.Millisecond), drain, drain+leaderlessExitGrace, exit)
		})
	}
}

// tryLock takes and releases the flock the store holds on path (storage/vfs/os.go): nil when no
// process holds it.
func tryLock(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%s is still locked", path)
		}
		return fmt.Errorf("flock %s: %w", path, err)
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
