package dledger

import (
	"bytes"
	"errors"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"rocketraft/peerauth"
)

// fixedView is a raftView with a fixed term, leader and voters.
type fixedView struct {
	term   uint64
	leader string
	voters []string
}

func (v fixedView) CurrentTerm() uint64 { return v.term }
func (v fixedView) LeaderWithID() (raft.ServerAddress, raft.ServerID) {
	if v.leader == "" {
		return "", ""
	}
	return raft.ServerAddress(v.leader + ":1"), raft.ServerID(v.leader)
}
func (v fixedView) GetConfiguration() raft.ConfigurationFuture {
	return configFuture{v.voters}
}

type configFuture struct{ voters []string }

func (configFuture) Error() error  { return nil }
func (configFuture) Index() uint64 { return 1 }
func (f configFuture) Configuration() raft.Configuration {
	var c raft.Configuration
	for _, v := range f.voters {
		c.Servers = append(c.Servers, raft.Server{ID: raft.ServerID(v), Address: raft.ServerAddress(v + ":1"), Suffrage: raft.Voter})
	}
	c.Servers = append(c.Servers, raft.Server{ID: "learner", Address: "learner:1", Suffrage: raft.Nonvoter})
	return c
}

func hdr(id string) raft.RPCHeader { return raft.RPCHeader{ID: []byte(id), Addr: []byte(id + ":1")} }

func TestRPCGate(t *testing.T) {
	g := &rpcGate{warn: newLimitedLog(testLogger("gate"), time.Second)}
	if err := g.check(&raft.AppendEntriesRequest{Term: 1}, "x"); err == nil {
		t.Fatal("an RPC before Raft started was let through")
	}
	g.attach(fixedView{term: 10, leader: "n0", voters: []string{"n0", "n1", "n2"}})

	terms := map[uint64]bool{9: true, 10: true, 11: true, 10 + maxTermJump: true, 11 + maxTermJump: false, math.MaxUint64: false, maxTerm: false}
	for term, ok := range terms {
		for _, req := range []any{
			&raft.AppendEntriesRequest{RPCHeader: hdr("n0"), Term: term},
			&raft.RequestVoteRequest{RPCHeader: hdr("n1"), Term: term},
			&raft.RequestPreVoteRequest{RPCHeader: hdr("n1"), Term: term},
			&raft.InstallSnapshotRequest{RPCHeader: hdr("n0"), Term: term},
		} {
			if err := g.check(req, "x"); (err == nil) != ok {
				t.Errorf("%T term %d: %v, want accepted %v", req, term, err, ok)
			}
		}
	}

	// A fresh node (term 0) accepts a long-lived group's term, but not the ceiling.
	fresh := &rpcGate{warn: g.warn}
	fresh.attach(fixedView{})
	if err := fresh.check(&raft.AppendEntriesRequest{Term: 123456}, "x"); err != nil {
		t.Fatalf("fresh node: %v", err)
	}
	if err := fresh.check(&raft.AppendEntriesRequest{Term: math.MaxUint64}, "x"); err == nil {
		t.Fatal("fresh node took term 2^64-1")
	}

	// TimeoutNow: only from the leader this node follows.
	if err := g.check(&raft.TimeoutNowRequest{RPCHeader: hdr("n0")}, "x"); err != nil {
		t.Fatalf("TimeoutNow from the leader: %v", err)
	}
	for _, from := range []string{"n1", "", "stranger"} {
		if err := g.check(&raft.TimeoutNowRequest{RPCHeader: hdr(from)}, "x"); err == nil {
			t.Errorf("TimeoutNow from %q honoured", from)
		}
	}
	leaderless := &rpcGate{warn: g.warn}
	leaderless.attach(fixedView{term: 10, voters: []string{"n0", "n1"}})
	if err := leaderless.check(&raft.TimeoutNowRequest{RPCHeader: hdr("n0")}, "x"); err == nil {
		t.Error("TimeoutNow honoured with no leader known")
	}

	// Leadership-transfer votes: the flag survives only at term+1 from a voter.
	for _, c := range []struct {
		id   string
		term uint64
		keep bool
	}{{"n1", 11, true}, {"n1", 12, false}, {"n1", 10, false}, {"learner", 11, false}, {"stranger", 11, false}} {
		req := &raft.RequestVoteRequest{RPCHeader: hdr(c.id), Term: c.term, LeadershipTransfer: true}
		if err := g.check(req, "x"); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if req.LeadershipTransfer != c.keep {
			t.Errorf("%s at term %d: transfer flag %v, want %v", c.id, c.term, req.LeadershipTransfer, c.keep)
		}
	}

	// A transfer's vote arriving after this node took its term (from the new leader) loses the
	// flag without a warning; one that skips a term is warned about.
	var logged bytes.Buffer
	quiet := &rpcGate{warn: newLimitedLog(hclog.New(&hclog.LoggerOptions{Output: &logged}), 0)}
	quiet.attach(fixedView{term: 11, leader: "n1", voters: []string{"n0", "n1", "n2"}})
	late := &raft.RequestVoteRequest{RPCHeader: hdr("n1"), Term: 11, LeadershipTransfer: true}
	if err := quiet.check(late, "x"); err != nil || late.LeadershipTransfer {
		t.Fatalf("late transfer vote: %v, flag %v", err, late.LeadershipTransfer)
	}
	if logged.Len() != 0 {
		t.Errorf("a late genuine transfer vote was warned about: %s", logged.String())
	}
	skip := &raft.RequestVoteRequest{RPCHeader: hdr("n1"), Term: 13, LeadershipTransfer: true}
	if err := quiet.check(skip, "x"); err != nil || skip.LeadershipTransfer {
		t.Fatalf("transfer vote two terms ahead: %v, flag %v", err, skip.LeadershipTransfer)
	}
	if !strings.Contains(logged.String(), "flag dropped") {
		t.Errorf("a transfer vote two terms ahead was not warned about: %q", logged.String())
	}
}

