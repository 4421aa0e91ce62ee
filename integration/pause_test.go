package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Leader pauses: SIGSTOP of the leader for around and beyond the election timeout under
// continuous sync sends, then SIGCONT. The survivors elect a new leader; the resumed node must
// become a follower without ever writing an entry the group did not commit. This is the fault
// that diverged a replica when heartbeats took hashicorp/raft's fast path beside the leader loop
// (dledger/transport.go): the resumed leader stamped its in-flight batch with the new leader's
// term at the index of the new leader's no-op, and Raft's log matching never repaired it.
//
// After every pause the test checks, while the load goes on, that no node reports a failed
// digest check (raftStatus) and that the nodes' commitlogs are byte-identical over the prefix
// every node has applied; at the end verifyGroup reads every queue on every node (0 lost,
// duplicates explained) and compares the stopped nodes' commitlogs.
//
//	RR_PAUSES            pauses of the leader (default 4; make chaos: 50)
//	RR_PAUSE_PRODUCERS   sync producers (default 4): more of them leave more sends waiting in the
//	                     paused leader's sockets, for it to propose the moment it resumes
//	RR_PAUSE_LENGTHS     comma-separated pause lengths to cycle instead of pauseLengths

// pauseLengths cycles through lengths around the election timeout (500 ms, randomised to 0.5-1 s)
// and well beyond it.
var pauseLengths = []time.Duration{400 * time.Millisecond, 800 * time.Millisecond, 1500 * time.Millisecond, 3 * time.Second, 8 * time.Second}

// signal sends sig to the process's current run (by PID); false if it is not running.
func (p *proc) signal(sig syscall.Signal) bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
	}
	return syscall.Kill(cmd.Process.Pid, sig) == nil
}

// pauseProc stops p with SIGSTOP for d, then resumes it. A test that fails meanwhile still
// resumes it (cleanup), so its SIGTERM can be handled.
func pauseProc(t testing.TB, p *proc, d time.Duration) {
	t.Helper()
	if !p.signal(syscall.SIGSTOP) {
		t.Fatalf("%s: SIGSTOP: not running", p.name)
	}
	defer p.signal(syscall.SIGCONT)
	time.Sleep(d)
}

// envInt is the integer in environment variable key, def when it is unset; anything but a
// non-negative integer fails the test.
func envInt(t testing.TB, key string, def int) int {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", key, v)
	}
	return n
}

// envPositive is envInt for counts that must be at least 1 (kills, rounds).
func envPositive(t testing.TB, key string, def int) int {
	t.Helper()
	n := envInt(t, key, def)
	if n < 1 {
		t.Fatalf("%s=%d: want a positive integer", key, n)
	}
	return n
}

// divergence reports a node whose digest check failed, or commitlogs that differ over the prefix
// every node has applied: "" when the replicas agree.
func divergence(g *raftGroup) (string, error) {
	limit := int64(-1)
	for _, b := range g.nodes {
		rs, err := raftStatusOf(b.addr)
		if err != nil {
			return "", err
		}
		if rs.Diverged != nil {
			return fmt.Sprintf("%s reports a failed digest check: %s", b.proc.name, rs.Diverged.Message), nil
		}
		if limit < 0 || rs.CommitLogMaxOffset < limit {
			limit = rs.CommitLogMaxOffset
		}
	}
	// Bytes below each node's reported end were written before it was reported: stable to read.
	ref := g.nodes[0]
	for _, b := range g.nodes[1:] {
		if at, name, _, err := firstDifference(ref, b, limit); err != nil {
			return "", err
		} else if at >= 0 {
			return fmt.Sprintf("commitlog %s differs between %s and %s at byte %d (common applied prefix %d bytes)", name, ref.proc.name, b.proc.name, at, limit), nil
		}
	}
	return "", nil
}

