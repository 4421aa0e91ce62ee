package integration

import (
	"errors"
	"fmt"
	"math/rand"
	"syscall"
	"testing"
	"time"

	"rocketraft/internal/netlab"
)

// Nemeses of the fault lab (faultlab_test.go): each is one fault against a three-node group
// running in a netlab lab, with start (inject) and stop (heal, SIGCONT, restart) so two can
// overlap. Partitions are silent nftables drops between the hosts (internal/netlab); pauses are
// SIGSTOP/SIGCONT; crashes are SIGKILL and a restart after a delay. A nemesis picks its targets
// from the leader the runner saw registered before the fault began.

// faultEnv is what a nemesis acts on: the lab handle, the name server's host, the group and the
// host of each node.
type faultEnv struct {
	t      testing.TB
	lab    *netlab.Lab
	ns     *namesrv
	nsHost *netlab.Host
	g      *raftGroup
	hosts  []*netlab.Host // hosts[i] runs g.nodes[i]
	rng    *rand.Rand
	// hold is how long a fault lasts before it is healed; restartDelay is a crash's downtime.
	hold, restartDelay time.Duration
}

// hostOf is the host a node runs on.
func (e *faultEnv) hostOf(b *broker) *netlab.Host {
	for i, x := range e.g.nodes {
		if x == b {
			return e.hosts[i]
		}
	}
	panic("faultlab: node of another group")
}

// nemesis is one fault; start injects it (targets chosen from leader), stop heals it. A
// nemesis value is used for one fault at a time.
type nemesis interface {
	name() string
	kind() string // partition, pause, crash or composed
	start(e *faultEnv, leader *broker) (string, error)
	stop(e *faultEnv) error
}

// ---- partitions ----

// cutNemesis applies a set of silent drops; stop heals every cut in the lab.
type cutNemesis struct {
	id   string
	desc string
	// cuts returns the links to cut, both ways (oneWay false) or from -> to only.
	cuts   func(e *faultEnv, leader *broker) (pairs [][2]*netlab.Host, what string)
	oneWay bool
}

func (n *cutNemesis) name() string { return n.id }
func (n *cutNemesis) kind() string { return "partition" }

func (n *cutNemesis) start(e *faultEnv, leader *broker) (string, error) {
	pairs, what := n.cuts(e, leader)
	for _, p := range pairs {
		var err error
		if n.oneWay {
			err = e.lab.CutOneWay(p[0], p[1])
		} else {
			err = e.lab.Cut(p[0], p[1])
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", n.id, err)
		}
	}
	return what, nil
}

func (n *cutNemesis) stop(e *faultEnv) error { return e.lab.Heal() }

// nodeName is a node's short name for fault descriptions.
func nodeName(b *broker) string { return b.props["dLegerSelfId"] }

// leaderCut: the leader cut from both followers; it still reaches the name server and clients.
func leaderCut() nemesis {
	return &cutNemesis{id: "leader-cut", cuts: func(e *faultEnv, l *broker) ([][2]*netlab.Host, string) {
		var pairs [][2]*netlab.Host
		for _, f := range e.g.followers(l) {
			pairs = append(pairs, [2]*netlab.Host{e.hostOf(l), e.hostOf(f)})
		}
		return pairs, "leader " + nodeName(l) + " cut from both followers"
	}}
}

// splitNemesis: a 2|1 split of the group; the minority is the leader (leaderAlone) or a
// follower. The minority keeps the name server and clients.
func splitNemesis(leaderAlone bool) nemesis {
	id := "split-follower-alone"
	if leaderAlone {
		id = "split-leader-alone"
	}
	return &cutNemesis{id: id, cuts: func(e *faultEnv, l *broker) ([][2]*netlab.Host, string) {
		alone := l
		if !leaderAlone {
			fs := e.g.followers(l)
			alone = fs[e.rng.Intn(len(fs))]
		}
		var pairs [][2]*netlab.Host
		for _, o := range e.g.nodes {
			if o != alone {
				pairs = append(pairs, [2]*netlab.Host{e.hostOf(alone), e.hostOf(o)})
			}
		}
		return pairs, fmt.Sprintf("%s (leader %s) split from the other two", nodeName(alone), nodeName(l))
	}}
}

