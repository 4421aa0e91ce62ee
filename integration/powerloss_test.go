package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"rocketraft/internal/lazyfs"
)

// Power loss. Each node's whole data directory (Raft log, stable store, snapshots, commitlog,
// consume queues, checkpoint, metadata) lives on a lazyfs mount (internal/lazyfs), which keeps
// every write not yet fsynced aside. A power loss of a set of nodes stops them (SIGSTOP), drops
// their unsynced writes at one instant (optionally keeping each unsynced 4 KiB page with
// probability 1/2: writeback torn in arbitrary order), kills them, remounts their file systems
// and starts them again. Every node must start by itself (no "rebuild it" refusal), the group
// must serve again within 30 s of the restart, and at the end verifyGroup checks 0 acknowledged
// messages lost, every duplicate explained, replicas byte-identical.
//
//	RR_POWERLOSS_ROUNDS   coordinated power losses of all three nodes (default 3; make chaos: 21),
//	                      cycling through default settings, frequent snapshots and torn writeback
//	RR_POWERLOSS_SINGLE   power losses of the leader alone and of one follower alone, each
//	                      (default 1; make chaos: 3)

// lazyRoot is one node's data directory on a lazyfs mount that can lose power.
type lazyRoot struct {
	backing, mnt string
	mu           sync.Mutex
	fs           *lazyfs.FS
}

// mountLazyRoots mounts n lazyfs file systems (unmounted in cleanup, after the brokers using
// them have stopped: register this before starting them). A machine where FUSE cannot be
// mounted fails the test: the lab needs root and /dev/fuse.
func mountLazyRoots(t testing.TB, n int) []*lazyRoot {
	t.Helper()
	var roots []*lazyRoot
	for range n {
		base := t.TempDir()
		r := &lazyRoot{backing: filepath.Join(base, "backing"), mnt: filepath.Join(base, "mnt")}
		for _, d := range []string{r.backing, r.mnt} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		r.mount(t)
		t.Cleanup(func() { r.unmount(t) })
		roots = append(roots, r)
	}
	return roots
}

// unmount takes the file system off its mountpoint. A FUSE server that outlives a completed
// unmount (seen under make chaos, where other tests keep the disk busy) is logged and left to
// finish by itself: its file system is dead (it changes nothing) and no longer mounted, so a
// new mount on the same backing directory is unaffected. A mountpoint still mounted fails.
func (r *lazyRoot) unmount(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.fs.Unmount()
	if err == nil {
		return
	}
	if mounted(r.mnt) {
		t.Fatalf("unmount lazyfs at %s: %v (still mounted)", r.mnt, err)
	}
	t.Logf("unmount lazyfs at %s: %v; it is no longer mounted, going on", r.mnt, err)
}

