package integration

// Adding a fresh fourth node to a running three-node DLedger group that holds data, and removing
// it again (docs/operations.md "Adding and removing a node, preferred leader"). The group is filled with RR_NEWNODE_MB MiB
// (default 16; make chaos: 100) through raw batch sends, with Raft snapshots frequent enough that
// the leader's log no longer starts at index 1: the new node can only catch up by installing a
// snapshot (the store's files) and then the log after it, while a light load keeps writing.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

const codeSendBatchMessage = 320

// newNodeMB is the amount of data the group holds before the fourth node joins.
func newNodeMB(t testing.TB) int {
	t.Helper()
	mb := 16
	if v := os.Getenv("RR_NEWNODE_MB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("RR_NEWNODE_MB=%q: want a positive integer", v)
		}
		mb = n
	}
	return mb
}

// sendBatchRaw sends bodies as one SEND_BATCH_MESSAGE (320, V2 header names) to queue q and
// returns the queue offset of the first message.
func sendBatchRaw(addr, topic string, q int, bodies [][]byte) (int64, error) {
	entries := make([]message.BatchEntry, len(bodies))
	for i, b := range bodies {
		entries[i] = message.BatchEntry{Body: b}
	}
	body, err := message.EncodeBatch(entries)
	if err != nil {
		return 0, err
	}
	ext := map[string]string{
		"a": "RAW_BATCH_PRODUCER", "b": topic, "c": "TBW102", "d": "4", "e": strconv.Itoa(q),
		"f": "0", "g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": "", "j": "0",
		"k": "false", "m": "true",
	}
	resp, err := rawRequest(addr, codeSendBatchMessage, ext, body, 15*time.Second)
	if err != nil {
		return 0, err
	}
	if resp.Code != respSuccess {
		return 0, fmt.Errorf("batch send: code %d %q", resp.Code, resp.Remark)
	}
	return strconv.ParseInt(resp.ExtFields["queueOffset"], 10, 64)
}

// raftStatusOf asks one broker for GET_RAFT_STATUS.
func raftStatusOf(addr string) (*protocol.RaftStatus, error) {
	resp, err := rawRequest(addr, int(remoting.GetRaftStatus), nil, nil, 3*time.Second)
	if err != nil {
		return nil, err
	}
	if resp.Code != respSuccess {
		return nil, fmt.Errorf("raft status of %s: code %d %q", addr, resp.Code, resp.Remark)
	}
	var rs protocol.RaftStatus
	if err := protocol.Decode(resp.Body, &rs); err != nil {
		return nil, fmt.Errorf("raft status of %s: %w", addr, err)
	}
	return &rs, nil
}

// caughtUpWith reports (as an error) whether node has applied up to within slack entries of
// leader's commit index.
func caughtUpWith(leader, node *broker, slack uint64) error {
	l, err := raftStatusOf(leader.addr)
	if err != nil {
		return err
	}
	s, err := raftStatusOf(node.addr)
	if err != nil {
		return err
	}
	if s.AppliedIndex+slack < l.CommitIndex {
		return fmt.Errorf("%s applied %d, %s committed %d (%s, commitlog %d of %d bytes)", node.proc.name, s.AppliedIndex,
			leader.proc.name, l.CommitIndex, s.Role, s.CommitLogMaxOffset, l.CommitLogMaxOffset)
	}
	return nil
}

// startJoiner starts one more DLedger broker for g with dLegerJoin=true: its dLegerPeers are the
// group's plus itself (the original members' lists stay as they are). It waits only until the
// broker accepts connections: it registers nothing before the leader adds it.
func startJoiner(t testing.TB, g *raftGroup, id string, opts ...brokerOpt) (*broker, string) {
	t.Helper()
	ref := g.nodes[0]
	raftAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	b, dir := newRaftBroker(t, g)
	for k, v := range ref.props { // the group's settings (test options included)
		b.props[k] = v
	}
	b.props["storePathRootDir"] = b.storeRoot
	b.props["listenPort"] = strconv.Itoa(b.port)
	b.props["dLegerPeers"] = ref.props["dLegerPeers"] + ";" + id + "-" + raftAddr
	b.props["dLegerSelfId"] = id
	b.props["dLegerJoin"] = "true"
	b.launch(t, dir, opts...)
	eventually(t, 30*time.Second, b.proc.name+" accepting connections", func() error {
		if err := b.exited(); err != nil {
			return permanent{err}
		}
		_, err := raftStatusOf(b.addr)
		return err
	})
	return b, raftAddr
}

// logContains reports whether b's log holds s.
func logContains(b *broker, s string) bool {
	data, err := os.ReadFile(b.proc.logPath)
	return err == nil && bytes.Contains(data, []byte(s))
}

