package integration

// Peer links (docs/security.md "Peer links"): the Raft and HA ports of real broker
// processes, attacked from this test process with hashicorp/raft's own NetworkTransport and
// raw sockets.

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"rocketraft/peerauth"
	"rocketraft/remoting"
)

const testPeerSecret = "5f1c2a9e0b7d4c3a8e6f1b2d3c4a5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d"

// writePeerSecret writes the group secret to a file (as `openssl rand -hex 32 > peer.secret`
// would) and returns the option that points a broker at it.
func writePeerSecret(t testing.TB) brokerOpt {
	t.Helper()
	p := filepath.Join(t.TempDir(), "peer.secret")
	if err := os.WriteFile(p, []byte(testPeerSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return withProp("peerSecretFile", p)
}

// memberAddr is one member's id and Raft address.
type memberAddr struct{ id, addr string }

func (g *raftGroup) raftPeers(t testing.TB) []memberAddr {
	t.Helper()
	var out []memberAddr
	for _, e := range strings.Split(g.nodes[0].props["dLegerPeers"], ";") {
		id, addr, _ := strings.Cut(e, "-")
		out = append(out, memberAddr{id, addr})
	}
	return out
}

// groupView is every member's term and leader id, all agreeing.
func groupView(g *raftGroup) (term uint64, leader string, err error) {
	for i, b := range g.nodes {
		rs, err := raftStatusOf(b.addr)
		if err != nil {
			return 0, "", err
		}
		if i == 0 {
			term, leader = rs.Term, rs.LeaderID
		} else if rs.Term != term || rs.LeaderID != leader {
			return 0, "", fmt.Errorf("members disagree: %s at term %d leader %q, %s at term %d leader %q",
				g.nodes[0].addr, term, leader, b.addr, rs.Term, rs.LeaderID)
		}
	}
	if leader == "" {
		return 0, "", errors.New("no leader")
	}
	return term, leader, nil
}

func stableView(t testing.TB, g *raftGroup) (uint64, string) {
	t.Helper()
	var term uint64
	var leader string
	eventually(t, 20*time.Second, "the members agree on term and leader", func() error {
		var err error
		term, leader, err = groupView(g)
		return err
	})
	return term, leader
}

// attacker is hashicorp/raft's NetworkTransport in this process, dialing with dial.
func attacker(t testing.TB, dial func(string, time.Duration) (net.Conn, error)) *raft.NetworkTransport {
	t.Helper()
	if dial == nil {
		tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 2*time.Second, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	tr := raft.NewNetworkTransport(&dialOnly{dial: dial, closed: make(chan struct{})}, 3, 2*time.Second, io.Discard)
	t.Cleanup(func() { tr.Close() })
	return tr
}

// dialOnly is a raft.StreamLayer that only dials (through dial).
type dialOnly struct {
	dial   func(string, time.Duration) (net.Conn, error)
	closed chan struct{}
	once   sync.Once
}

func (d *dialOnly) Accept() (net.Conn, error) { <-d.closed; return nil, net.ErrClosed }
func (d *dialOnly) Close() error              { d.once.Do(func() { close(d.closed) }); return nil }
func (d *dialOnly) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (d *dialOnly) Dial(a raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return d.dial(string(a), timeout)
}

// authDial dials and proves cred (what a member does).
func authDial(cred peerauth.Credential) func(string, time.Duration) (net.Conn, error) {
	return func(addr string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return nil, err
		}
		if err := peerauth.Client(c, peerauth.PurposeRaft, cred, 3*time.Second); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
}

func header(tr *raft.NetworkTransport, p memberAddr) raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(p.id),
		Addr: tr.EncodePeer(raft.ServerID(p.id), raft.ServerAddress(p.addr))}
}

// forgedVote is the finding's RequestVote: a member's id, term 2^64-1, a log that looks
// newest, and the leadership-transfer flag (which makes voters ignore their leader).
func forgedVote(tr *raft.NetworkTransport, as memberAddr) *raft.RequestVoteRequest {
	return &raft.RequestVoteRequest{RPCHeader: header(tr, as), Term: math.MaxUint64,
		LastLogIndex: math.MaxUint64, LastLogTerm: math.MaxUint64, LeadershipTransfer: true}
}

// writer sends raw messages to the group's leader until stopped, counting failures.
type writer struct {
	stop     chan struct{}
	done     chan struct{}
	ok, fail atomic.Int64
	lastErr  atomic.Value
}

func startWriter(addr, topic string) *writer {
	w := &writer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			r, err := sendRaw(addr, topic, 0, []byte("during-"+strconv.Itoa(i)), "")
			if err == nil && r.Code != respSuccess {
				err = fmt.Errorf("code %d %q", r.Code, r.Remark)
			}
			if err != nil {
				w.fail.Add(1)
				w.lastErr.Store(err.Error())
			} else {
				w.ok.Add(1)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return w
}

func (w *writer) finish(t testing.TB, what string) {
	t.Helper()
	close(w.stop)
	<-w.done
	if w.fail.Load() > 0 || w.ok.Load() == 0 {
		t.Fatalf("%s: %d writes failed, %d succeeded (last error %v)", what, w.fail.Load(), w.ok.Load(), w.lastErr.Load())
	}
	t.Logf("%s: %d writes, all SEND_OK", what, w.ok.Load())
}

// flood runs f against every member for d.
func flood(d time.Duration, peers []memberAddr, f func(target memberAddr) error) (sent, refused int) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, p := range peers {
			sent++
			if f(p) != nil {
				refused++
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return sent, refused
}

// TestPeerAuthRaft: a DLedger group with a group secret. From a connection without the secret,
// the forged RequestVote (a member's id, term 2^64-1, leadership transfer) sent to every node,
// fake-leader heartbeats at a higher term and a TimeoutNow flood are all refused at the
// handshake and change nothing: term, leader, writes. A member's id with a wrong secret is
// refused, and a connection that proved one member's id cannot speak in another's name.
func TestPeerAuthRaft(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, writePeerSecret(t), withProp("allowUnauthenticatedRaftAdmin", "true"))
	leader := g.waitMaster(t, 30*time.Second, nil)
	topic := uniq("PeerAuth")
	eventually(t, 20*time.Second, "first write", func() error {
		r, err := sendRaw(leader.addr, topic, 0, []byte("before"), "")
		if err == nil && r.Code != respSuccess {
			err = fmt.Errorf("code %d %q", r.Code, r.Remark)
		}
		return err
	})
	term, leaderID := stableView(t, g)
	peers := g.raftPeers(t)
	var leaderPeer memberAddr
	var followers []memberAddr
	for _, p := range peers {
		if p.id == leaderID {
			leaderPeer = p
		} else {
			followers = append(followers, p)
		}
	}
	t.Logf("term %d, leader %s", term, leaderID)
	// The members' own traffic is never refused.
	for _, s := range []string{"raft RPC refused", "raft connection refused", "TimeoutNow refused", "transfer flag dropped"} {
		if n := g.countSince(map[*broker]int64{}, s); n != 0 {
			t.Fatalf("%d log lines %q before any attack", n, s)
		}
	}

	// The port does speak the handshake, and the right secret passes it (the control).
	c, err := authDial(peerauth.Credential{Identity: followers[0].id, Key: mustSecret(t)})(leaderPeer.addr, 3*time.Second)
	if err != nil {
		t.Fatalf("control: a member with the secret: %v", err)
	}
	c.Close()

	plain := attacker(t, nil)
	w := startWriter(leader.addr, topic)

	// (a) The forged vote, to every node.
	for _, p := range peers {
		as := followers[0]
		if p == as {
			as = followers[1]
		}
		var resp raft.RequestVoteResponse
		if err := plain.RequestVote(raft.ServerID(p.id), raft.ServerAddress(p.addr), forgedVote(plain, as), &resp); err == nil {
			t.Fatalf("forged vote to %s was answered: %+v", p.id, resp)
		}
	}
	// (b) Fake-leader heartbeats at a higher term, for 3 s.
	sent, refused := flood(3*time.Second, followers, func(p memberAddr) error {
		var resp raft.AppendEntriesResponse
		return plain.AppendEntries(raft.ServerID(p.id), raft.ServerAddress(p.addr),
			&raft.AppendEntriesRequest{RPCHeader: header(plain, leaderPeer), Term: term + 5}, &resp)
	})
	if refused != sent {
		t.Fatalf("fake heartbeats: %d of %d answered", sent-refused, sent)
	}
	// (c) TimeoutNow flood in the leader's name, for 3 s.
	sent, refused = flood(3*time.Second, peers, func(p memberAddr) error {
		return plain.TimeoutNow(raft.ServerID(p.id), raft.ServerAddress(p.addr),
			&raft.TimeoutNowRequest{RPCHeader: header(plain, leaderPeer)}, &raft.TimeoutNowResponse{})
	})
	if refused != sent {
		t.Fatalf("TimeoutNow flood: %d of %d answered", sent-refused, sent)
	}

	// (d) A member's id with a wrong secret: refused at the handshake.
	for _, p := range peers {
		_, err := authDial(peerauth.Credential{Identity: followers[0].id, Key: []byte("a stolen id, but not the secret")})(p.addr, 3*time.Second)
		if !errors.Is(err, peerauth.ErrBadProof) && !errors.Is(err, peerauth.ErrRefused) {
			t.Fatalf("wrong secret to %s: %v, want refused", p.id, err)
		}
	}
	// A connection that proved follower 0 cannot send a TimeoutNow in the leader's name.
	member := attacker(t, authDial(peerauth.Credential{Identity: followers[0].id, Key: mustSecret(t)}))
	err = member.TimeoutNow(raft.ServerID(followers[1].id), raft.ServerAddress(followers[1].addr),
		&raft.TimeoutNowRequest{RPCHeader: header(member, leaderPeer)}, &raft.TimeoutNowResponse{})
	if err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("TimeoutNow in another member's name over an authenticated connection: %v, want refused", err)
	}

	w.finish(t, "writes during the attacks")
	term2, leader2 := stableView(t, g)
	if term2 != term || leader2 != leaderID {
		t.Fatalf("after the attacks: term %d leader %s, was term %d leader %s", term2, leader2, term, leaderID)
	}
	sendRawOK(t, leader.addr, topic, "after")

	// A real leadership transfer (the leader's TimeoutNow, then the target's transfer votes)
	// passes the same checks over authenticated links.
	var target *broker
	for _, b := range g.nodes {
		if b.props["dLegerSelfId"] == followers[0].id {
			target = b
		}
	}
	resp, err := rawRequest(leader.addr, int(remoting.TransferRaftLeader), map[string]string{"nodeId": followers[0].id, "timeoutMillis": "5000"}, nil, 8*time.Second)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("transfer to %s: %v %+v", followers[0].id, err, resp)
	}
	if next := g.waitMaster(t, 20*time.Second, leader); next != target {
		t.Fatalf("after the transfer to %s the route's master is %s", followers[0].id, next.addr)
	}
	leader = target
	sendRawOK(t, leader.addr, topic, "after-transfer")
	for _, s := range []string{"TimeoutNow refused", "transfer flag dropped"} {
		if n := g.countSince(map[*broker]int64{}, s); n != 0 {
			t.Fatalf("%d log lines %q: the transfer's own RPCs were refused", n, s)
		}
	}

	// Fast failover still works with authenticated links: the followers' probes of the
	// leader's port authenticate, and the survivor's own TimeoutNow reaches its Raft.
	marks := g.logSizes()
	began := time.Now()
	leader.kill()
	next := g.waitMaster(t, 20*time.Second, leader)
	sendRawOK(t, next.addr, topic, "after-failover")
	campaigns := g.countSince(marks, "fast failover: the leader's process is gone")
	t.Logf("kill -9 of the leader -> new master %s writable after %v (%d fast-failover campaign(s))", next.addr, time.Since(began).Round(time.Millisecond), campaigns)
	if campaigns == 0 {
		t.Fatal("no fast-failover campaign after the leader's kill")
	}
}