// mounted reports whether path is a mount point of this process's namespace.
func mounted(path string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

func (r *lazyRoot) mount(t testing.TB) {
	t.Helper()
	// A generous bound on unmounting: under make chaos the disk is kept busy by another test,
	// and the FUSE server's handlers can wait seconds on the backing file system before they
	// all return (5 s, lazyfs's default, was once too short there).
	fs, err := lazyfs.Mount(r.backing, r.mnt, lazyfs.Options{UnmountWait: 30 * time.Second})
	if err != nil {
		t.Fatalf("the power-loss lab cannot mount its FUSE file system (it needs root and /dev/fuse; in a container, --device /dev/fuse --cap-add SYS_ADMIN): %v", err)
	}
	r.mu.Lock()
	r.fs = fs
	r.mu.Unlock()
}

// withLazyRoots puts node nI's store on roots[I].
func withLazyRoots(roots []*lazyRoot) brokerOpt {
	return func(b *broker) {
		i, err := strconv.Atoi(strings.TrimPrefix(b.props["dLegerSelfId"], "n"))
		if err != nil || i >= len(roots) {
			b.t.Fatalf("no lazyfs root for %q", b.props["dLegerSelfId"])
		}
		b.storeRoot = filepath.Join(roots[i].mnt, "store")
		b.props["storePathRootDir"] = b.storeRoot
	}
}

// powerLossMode is one round's settings.
type powerLossMode struct {
	name      string
	keep      float64           // probability an unsynced page survives
	snapshots map[string]string // snapshot keys set before the restart
}

var powerLossModes = []powerLossMode{
	{name: "defaults", snapshots: map[string]string{"dLegerSnapshotIntervalSec": "120", "dLegerSnapshotThreshold": "8192"}},
	{name: "frequent snapshots", snapshots: map[string]string{"dLegerSnapshotIntervalSec": "1", "dLegerSnapshotThreshold": "16"}},
	{name: "torn writeback", keep: 0.5, snapshots: map[string]string{"dLegerSnapshotIntervalSec": "1", "dLegerSnapshotThreshold": "16"}},
}

// powerLoss cuts the power of nodes at one instant, then restarts them (with mode's settings)
// and returns when the group has a master and the load has been acknowledged again, and how
// long that took from the restart.
func powerLoss(t testing.TB, g *raftGroup, roots []*lazyRoot, nodes []*broker, mode powerLossMode, rng *rand.Rand, load *chaosLoad) (time.Duration, lazyfs.PowerLossStats) {
	t.Helper()
	for _, b := range nodes {
		if !b.proc.signal(syscall.SIGSTOP) {
			t.Fatalf("%s is not running", b.proc.name)
		}
	}
	var lost lazyfs.PowerLossStats
	for _, b := range nodes {
		r := roots[nodeIndex(t, b)]
		st := r.fs.PowerLoss(mode.keep, rng)
		lost.PagesDropped += st.PagesDropped
		lost.PagesKept += st.PagesKept
		lost.Files += st.Files
	}
	for _, b := range nodes {
		b.kill()
		r := roots[nodeIndex(t, b)]
		r.unmount(t)
		r.mount(t)
		for k, v := range mode.snapshots {
			b.props[k] = v
		}
		b.writeConfig()
	}
	restarted := time.Now()
	for _, b := range nodes {
		b.start(t)
	}
	for _, b := range nodes {
		if err := b.waitReady(30 * time.Second); err != nil {
			t.Fatalf("%s did not start by itself within 30 s of the power loss: %v", b.proc.name, err)
		}
	}
	g.waitMaster(t, 30*time.Second, nil)
	load.waitAcked(20, 30*time.Second, "sends acknowledged again after the power loss")
	back := time.Since(restarted)
	if back > 30*time.Second {
		t.Errorf("the group served again %v after the restart (want <= 30 s)", back)
	}
	return back, lost
}

func nodeIndex(t testing.TB, b *broker) int {
	i, err := strconv.Atoi(strings.TrimPrefix(b.props["dLegerSelfId"], "n"))
	if err != nil {
		t.Fatalf("node id %q", b.props["dLegerSelfId"])
	}
	return i
}

// TestChaosPowerLoss runs coordinated power losses of the whole group, then of the leader alone
// and of a follower alone, under two sync producers.
func TestChaosPowerLoss(t *testing.T) {
	t.Parallel()
	rounds := envInt(t, "RR_POWERLOSS_ROUNDS", 3)
	singles := envInt(t, "RR_POWERLOSS_SINGLE", 1)
	roots := mountLazyRoots(t, 3)
	ns := startNamesrv(t)
	opts := []brokerOpt{
		withLazyRoots(roots),
		withProp("mappedFileSizeCommitLog", strconv.Itoa(1<<20)),
		withProp("mapedFileSizeConsumeQueue", strconv.Itoa(3000*20)),
	}
	g := startRaftGroup(t, ns, 3, opts...)
	g.waitMaster(t, 20*time.Second, nil)
	topic := uniq("ChaosPowerLoss")
	first := createTopicBySend(t, ns.addr, newProducer(t, &cluster{ns: ns}), topic, "create-topic")
	load := startChaosLoad(t, ns.addr, topic, 2, true)
	load.addRaw(attempt{body: first.body, ok: true}, &first)
	load.waitAcked(100, 30*time.Second, "load acknowledged before the first power loss")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 18))

	var backAll, backOne durations
	for k := 1; k <= rounds; k++ {
		mode := powerLossModes[(k-1)%len(powerLossModes)]
		load.waitAcked(200, 60*time.Second, "load before the power loss")
		back, lost := powerLoss(t, g, roots, g.nodes, mode, rng, load)
		backAll = append(backAll, back)
		t.Logf("power loss %d/%d (all 3 nodes, %s): %d unsynced pages dropped, %d kept, in %d files; group serving %v after the restart",
			k, rounds, mode.name, lost.PagesDropped, lost.PagesKept, lost.Files, back.Round(time.Millisecond))
	}
	for k := 1; k <= singles; k++ {
		for _, which := range []string{"leader", "follower"} {
			mode := powerLossModes[k%len(powerLossModes)]
			load.waitAcked(200, 60*time.Second, "load before the power loss")
			leader := g.waitMaster(t, 20*time.Second, nil)
			victim := leader
			if which == "follower" {
				for _, b := range g.nodes {
					if b != leader {
						victim = b
						break
					}
				}
			}
			back, lost := powerLoss(t, g, roots, []*broker{victim}, mode, rng, load)
			backOne = append(backOne, back)
			t.Logf("power loss of the %s %s alone (%s): %d unsynced pages dropped, %d kept; it serves again %v after its restart",
				which, victim.proc.name, mode.name, lost.PagesDropped, lost.PagesKept, back.Round(time.Millisecond))
		}
	}
	for _, b := range g.nodes {
		if logContains(b, "lost bytes it had synced") || logContains(b, "REPLICA DIVERGED") {
			t.Errorf("%s: its log reports a store behind its marker or a divergence", b.proc.name)
		}
	}
	res := verifyGroup(t, g, load)
	t.Logf("CHAOS power-loss: %d coordinated power losses (modes %s cycled), %d of the leader alone, %d of a follower alone; every node started by itself",
		rounds, modeNames(), singles, singles)
	t.Logf("CHAOS power-loss: messages sent %d (failed attempts %d), acknowledged %d, lost 0, duplicates %d (each explained by a failed attempt and its retry); commitlogs byte-identical over %d bytes",
		res.distinct, res.failedAttempts, res.acked, res.duplicates, res.commitLogBytes)
	t.Logf("CHAOS power-loss: restart -> serving again: all nodes %v; one node %v", backAll, backOne)
}

func modeNames() string {
	var s []string
	for _, m := range powerLossModes {
		s = append(s, fmt.Sprintf("%q", m.name))
	}
	return strings.Join(s, ", ")
}