// fillGroup stores about mb MiB on the leader with raw batch sends (4 KiB bodies, 8 per batch,
// spread over queues 0..3 by senders senders) and returns what was acknowledged.
func fillGroup(t testing.TB, leader *broker, topic string, mb, senders int) []sent {
	t.Helper()
	const bodySize, perBatch, queues = 4096, 8, 4
	batches := mb << 20 / (bodySize * perBatch)
	var (
		mu    sync.Mutex
		acked []sent
		next  atomic.Int64
		wg    sync.WaitGroup
		first error
		once  sync.Once
	)
	pad := strings.Repeat("x", bodySize)
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= batches {
					return
				}
				q := i % queues
				bodies := make([][]byte, perBatch)
				for j := range bodies {
					id := fmt.Sprintf("fill-%d-%06d-%d-", s, i, j)
					bodies[j] = []byte(id + pad[len(id):])
				}
				off, err := sendBatchRaw(leader.addr, topic, q, bodies)
				if err != nil {
					once.Do(func() { first = fmt.Errorf("batch %d: %w", i, err) })
					return
				}
				mu.Lock()
				for j, body := range bodies {
					acked = append(acked, sent{body: string(body), queue: q, offset: off + int64(j)})
				}
				mu.Unlock()
			}
		}()
	}
	waitGroup(t, &wg, 10*time.Minute, "fill senders")
	if first != nil {
		t.Fatalf("filling the group: %v", first)
	}
	return acked
}

// trickle sends one raw message every interval to the route's master until stopped, recording
// every acknowledged send (a failed one is retried by the next tick with a new body).
type trickle struct {
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	acked  []sent
	failed int
}

func startTrickle(g *raftGroup, topic string, interval time.Duration) *trickle {
	tr := &trickle{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		for i := 0; ; i++ {
			select {
			case <-tr.stop:
				return
			case <-time.After(interval):
			}
			addrs, err := routeAddrs(g.ns.addr, "TBW102")
			if err != nil || addrs[0] == "" {
				tr.count(nil)
				continue
			}
			body := fmt.Sprintf("trickle-%06d", i)
			resp, err := sendRaw(addrs[0], topic, i%4, []byte(body), "")
			if err != nil || resp.Code != respSuccess {
				tr.count(nil)
				continue
			}
			off, err := strconv.ParseInt(resp.ExtFields["queueOffset"], 10, 64)
			if err != nil {
				tr.count(nil)
				continue
			}
			tr.count(&sent{body: body, queue: i % 4, offset: off})
		}
	}()
	return tr
}

func (tr *trickle) count(s *sent) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if s == nil {
		tr.failed++
		return
	}
	tr.acked = append(tr.acked, *s)
}

// halt stops the trickle and returns what it had acknowledged and how many sends failed.
func (tr *trickle) halt() ([]sent, int) {
	close(tr.stop)
	<-tr.done
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.acked, tr.failed
}

// waitQueuesEqual waits until node's max offset of every queue equals the leader's.
func waitQueuesEqual(t testing.TB, leader, node *broker, topic string, queues int, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, node.proc.name+" at the leader's max offsets", func() error {
		for q := range queues {
			want, err := maxOffset(leader.addr, topic, q)
			if err != nil {
				return err
			}
			if got, err := maxOffset(node.addr, topic, q); err != nil || got != want {
				return fmt.Errorf("queue %d: max offset %d (%v), leader %d", q, got, err, want)
			}
		}
		return nil
	})
}