// firstDifference compares a's and b's commitlogs over [0, limit), file by file (a file's name is
// its base offset): the offset within the first differing file and its name, or -1; and the
// bytes compared. A file of a's that b lacks is an error.
func firstDifference(a, b *broker, limit int64) (at int64, name string, compared int64, err error) {
	entries, err := os.ReadDir(commitLogDir(a))
	if err != nil {
		return 0, "", 0, err
	}
	for _, e := range entries {
		base, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || base >= limit {
			continue
		}
		x, err := os.ReadFile(filepath.Join(commitLogDir(a), e.Name()))
		if err != nil {
			return 0, "", compared, err
		}
		y, err := os.ReadFile(filepath.Join(commitLogDir(b), e.Name()))
		if err != nil {
			return 0, "", compared, fmt.Errorf("%s has commitlog file %s, %s has not: %w", a.proc.name, e.Name(), b.proc.name, err)
		}
		n := min(int64(len(x)), int64(len(y)), limit-base)
		if !bytes.Equal(x[:n], y[:n]) {
			at := int64(0)
			for at < n && x[at] == y[at] {
				at++
			}
			return at, e.Name(), compared, nil
		}
		compared += n
	}
	return -1, "", compared, nil
}

// TestChaosLeaderPause pauses the leader RR_PAUSES times under RR_PAUSE_PRODUCERS sync producers.
func TestChaosLeaderPause(t *testing.T) {
	t.Parallel()
	pauses := envInt(t, "RR_PAUSES", 4)
	producers := envInt(t, "RR_PAUSE_PRODUCERS", 4)
	lengths := pauseLengths
	if v := os.Getenv("RR_PAUSE_LENGTHS"); v != "" {
		lengths = nil
		for _, f := range strings.Split(v, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(f))
			if err != nil || d <= 0 {
				t.Fatalf("RR_PAUSE_LENGTHS=%q: %q is not a positive duration", v, f)
			}
			lengths = append(lengths, d)
		}
	}
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, chaosProps(nil)...)
	g.waitMaster(t, 20*time.Second, nil)
	topic := uniq("ChaosLeaderPause")
	first := createTopicBySend(t, ns.addr, newProducer(t, &cluster{ns: ns}), topic, "create-topic")
	load := startChaosLoad(t, ns.addr, topic, max(1, producers), true)
	load.addRaw(attempt{body: first.body, ok: true}, &first)
	load.waitAcked(100, 30*time.Second, "load acknowledged before the first pause")

	var toMaster durations
	var diverged []string
	for k := 1; k <= pauses; k++ {
		leader := g.waitMaster(t, 20*time.Second, nil)
		d := lengths[(k-1)%len(lengths)]
		paused := time.Now()
		pauseProc(t, leader.proc, d)
		// The group serves again (a new leader if the pause outlasted the election timeout),
		// and the resumed node has caught up as a follower or is the leader again.
		master := g.waitMaster(t, 20*time.Second, nil)
		toMaster = append(toMaster, time.Since(paused))
		load.waitAcked(50, 30*time.Second, fmt.Sprintf("load acknowledged after pause %d", k))
		// Within 200 entries of the leader: the load goes on meanwhile.
		eventually(t, 30*time.Second, "the resumed node caught up", func() error { return caughtUpWith(master, leader, 200) })
		msg, err := divergence(g)
		if err != nil {
			t.Fatalf("pause %d: checking the replicas: %v", k, err)
		}
		if msg != "" {
			diverged = append(diverged, fmt.Sprintf("pause %d (%v): %s", k, d, msg))
			t.Errorf("pause %d/%d of %s for %v: REPLICAS DIVERGED: %s", k, pauses, leader.proc.name, d, msg)
			break
		}
		t.Logf("pause %d/%d: SIGSTOP of leader %s for %v -> master %s, group serving %v after the pause began; replicas identical",
			k, pauses, leader.proc.name, d, master.proc.name, time.Since(paused).Round(time.Millisecond))
	}
	if len(diverged) > 0 {
		load.stopAndWait()
		t.Fatalf("CHAOS leader-pause: %d divergence(s): %v", len(diverged), diverged)
	}
	res := verifyGroup(t, g, load)
	t.Logf("CHAOS leader-pause: %d pauses of the leader (%v cycled), 0 divergences; messages sent %d (failed attempts %d), acknowledged %d, lost 0, duplicates %d (each explained by a failed attempt and its retry); commitlogs byte-identical over %d bytes",
		pauses, lengths, res.distinct, res.failedAttempts, res.acked, res.duplicates, res.commitLogBytes)
	t.Logf("CHAOS leader-pause: pause start -> a registered master after the resume: %v", toMaster)
}