// bridge: the leader and one follower cannot see each other; both see the other follower.
func bridge() nemesis {
	return &cutNemesis{id: "bridge", cuts: func(e *faultEnv, l *broker) ([][2]*netlab.Host, string) {
		fs := e.g.followers(l)
		f := fs[e.rng.Intn(len(fs))]
		mid := fs[0]
		if mid == f {
			mid = fs[1]
		}
		return [][2]*netlab.Host{{e.hostOf(l), e.hostOf(f)}},
			fmt.Sprintf("leader %s and %s cut from each other, both see %s", nodeName(l), nodeName(f), nodeName(mid))
	}}
}

// oneWay drops the leader's packets to both followers (fromLeader) or theirs to it, leaving the
// other direction open.
func oneWay(fromLeader bool) nemesis {
	id := "oneway-to-leader"
	if fromLeader {
		id = "oneway-from-leader"
	}
	return &cutNemesis{id: id, oneWay: true, cuts: func(e *faultEnv, l *broker) ([][2]*netlab.Host, string) {
		var pairs [][2]*netlab.Host
		for _, f := range e.g.followers(l) {
			if fromLeader {
				pairs = append(pairs, [2]*netlab.Host{e.hostOf(l), e.hostOf(f)})
			} else {
				pairs = append(pairs, [2]*netlab.Host{e.hostOf(f), e.hostOf(l)})
			}
		}
		if fromLeader {
			return pairs, "packets of leader " + nodeName(l) + " to both followers dropped"
		}
		return pairs, "packets of both followers to leader " + nodeName(l) + " dropped"
	}}
}

// nsCut: the name server cut from every node of the group (clients still reach it).
func nsCut() nemesis {
	return &cutNemesis{id: "namesrv-cut", cuts: func(e *faultEnv, l *broker) ([][2]*netlab.Host, string) {
		var pairs [][2]*netlab.Host
		for _, b := range e.g.nodes {
			pairs = append(pairs, [2]*netlab.Host{e.nsHost, e.hostOf(b)})
		}
		return pairs, "name server cut from the group"
	}}
}

// flapNemesis cuts and heals the link between the leader and one follower every 200-500 ms
// until stopped.
type flapNemesis struct {
	stopc chan struct{}
	done  chan struct{}
	flips int
	err   error
}

func (n *flapNemesis) name() string { return "flap" }
func (n *flapNemesis) kind() string { return "partition" }

func (n *flapNemesis) start(e *faultEnv, l *broker) (string, error) {
	fs := e.g.followers(l)
	f := fs[e.rng.Intn(len(fs))]
	a, b := e.hostOf(l), e.hostOf(f)
	n.stopc, n.done, n.flips, n.err = make(chan struct{}), make(chan struct{}), 0, nil
	seed := e.rng.Int63()
	go func() {
		defer close(n.done)
		rng := rand.New(rand.NewSource(seed))
		cut := false
		for {
			select {
			case <-n.stopc:
				return
			case <-time.After(time.Duration(200+rng.Intn(300)) * time.Millisecond):
			}
			var err error
			if cut {
				err = e.lab.Heal()
			} else {
				err = e.lab.Cut(a, b)
			}
			if err != nil {
				n.err = err
				return
			}
			cut = !cut
			n.flips++
		}
	}()
	return fmt.Sprintf("link leader %s <-> %s flapping every 200-500 ms", nodeName(l), nodeName(f)), nil
}

func (n *flapNemesis) stop(e *faultEnv) error {
	close(n.stopc)
	<-n.done
	return errors.Join(n.err, e.lab.Heal())
}

// ---- pauses ----

// pauseNemesis SIGSTOPs a process and SIGCONTs it at stop.
type pauseNemesis struct {
	id     string
	target func(e *faultEnv, l *broker) (*proc, string)
	p      *proc
}

func (n *pauseNemesis) name() string { return n.id }
func (n *pauseNemesis) kind() string { return "pause" }

func (n *pauseNemesis) start(e *faultEnv, l *broker) (string, error) {
	p, what := n.target(e, l)
	if !p.signal(syscall.SIGSTOP) {
		return "", fmt.Errorf("%s: SIGSTOP %s: not running", n.id, p.name)
	}
	n.p = p
	e.t.Cleanup(func() { p.signal(syscall.SIGCONT) }) // a failed test still lets it stop cleanly
	return what, nil
}

func (n *pauseNemesis) stop(e *faultEnv) error {
	if !n.p.signal(syscall.SIGCONT) {
		return fmt.Errorf("%s: SIGCONT %s: not running", n.id, n.p.name)
	}
	return nil
}

func pauseLeader() nemesis {
	return &pauseNemesis{id: "pause-leader", target: func(e *faultEnv, l *broker) (*proc, string) {
		return l.proc, "SIGSTOP of leader " + nodeName(l)
	}}
}