func mustSecret(t testing.TB) []byte {
	t.Helper()
	k, err := peerauth.ParseSecret(testPeerSecret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestPeerAuthOffGates: without a secret, the inbound gate alone stops the forged vote (term
// 2^64-1) and a TimeoutNow flood from a member that is not the leader: term and leader stay.
func TestPeerAuthOffGates(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3)
	leader := g.waitMaster(t, 30*time.Second, nil)
	topic := uniq("PeerGate")
	eventually(t, 20*time.Second, "first write", func() error {
		r, err := sendRaw(leader.addr, topic, 0, []byte("before"), "")
		if err == nil && r.Code != respSuccess {
			err = fmt.Errorf("code %d %q", r.Code, r.Remark)
		}
		return err
	})
	term, leaderID := stableView(t, g)
	peers := g.raftPeers(t)
	var followers []memberAddr
	for _, p := range peers {
		if p.id != leaderID {
			followers = append(followers, p)
		}
	}
	plain := attacker(t, nil)
	w := startWriter(leader.addr, topic)
	for _, p := range peers {
		as := followers[0]
		if p == as {
			as = followers[1]
		}
		var resp raft.RequestVoteResponse
		err := plain.RequestVote(raft.ServerID(p.id), raft.ServerAddress(p.addr), forgedVote(plain, as), &resp)
		if err == nil || !strings.Contains(err.Error(), "ceiling") {
			t.Fatalf("forged vote (term 2^64-1) to %s: %v %+v, want refused for its term", p.id, err, resp)
		}
	}
	sent, refused := flood(3*time.Second, peers, func(p memberAddr) error {
		as := followers[0]
		if p == as {
			as = followers[1]
		}
		return plain.TimeoutNow(raft.ServerID(p.id), raft.ServerAddress(p.addr),
			&raft.TimeoutNowRequest{RPCHeader: header(plain, as)}, &raft.TimeoutNowResponse{})
	})
	if refused != sent {
		t.Fatalf("TimeoutNow from a non-leader: %d of %d honoured", sent-refused, sent)
	}
	w.finish(t, "writes during the attacks")
	term2, leader2 := stableView(t, g)
	if term2 != term || leader2 != leaderID {
		t.Fatalf("after the attacks: term %d leader %s, was term %d leader %s", term2, leader2, term, leaderID)
	}
}

// TestPeerAuthHA: a classic SYNC_MASTER and its slave with the group secret. A peer that sends
// the old "stream from offset 0" report (8 zero bytes), or a full hello with a wrong proof,
// gets no commitlog byte and the connection closes; while only such a peer is connected a
// SYNC_MASTER send is SLAVE_NOT_AVAILABLE (it cannot acknowledge); the real slave with the
// secret replicates.
func TestPeerAuthHA(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	secret := writePeerSecret(t)
	opts := append(haProps(1<<20), withProp("brokerRole", "SYNC_MASTER"), withProp("syncFlushTimeout", "1500"), secret)
	master := startBroker(t, ns, opts...)
	haAddr := "127.0.0.1:" + strconv.Itoa(master.port+1)
	topic := uniq("PeerAuthHA")
	for i := range 20 {
		r, err := sendRaw(master.addr, topic, 0, []byte("before-"+strconv.Itoa(i)), "")
		if err != nil || (r.Code != respSuccess && r.Code != 11) {
			t.Fatalf("send without slave: %v %+v", err, r)
		}
	}

	// 8 zero bytes, kept open while a send waits for an acknowledgement.
	zero, err := net.Dial("tcp", haAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer zero.Close()
	if _, err := zero.Write(make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	r, err := sendRaw(master.addr, topic, 0, []byte("fake-slave-only"), "")
	if err != nil || r.Code != 11 {
		t.Fatalf("send with only an unauthenticated peer connected: %v %+v, want SLAVE_NOT_AVAILABLE (11)", err, r)
	}
	_ = zero.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(zero)
	if errors.Is(err, syscall.ECONNRESET) { // closed with the rest of our bytes unread
		err = nil
	}
	if len(got) != 0 || err != nil {
		t.Fatalf("8 zero bytes: got %d bytes back, read error %v; want none and the connection closed", len(got), err)
	}

	// A full hello claiming a slave, then a proof that is not one.
	fake, err := net.Dial("tcp", haAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	hello := append([]byte(peerauth.Magic), peerauth.Version, byte(len(peerauth.PurposeHA)))
	hello = append(hello, peerauth.PurposeHA...)
	hello = append(hello, 0, byte(len(master.name+"/1")))
	hello = append(hello, master.name+"/1"...)
	hello = append(hello, make([]byte, peerauth.NonceSize)...)
	if _, err := fake.Write(hello); err != nil {
		t.Fatal(err)
	}
	_ = fake.SetReadDeadline(time.Now().Add(10 * time.Second))
	challenge := make([]byte, len(peerauth.Magic)+1+peerauth.NonceSize+peerauth.ProofSize)
	if _, err := io.ReadFull(fake, challenge); err != nil {
		t.Fatalf("read challenge: %v", err)
	}
	if _, err := fake.Write(append(make([]byte, peerauth.ProofSize), make([]byte, 8)...)); err != nil { // a zero proof, then a report
		t.Fatal(err)
	}
	rest, err := io.ReadAll(fake)
	if errors.Is(err, syscall.ECONNRESET) {
		err = nil
	}
	if err != nil || len(rest) != 1 || rest[0] != 1 {
		t.Fatalf("after a wrong proof: got %v (%d bytes), %v; want only the refusal byte and the connection closed", rest[:min(len(rest), 16)], len(rest), err)
	}

	slave := startSlave(t, ns, master.name, 1, append(haProps(1<<20), secret)...)
	eventually(t, 20*time.Second, "SEND_OK with the authenticated slave", func() error {
		r, err := sendRaw(master.addr, topic, 0, []byte("with-slave"), "")
		if err != nil {
			return err
		}
		if r.Code != respSuccess {
			return fmt.Errorf("code %d %q", r.Code, r.Remark)
		}
		return nil
	})
	end := waitCaughtUp(t, master.addr, slave.addr, 20*time.Second)
	compareCommitLogDirs(t, filepath.Join(master.storeRoot, "commitlog"), filepath.Join(slave.storeRoot, "commitlog"), end)
}

// TestPeerAuthHAWithACL: with aclEnable and the broker account, the HA link proves that
// account: the slave with it replicates; a non-admin account, or the admin account with a wrong
// secret, is refused at the handshake.
func TestPeerAuthHAWithACL(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	aclOpts := aclBrokerOpts(writeACLFile(t))
	master := startBroker(t, ns, append(haProps(1<<20), aclOpts...)...)
	haAddr := "127.0.0.1:" + strconv.Itoa(master.port+1)
	topic := uniq("PeerAuthACL")
	send := func(body string) error {
		ext := map[string]string{"producerGroup": "RAW_TEST_PRODUCER", "topic": topic, "defaultTopic": "TBW102",
			"defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10),
			"flag": "0", "properties": "", "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}
		r, err := signedRaw(master.addr, codeSendMessage, ext, []byte(body), aclAppAK, aclAppSK)
		if err == nil && r.Code != respSuccess {
			err = fmt.Errorf("code %d %q", r.Code, r.Remark)
		}
		return err
	}
	for i := range 20 {
		eventually(t, 10*time.Second, "signed send", func() error { return send("before-" + strconv.Itoa(i)) })
	}
	for _, cred := range []peerauth.Credential{
		{Identity: aclAppAK, Key: []byte(aclAppSK)},           // a valid account, not an admin
		{Identity: aclAdminAK, Key: []byte("not-the-secret")}, // the admin's id, wrong secret
	} {
		c, err := net.Dial("tcp", haAddr)
		if err != nil {
			t.Fatal(err)
		}
		err = peerauth.Client(c, peerauth.PurposeHA, cred, 5*time.Second)
		c.Close()
		if !errors.Is(err, peerauth.ErrBadProof) && !errors.Is(err, peerauth.ErrRefused) {
			t.Fatalf("HA handshake as %s: %v, want refused", cred.Identity, err)
		}
	}
	slave := startSlave(t, ns, master.name, 1, append(haProps(1<<20), aclOpts...)...)
	signedMax := func(addr string) (int64, error) {
		resp, err := signedRaw(addr, codeGetBrokerRuntimeInfo, map[string]string{}, nil, aclAdminAK, aclAdminSK)
		if err != nil {
			return 0, err
		}
		if resp.Code != respSuccess {
			return 0, fmt.Errorf("runtime info: code %d %q", resp.Code, resp.Remark)
		}
		for _, m := range runtimeKeyRE.FindAllSubmatch(resp.Body, -1) {
			if string(m[1]) == "commitLogMaxOffset" {
				return strconv.ParseInt(string(m[2]), 10, 64)
			}
		}
		return 0, errors.New("no commitLogMaxOffset in the runtime info")
	}
	var end int64
	eventually(t, 20*time.Second, "the slave catches up", func() error {
		m, err := signedMax(master.addr)
		if err != nil {
			return err
		}
		s, err := signedMax(slave.addr)
		if err != nil {
			return err
		}
		if s != m || m == 0 {
			return fmt.Errorf("slave at %d, master at %d", s, m)
		}
		end = m
		return nil
	})
	compareCommitLogDirs(t, filepath.Join(master.storeRoot, "commitlog"), filepath.Join(slave.storeRoot, "commitlog"), end)
}
