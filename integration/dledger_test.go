package integration

import (
	"context"
	"fmt"
	"maps"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"rocketraft/config"
)

// TestRaftGroupLeaderKill: three DLedger brokers (one brokerName, one Raft group). The official
// Go client sends N messages to the master the route shows; the leader is killed with SIGKILL;
// a new master must appear in the route (bounded wait) and take M more sends from a new producer
// (the client refreshes routes only every 30 s); the killed node restarts and catches up. Then
// every node, read queue by queue from offset 0 with raw pulls, holds every acknowledged message
// at the queue offset it was acknowledged with, offsets dense, the same records on every node;
// and after a clean stop the nodes' commitlog files are byte-identical over their common prefix.
func TestRaftGroupLeaderKill(t *testing.T) {
	t.Parallel()
	raftGroupLeaderKill(t)
}

// TestRaftGroupLeaderKillWALStore is TestRaftGroupLeaderKill with the Raft log in raft-wal
// (dLegerLogStore=wal) rather than in the commitlog (the default: each entry written once,
// fsm/entrylog.go, where the killed leader's unapplied tail is cut or kept by the new leader's log
// and the replicas' commitlogs, entry headers included, are byte-identical).
func TestRaftGroupLeaderKillWALStore(t *testing.T) {
	t.Parallel()
	raftGroupLeaderKill(t, withProp("dLegerLogStore", "wal"))
}

func raftGroupLeaderKill(t *testing.T, opts ...brokerOpt) {
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, opts...)
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic := uniq("RaftKill")

	checkRoles(t, g, leader)

	const n, m, k = 100, 100, 20
	p1 := newProducer(t, &cluster{ns: ns})
	acked := sendSync(t, p1, topic, "before", n, nil)
	// A follower forwards a send to the leader and relays its answer.
	acked = append(acked, sendRawOK(t, g.followers(leader)[0].addr, topic, "forwarded-before"))

	killed := time.Now()
	leader.kill()
	next := g.waitMaster(t, 15*time.Second, leader)
	registered := time.Since(killed)
	checkLeaderProcs(t, next)

	p2 := newProducer(t, &cluster{ns: ns})
	first := sendFirst(t, p2, topic, "after-first")
	firstOK := time.Since(killed)
	acked = append(acked, first)
	acked = append(acked, sendSync(t, p2, topic, "after", m, nil)...)
	_ = p2.Shutdown()
	t.Logf("failover: kill -9 of %s -> new master %s in the route after %v, first SEND_OK after %v",
		leader.addr, next.addr, registered.Round(time.Millisecond), firstOK.Round(time.Millisecond))

	leader.restart()
	checkRoles(t, g, next)
	// p1's route still names the old leader's address (routes refresh every 30 s): the
	// restarted node is a follower now and forwards every send to the new leader.
	acked = append(acked, sendSync(t, p1, topic, "stale-route", k, nil)...)
	_ = p1.Shutdown()

	queues := routedQueues(t, ns.addr, topic)
	// Wait until every node has applied everything (the restarted one replays and catches up).
	eventually(t, 20*time.Second, "every node at the same max offsets", func() error {
		for q := range queues {
			want, err := maxOffset(next.addr, topic, q)
			if err != nil {
				return err
			}
			for _, b := range g.nodes {
				if got, err := maxOffset(b.addr, topic, q); err != nil || got != want {
					return fmt.Errorf("%s queue %d: max offset %d (%v), leader %d", b.proc.name, q, got, err, want)
				}
			}
		}
		return nil
	})

	var ref map[int][]*record
	for _, b := range g.nodes {
		got := readAll(t, g.asCluster(b), topic)
		checkAcked(t, b.proc.name, got, acked)
		if ref == nil {
			ref = got
			continue
		}
		for q := range ref {
			if !slices.EqualFunc(ref[q], got[q], sameRecord) {
				t.Fatalf("%s: queue %d differs from %s", b.proc.name, q, g.nodes[0].proc.name)
			}
		}
	}

	for _, b := range g.nodes {
		if err := b.stop(); err != nil {
			t.Fatal(err)
		}
	}
	compared := compareCommitLogs(t, g.nodes)
	t.Logf("%d messages acknowledged, present on all 3 nodes; %d commitlog bytes compared identical", len(acked), compared)
}