// TestNewNodeJoinsAndLeaves: a three-node group holding RR_NEWNODE_MB MiB gets a fourth node
// (dLegerJoin=true, mqadmin addPeer) while a light load keeps writing. The new node must install
// a snapshot (the log was truncated), catch up to the leader's commit index, register as a
// slave with brokerId 4, serve every acknowledged message to raw pulls, and hold a commitlog
// byte-identical to the others'. Then mqadmin removePeer: the group goes on with three voters,
// sends succeed, and the removed node unregisters, says so in its log and keeps running.
func TestNewNodeJoinsAndLeaves(t *testing.T) {
	t.Parallel()
	mb := newNodeMB(t)
	// Snapshots every ~3*mb entries (checked every 2 s), keeping as many behind them: the fill
	// makes 4-8 entries per MiB, so the log is truncated well past index 1 before the join,
	// while the trickle during the catch-up (10 entries/s) stays far inside the kept tail, so
	// one snapshot install suffices.
	keep := strconv.Itoa(max(128, 3*mb))
	opts := []brokerOpt{
		withProp("mappedFileSizeCommitLog", strconv.Itoa(4<<20)),
		withProp("mapedFileSizeConsumeQueue", strconv.Itoa(30000*20)),
		withProp("maxMessageSize", strconv.Itoa(128<<10)),
		withProp("dLegerSnapshotIntervalSec", "2"),
		withProp("dLegerSnapshotThreshold", keep),
		withProp("dLegerTrailingLogs", keep),
		withProp("dLegerWalSegmentSizeMB", "2"),
		withProp("allowUnauthenticatedRaftAdmin", "true"), // mqadmin addPeer/removePeer without ACL
	}
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, opts...)
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic := uniq("NewNode")
	first := sendRawOK(t, leader.addr, topic, "create-topic")
	waitTopicRoute(t, &cluster{ns: ns, b: leader}, topic)

	fillStart := time.Now()
	acked := append([]sent{first}, fillGroup(t, leader, topic, mb, 2)...)
	t.Logf("NEWNODE fill: %d MiB (%d messages) in %v", mb, len(acked), time.Since(fillStart).Round(time.Millisecond))
	// The leader has taken a snapshot and truncated its log (raft-wal's first segment, which
	// starts at index 1, is gone): a node starting from nothing can only catch up by installing
	// the snapshot.
	raftDir := filepath.Join(leader.storeRoot, "dledger-"+leader.props["dLegerSelfId"], "raft")
	// With the commitlog store (the default) the log is never truncated behind a snapshot
	// (commitlog retention decides, docs/write-path.md): n3 catches up from the leader's commitlog.
	fromLog := leader.commitLogStore()
	eventually(t, 60*time.Second, "a snapshot and a truncated log on the leader", func() error {
		if fromLog {
			return nil
		}
		snaps, _ := os.ReadDir(filepath.Join(raftDir, "snapshots"))
		snapped := false
		for _, e := range snaps {
			snapped = snapped || (e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp"))
		}
		if !snapped {
			return fmt.Errorf("no snapshot in %s yet", raftDir)
		}
		segs, err := os.ReadDir(filepath.Join(raftDir, "raft-wal"))
		if err != nil {
			return err
		}
		for _, e := range segs {
			if strings.HasPrefix(e.Name(), fmt.Sprintf("%020d-", 1)) {
				// Not far enough past the last snapshot yet: add entries until the next one.
				acked = append(acked, fillGroup(t, leader, topic, 1, 1)...)
				return fmt.Errorf("the leader's log still starts at index 1 (%s)", e.Name())
			}
		}
		return nil
	})
	ls, err := raftStatusOf(leader.addr)
	if err != nil {
		t.Fatal(err)
	}

	// The fourth node: it waits, registers nothing, until it is added.
	n3, n3Raft := startJoiner(t, g, "n3", opts...)
	eventually(t, 10*time.Second, "n3 says it waits to be added", func() error {
		if !logContains(n3, "waiting to be added") {
			return fmt.Errorf("no 'waiting to be added' in %s's log", n3.proc.name)
		}
		return nil
	})
	if err := routeHasBroker(ns.addr, "TBW102", n3.addr); err == nil {
		t.Fatalf("%s registered before it was added", n3.proc.name)
	}
	if s, err := raftStatusOf(n3.addr); err != nil || len(s.Peers) != 0 || s.BrokerRole != "SLAVE" {
		t.Fatalf("n3 before addPeer: %v %+v", err, s)
	}

	tr := startTrickle(g, topic, 100*time.Millisecond)
	added := time.Now()
	mqadminRaft(t, ns.addr, "addPeer", "-b", g.name, "-i", "n3", "-a", n3Raft)
	addTook := time.Since(added)
	// Caught up: n3's applied index reaches the leader's commit index.
	var caughtUp time.Duration
	eventually(t, time.Duration(30+mb/2)*time.Second, "n3 at the leader's commit index", func() error {
		if err := caughtUpWith(leader, n3, 0); err != nil {
			return err
		}
		caughtUp = time.Since(added)
		return nil
	})
	trickled, trickleFailed := tr.halt()
	acked = append(acked, trickled...)
	how := "leader log truncated, snapshot installed"
	if fromLog {
		how = "from the leader's commitlog, the Raft log"
	}
	t.Logf("NEWNODE catch-up: addPeer answered after %v; n3 at the leader's commit index %v after addPeer: %.1f MB/s (%d commitlog bytes at the join, %s); %d sends acknowledged during the catch-up (%d failed)",
		addTook.Round(time.Millisecond), caughtUp.Round(time.Millisecond), float64(ls.CommitLogMaxOffset)/(1<<20)/caughtUp.Seconds(),
		ls.CommitLogMaxOffset, how, len(trickled), trickleFailed)
	for _, want := range []string{"Installed remote snapshot", "store restored from snapshot"} {
		if fromLog {
			break
		}
		if !logContains(n3, want) {
			t.Fatalf("%s's log has no %q: it did not catch up by snapshot", n3.proc.name, want)
		}
	}

	// A slave with brokerId 4 (its dLegerPeers position + 1) serving every acknowledged message.
	eventually(t, 10*time.Second, "n3 in the route as brokerId 4", func() error {
		addrs, err := routeAddrs(ns.addr, "TBW102")
		if err != nil {
			return err
		}
		if addrs[4] != n3.addr {
			return fmt.Errorf("route brokerAddrs %v, want 4 -> %s", addrs, n3.addr)
		}
		return nil
	})
	if r := runtimeRole(t, n3); r != "SLAVE" {
		t.Fatalf("n3 reports brokerRole %s", r)
	}
	const queues = 4
	waitQueuesEqual(t, leader, n3, topic, queues, 30*time.Second)
	got := readQueues(t, n3.addr, topic, queues)
	checkAcked(t, n3.proc.name, got, acked)
	ref := readQueues(t, leader.addr, topic, queues)
	for q := range queues {
		if len(ref[q]) != len(got[q]) {
			t.Fatalf("queue %d: n3 holds %d records, the leader %d", q, len(got[q]), len(ref[q]))
		}
		for i := range ref[q] {
			if !sameRecord(ref[q][i], got[q][i]) {
				t.Fatalf("queue %d offset %d differs between the leader and n3", q, i)
			}
		}
	}
	g.nodes = append(g.nodes, n3)
	eventually(t, 15*time.Second, "raftStatus with four members", func() error {
		rg, err := raftGroupStatus(t, g)
		if err != nil {
			return err
		}
		return checkSettled(rg, g, leader.addr)
	})

	// Remove it: three voters go on, sends succeed, n3 notices, unregisters and keeps running.
	removed := time.Now()
	mqadminRaft(t, ns.addr, "removePeer", "-b", g.name, "-i", "n3")
	g.nodes = g.nodes[:3]
	if s, err := raftStatusOf(leader.addr); err != nil || len(s.Peers) != 3 {
		t.Fatalf("leader's configuration after removePeer: %v %+v", err, s)
	}
	for i := range 5 {
		acked = append(acked, sendRawOK(t, leader.addr, topic, fmt.Sprintf("after-remove-%d", i)))
	}
	eventually(t, 20*time.Second, "n3 notices its removal and unregisters", func() error {
		if err := n3.exited(); err != nil {
			return permanent{err}
		}
		if !logContains(n3, "this node was removed from the Raft group") {
			return fmt.Errorf("no removal message in %s's log", n3.proc.name)
		}
		addrs, err := routeAddrs(ns.addr, "TBW102")
		if err != nil {
			return err
		}
		for id, a := range addrs {
			if a == n3.addr {
				return fmt.Errorf("n3 still registered as brokerId %d", id)
			}
		}
		return nil
	})
	t.Logf("NEWNODE removal: n3 noticed and unregistered %v after removePeer", time.Since(removed).Round(time.Millisecond))
	eventually(t, 15*time.Second, "raftStatus with three members", func() error {
		rg, err := raftGroupStatus(t, g)
		if err != nil {
			return err
		}
		return checkSettled(rg, g, leader.addr)
	})
	if resp, err := sendRaw(n3.addr, topic, 0, []byte("to-removed"), ""); err != nil || resp.Code == respSuccess {
		t.Fatalf("a send to the removed node: %v %+v", err, resp)
	}
	if !n3.running() {
		t.Fatalf("the removed node exited")
	}
	n3s, err := raftStatusOf(n3.addr)
	if err != nil {
		t.Fatal(err)
	}

	// Every copy, the removed node's included, byte-identical over the common prefix.
	for _, b := range g.nodes {
		got := readQueues(t, b.addr, topic, queues)
		checkAcked(t, b.proc.name, got, acked)
	}
	for _, b := range append(g.nodes, n3) {
		if err := b.stop(); err != nil {
			t.Fatal(err)
		}
	}
	n := compareCommitLogs(t, g.nodes)
	// The removed node's files are as long as the others' but end, as data, where it left.
	m := compareCommitLogPrefix(t, g.nodes[0], n3, n3s.CommitLogMaxOffset)
	t.Logf("NEWNODE replicas: commitlogs of the 3 voters byte-identical over %d common bytes, the removed n3's equal to theirs over its %d bytes; %d acknowledged messages on every voter",
		n, m, len(acked))
}

// compareCommitLogPrefix checks that b's commitlog equals ref's over [0, limit) (file names are
// their base offsets) and returns the bytes compared.
func compareCommitLogPrefix(t testing.TB, ref, b *broker, limit int64) int64 {
	t.Helper()
	at, name, compared, err := firstDifference(b, ref, limit)
	if err != nil {
		t.Fatal(err)
	}
	if at >= 0 {
		t.Fatalf("commitlog %s differs between %s and %s at byte %d (within the first %d bytes of data)", name, ref.proc.name, b.proc.name, at, limit)
	}
	if compared < limit {
		t.Fatalf("compared %d bytes of %s's commitlog, its data ends at %d", compared, b.proc.name, limit)
	}
	return compared
}