// authPair starts a transport with secret and returns it with a client transport holding
// clientSecret and claiming clientID.
func authPair(t *testing.T, secret, clientSecret []byte, clientID string) (*netTransport, *netTransport) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := newTransport(ln.Addr().String(), ln, testLogger("server"), "n0", secret)
	if err != nil {
		t.Fatal(err)
	}
	srv.in.gate.attach(fixedView{term: 5, leader: "n1", voters: []string{"n0", "n1", "n2"}})
	t.Cleanup(func() { srv.Close() })
	go func() {
		for rpc := range srv.Consumer() {
			rpc.Respond(&raft.AppendEntriesResponse{Term: 5, Success: true}, nil)
		}
	}()
	cli, err := newTransport("127.0.0.1:0", nil, testLogger("client"), clientID, clientSecret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return srv, cli
}

// TestAuthenticatedTransport: with a group secret, a peer holding it reaches Raft; one with
// another secret is refused at the handshake; one that proved its id cannot send RPCs in
// another member's name.
func TestAuthenticatedTransport(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	send := func(cli, srv *netTransport, as string) error {
		var resp raft.AppendEntriesResponse
		return cli.AppendEntries("n0", srv.LocalAddr(), &raft.AppendEntriesRequest{RPCHeader: hdr(as), Term: 5}, &resp)
	}
	srv, cli := authPair(t, secret, secret, "n1")
	if err := send(cli, srv, "n1"); err != nil {
		t.Fatalf("member with the secret: %v", err)
	}
	if err := send(cli, srv, "n2"); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("an RPC in another member's name: %v, want refused", err)
	}

	srv, cli = authPair(t, secret, []byte("another secret, long enough"), "n1")
	err := send(cli, srv, "n1")
	if !errors.Is(err, peerauth.ErrBadProof) && !errors.Is(err, peerauth.ErrRefused) {
		t.Fatalf("member's id with a wrong secret: %v, want refused at the handshake", err)
	}

	srv, cli = authPair(t, secret, nil, "n1")
	if err := send(cli, srv, "n1"); err == nil {
		t.Fatal("a peer without the handshake was served")
	}
}

// BenchmarkRPCGateAppendEntries: the gate's cost on the replication hot path (one atomic
// load of the term).
func BenchmarkRPCGateAppendEntries(b *testing.B) {
	g := &rpcGate{warn: newLimitedLog(testLogger("gate"), time.Second)}
	g.attach(fixedView{term: 10, leader: "n0", voters: []string{"n0", "n1", "n2"}})
	req := &raft.AppendEntriesRequest{RPCHeader: hdr("n0"), Term: 10}
	for b.Loop() {
		if err := g.check(req, "x"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendEntriesRoundTrip: one AppendEntries with a 1 KiB entry, answered by a consumer,
// through hashicorp/raft's own inbound transport (the control), ours, and ours with a secret
// (the handshake is paid once per pooled connection).
func BenchmarkAppendEntriesRoundTrip(b *testing.B) {
	entry := &raft.Log{Index: 1, Term: 10, Type: raft.LogCommand, Data: make([]byte, 1024)}
	serve := func(ch <-chan raft.RPC) {
		for rpc := range ch {
			rpc.Respond(&raft.AppendEntriesResponse{Term: 10, Success: true}, nil)
		}
	}
	run := func(b *testing.B, addr raft.ServerAddress, secret []byte) {
		cli, err := newTransport("127.0.0.1:0", nil, testLogger("client"), "n1", secret)
		if err != nil {
			b.Fatal(err)
		}
		defer cli.Close()
		req := &raft.AppendEntriesRequest{RPCHeader: hdr("n1"), Term: 10, Entries: []*raft.Log{entry}}
		for b.Loop() {
			var resp raft.AppendEntriesResponse
			if err := cli.AppendEntries("n0", addr, req, &resp); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("library", func(b *testing.B) {
		lib, err := raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, 3, 10*time.Second, testLogger("lib"))
		if err != nil {
			b.Fatal(err)
		}
		defer lib.Close()
		go serve(lib.Consumer())
		run(b, lib.LocalAddr(), nil)
	})
	for _, c := range []struct {
		name   string
		secret []byte
	}{{"ours", nil}, {"ours+secret", []byte("0123456789abcdef0123456789abcdef")}} {
		b.Run(c.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			srv, err := newTransport(ln.Addr().String(), ln, testLogger("server"), "n0", c.secret)
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			srv.in.gate.attach(fixedView{term: 10, leader: "n1", voters: []string{"n0", "n1", "n2"}})
			go serve(srv.Consumer())
			run(b, srv.LocalAddr(), c.secret)
		})
	}
}