// checkLeaderProcs checks that a node of a group on this one host took the leader's share of the
// CPUs once it led (config.Broker.Procs; the broker logs the change).
func checkLeaderProcs(t testing.TB, b *broker) {
	t.Helper()
	cfg := config.Broker{EnableDLegerCommitLog: true, DLegerPeers: b.props["dLegerPeers"]}
	_, env := os.LookupEnv("GOMAXPROCS") // the brokers inherit the tests' environment
	follower, leader, _ := cfg.Procs(runtime.GOMAXPROCS(0), env)
	if leader == 0 {
		t.Logf("%d CPUs: a leader keeps %d scheduler CPUs like a follower", runtime.GOMAXPROCS(0), follower)
		return
	}
	want := fmt.Sprintf("scheduler CPUs: procs=%d leading=true", leader)
	eventually(t, 10*time.Second, "the new leader's scheduler CPUs", func() error {
		data, err := os.ReadFile(b.proc.logPath)
		if err != nil {
			return err
		}
		if !strings.Contains(string(data), want) {
			return fmt.Errorf("%s: no %q in its log", b.proc.name, want)
		}
		return nil
	})
}

// TestRaftGroupNoQuorumRefusesWrites: with both followers killed the leader acknowledges
// nothing: a send answers SERVICE_NOT_AVAILABLE (14) or SYSTEM_ERROR (1, outcome unknown), never
// SEND_OK, and the node soon reports SLAVE. With one follower back, service resumes.
func TestRaftGroupNoQuorumRefusesWrites(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3)
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic := uniq("RaftNoQuorum")
	sendRawOK(t, leader.addr, topic, "with-quorum")

	followers := g.followers(leader)
	for _, f := range followers {
		f.kill()
	}
	eventually(t, 10*time.Second, "a refused send on the isolated leader", func() error {
		resp, err := sendRaw(leader.addr, topic, 0, []byte("no-quorum"), "")
		if err != nil {
			return err
		}
		switch resp.Code {
		case respSuccess:
			t.Fatalf("SEND_OK without a quorum")
		case 1:
			return fmt.Errorf("code 1 (outcome unknown: %s); waiting for 14", resp.Remark)
		case 14:
			return nil
		}
		return permanent{fmt.Errorf("unexpected code %d %q", resp.Code, resp.Remark)}
	})
	eventually(t, 5*time.Second, "the leader without quorum reporting SLAVE", func() error {
		if role := runtimeRole(t, leader); role != "SLAVE" {
			return fmt.Errorf("role %s", role)
		}
		return nil
	})
	followers[0].restart()
	g.waitMaster(t, 20*time.Second, nil)
	eventually(t, 10*time.Second, "a send after the quorum is back", func() error {
		resp, err := sendRaw(leader.addr, topic, 0, []byte("quorum-back"), "")
		if err != nil {
			return err
		}
		if resp.Code != respSuccess {
			return fmt.Errorf("code %d %q", resp.Code, resp.Remark)
		}
		return nil
	})
}

// followers lists the members other than leader.
func (g *raftGroup) followers(leader *broker) []*broker {
	var out []*broker
	for _, b := range g.nodes {
		if b != leader {
			out = append(out, b)
		}
	}
	return out
}

// sendRawOK sends one message to queue 0 through addr with a raw SEND_MESSAGE and fails unless
// it is SEND_OK.
func sendRawOK(t testing.TB, addr, topic, body string) sent {
	t.Helper()
	resp, err := sendRaw(addr, topic, 0, []byte(body), "")
	if err != nil {
		t.Fatalf("raw send %s to %s: %v", body, addr, err)
	}
	if resp.Code != respSuccess {
		t.Fatalf("raw send %s to %s: code %d %q", body, addr, resp.Code, resp.Remark)
	}
	off, err := strconv.ParseInt(resp.ExtFields["queueOffset"], 10, 64)
	if err != nil {
		t.Fatalf("raw send %s: queueOffset %q", body, resp.ExtFields["queueOffset"])
	}
	return sent{body: body, queue: 0, offset: off, offsetMsgID: resp.ExtFields["msgId"]}
}