func pauseFollower() nemesis {
	return &pauseNemesis{id: "pause-follower", target: func(e *faultEnv, l *broker) (*proc, string) {
		fs := e.g.followers(l)
		f := fs[e.rng.Intn(len(fs))]
		return f.proc, "SIGSTOP of follower " + nodeName(f)
	}}
}

func pauseNamesrv() nemesis {
	return &pauseNemesis{id: "pause-namesrv", target: func(e *faultEnv, l *broker) (*proc, string) {
		return e.ns.proc, "SIGSTOP of the name server"
	}}
}

// ---- crashes ----

// crashNemesis kills nodes with SIGKILL; stop restarts them (after the runner's hold, which is
// the restart delay for crashes).
type crashNemesis struct {
	id      string
	targets func(e *faultEnv, l *broker) []*broker
	killed  []*broker
}

func (n *crashNemesis) name() string { return n.id }
func (n *crashNemesis) kind() string { return "crash" }

func (n *crashNemesis) start(e *faultEnv, l *broker) (string, error) {
	n.killed = n.targets(e, l)
	var names []string
	for _, b := range n.killed {
		b.kill()
		names = append(names, nodeName(b))
	}
	return fmt.Sprintf("kill -9 of %v (leader %s)", names, nodeName(l)), nil
}

// stop restarts every killed node, one after the other (each waits until it has registered,
// which the first of a killed majority can: it and the survivor are a majority).
func (n *crashNemesis) stop(e *faultEnv) error {
	for _, b := range n.killed {
		b.restart()
	}
	return nil
}

func killFollower() nemesis {
	return &crashNemesis{id: "kill-follower", targets: func(e *faultEnv, l *broker) []*broker {
		fs := e.g.followers(l)
		return []*broker{fs[e.rng.Intn(len(fs))]}
	}}
}

func killLeader() nemesis {
	return &crashNemesis{id: "kill-leader", targets: func(e *faultEnv, l *broker) []*broker { return []*broker{l} }}
}

// killMajority kills the leader and one follower, or both followers, alternately.
func killMajority() nemesis {
	return &crashNemesis{id: "kill-majority", targets: func(e *faultEnv, l *broker) []*broker {
		fs := e.g.followers(l)
		if e.rng.Intn(2) == 0 {
			return fs
		}
		return []*broker{l, fs[e.rng.Intn(len(fs))]}
	}}
}

// ---- composed ----

// composedNemesis overlaps two nemeses: a starts, b starts half a hold later, a stops half a hold
// after that, then b.
type composedNemesis struct{ a, b nemesis }

func (n *composedNemesis) name() string { return n.a.name() + "+" + n.b.name() }
func (n *composedNemesis) kind() string { return "composed" }

func (n *composedNemesis) start(e *faultEnv, l *broker) (string, error) {
	wa, err := n.a.start(e, l)
	if err != nil {
		return "", err
	}
	time.Sleep(e.hold / 2)
	wb, err := n.b.start(e, l)
	if err != nil {
		return "", errors.Join(err, n.a.stop(e))
	}
	return wa + "; then " + wb, nil
}

func (n *composedNemesis) stop(e *faultEnv) error {
	err := n.a.stop(e)
	time.Sleep(e.hold / 2)
	return errors.Join(err, n.b.stop(e))
}

// nemesisCatalog builds every single nemesis, by name, in the runner's order.
func nemesisCatalog() []func() nemesis {
	return []func() nemesis{
		leaderCut,
		func() nemesis { return splitNemesis(true) },
		func() nemesis { return splitNemesis(false) },
		bridge,
		func() nemesis { return oneWay(true) },
		func() nemesis { return oneWay(false) },
		func() nemesis { return &flapNemesis{} },
		nsCut,
		pauseLeader,
		pauseFollower,
		pauseNamesrv,
		killFollower,
		killLeader,
		killMajority,
	}
}

// composedCatalog pairs nemeses of different kinds (never two partitions: a heal removes every
// cut in the lab).
func composedCatalog() []func() nemesis {
	return []func() nemesis{
		func() nemesis { return &composedNemesis{leaderCut(), killFollower()} },
		func() nemesis { return &composedNemesis{pauseLeader(), nsCut()} },
		func() nemesis { return &composedNemesis{pauseFollower(), killLeader()} },
		func() nemesis { return &composedNemesis{bridge(), pauseLeader()} },
	}
}