// checkRoles checks the route and GET_BROKER_RUNTIME_INFO: leader registered as brokerId 0 and
// SYNC_MASTER, every other running member as brokerId <peer index>+1 and SLAVE.
func checkRoles(t testing.TB, g *raftGroup, leader *broker) {
	t.Helper()
	eventually(t, 10*time.Second, "route ids of "+g.name, func() error {
		addrs, err := routeAddrs(g.ns.addr, "TBW102")
		if err != nil {
			return err
		}
		want := map[int64]string{0: leader.addr}
		for i, b := range g.nodes {
			if b != leader && b.running() {
				want[int64(i)+1] = b.addr
			}
		}
		if !maps.Equal(addrs, want) {
			return fmt.Errorf("route brokerAddrs %v, want %v", addrs, want)
		}
		return nil
	})
	for _, b := range g.nodes {
		if !b.running() {
			continue
		}
		want := "SLAVE"
		if b == leader {
			want = "SYNC_MASTER"
		}
		if got := runtimeRole(t, b); got != want {
			t.Fatalf("%s reports brokerRole %s, want %s", b.proc.name, got, want)
		}
	}
}

const codeGetBrokerRuntimeInfo = 28

var brokerRoleRE = regexp.MustCompile(`"brokerRole"\s*:\s*"([A-Z_]+)"`)

// runtimeRole asks a broker for GET_BROKER_RUNTIME_INFO and returns its brokerRole.
func runtimeRole(t testing.TB, b *broker) string {
	t.Helper()
	resp, err := rawRequest(b.addr, codeGetBrokerRuntimeInfo, nil, nil, 5*time.Second)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("runtime info of %s: %v %+v", b.proc.name, err, resp)
	}
	m := brokerRoleRE.FindSubmatch(resp.Body)
	if m == nil {
		t.Fatalf("runtime info of %s has no brokerRole: %s", b.proc.name, resp.Body)
	}
	return string(m[1])
}

// sendFirst sends one message, retrying for a few seconds: a new producer's first send can race
// the new master's first registration of the topic's route.
func sendFirst(t testing.TB, p interface {
	SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
}, topic, body string) sent {
	t.Helper()
	var s sent
	eventually(t, 10*time.Second, "first send after failover", func() error {
		r, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(body)))
		if err != nil {
			return err
		}
		if r.Status != primitive.SendOK {
			return fmt.Errorf("status %d", r.Status)
		}
		s = sent{body, r.MessageQueue.QueueId, r.QueueOffset, r.MsgID, r.OffsetMsgID}
		return nil
	})
	return s
}

// createTopicBySend auto-creates topic with p's first send (sendFirst) and waits until the name server
// at nsAddr routes it: the broker registers a new topic at its next, coalesced, registration,
// and a client started before then (a 5.x client, a consumer, a proxy) finds no route.
func createTopicBySend(t testing.TB, nsAddr string, p interface {
	SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
}, topic, body string) sent {
	t.Helper()
	s := sendFirst(t, p, topic, body)
	routedQueues(t, nsAddr, topic)
	return s
}

// checkAcked checks that queue offsets are dense from 0 on every queue and that every
// acknowledged send is at the (queue, offset) it was acknowledged with.
func checkAcked(t testing.TB, node string, got map[int][]*record, acked []sent) {
	t.Helper()
	for _, q := range slices.Sorted(maps.Keys(got)) {
		for i, r := range got[q] {
			if r.QueueOffset != int64(i) {
				t.Fatalf("%s: queue %d: record %d has queue offset %d (not dense)", node, q, i, r.QueueOffset)
			}
		}
	}
	for _, s := range acked {
		recs := got[s.queue]
		if s.offset >= int64(len(recs)) {
			t.Fatalf("%s: acknowledged %s at %d/%d is missing (queue holds %d)", node, s.body, s.queue, s.offset, len(recs))
		}
		if b := string(recs[s.offset].Body); b != s.body {
			t.Fatalf("%s: acknowledged %s at %d/%d, found %q there", node, s.body, s.queue, s.offset, b)
		}
	}
}

func sameRecord(a, b *record) bool {
	return a.PhysicalOffset == b.PhysicalOffset && a.QueueOffset == b.QueueOffset &&
		a.StoreTimestamp == b.StoreTimestamp && string(a.Body) == string(b.Body)
}
