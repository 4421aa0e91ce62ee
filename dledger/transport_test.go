package dledger

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// fakePeer is a peer's transport on addr answering every RPC with answer, until stopped.
func fakePeer(t *testing.T, addr, name string, answer func(rpc raft.RPC)) (stop func()) {
	t.Helper()
	var ln net.Listener
	eventually(t, 10*time.Second, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		if err != nil && !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatal(err)
		}
		return err
	})
	tr, err := newTransport(addr, ln, testLogger(name), name, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr.in.gate.attach(fixedView{})
	done := make(chan struct{})
	go func() {
		for {
			select {
			case rpc := <-tr.Consumer():
				answer(rpc)
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		tr.Close()
	}
}

// freeAddr returns a loopback address nothing listens on (a port just released).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// selfTransport is this node's transport on a fresh loopback port, closed when the test ends.
func selfTransport(t *testing.T) *netTransport {
	t.Helper()
	self, err := newTransport("127.0.0.1:0", nil, testLogger("self"), "self", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { self.Close() })
	return self
}

// voter is a peer's transport that grants every vote request, until stopped.
func voter(t *testing.T, addr string) (stop func()) {
	return fakePeer(t, addr, "voter", func(rpc raft.RPC) { rpc.Respond(&raft.RequestVoteResponse{Granted: true}, nil) })
}

// TestVoteRequestSurvivesPeerRestart: the transport's pool still holds a connection to a peer's
// previous process; the plain NetworkTransport fails the next vote request on it, ours sends it
// again on a fresh connection.
func TestVoteRequestSurvivesPeerRestart(t *testing.T) {
	addr := freeAddr(t)
	self := selfTransport(t)
	vote := func(tr raft.Transport) error {
		var resp raft.RequestVoteResponse
		err := tr.RequestVote("peer", raft.ServerAddress(addr), &raft.RequestVoteRequest{Term: 1}, &resp)
		if err == nil && !resp.Granted {
			err = errors.New("not granted")
		}
		return err
	}
	restartPeer := func(stop func()) func() {
		stop()
		return voter(t, addr)
	}

	stop := voter(t, addr)
	if err := vote(self); err != nil { // leaves a pooled connection to this process
		t.Fatal(err)
	}
	stop = restartPeer(stop)
	if err := vote(self); err == nil || !deadConn(err) {
		t.Fatalf("plain transport after the peer restarted: %v, want a dead-connection error (the control)", err)
	}
	if err := vote(self); err != nil { // pools a connection to the new process
		t.Fatal(err)
	}
	stop = restartPeer(stop)
	defer func() { stop() }()
	if err := vote(raftTransport{netTransport: self}); err != nil {
		t.Fatalf("vote request after the peer restarted: %v", err)
	}
}

// TestHeartbeatsReachTheMainLoop: a heartbeat (an AppendEntries with no entries) sent to a node
// arrives on the transport's Consumer channel, which only Raft's main loop reads, even after Raft
// installed its fast-path handler; the plain NetworkTransport (the control) runs it on the
// handler instead, beside the main loop, which is how a resumed leader came to stamp a batch with
// a term it never led.
func TestHeartbeatsReachTheMainLoop(t *testing.T) {
	heartbeat := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ID: []byte("n1"), Addr: []byte("n1")},
		Term:      7,
	}
	send := func(t *testing.T, install func(func(raft.RPC)), consumer <-chan raft.RPC, addr string) (viaHandler bool) {
		t.Helper()
		handled := make(chan struct{}, 1)
		install(func(rpc raft.RPC) {
			handled <- struct{}{}
			rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: true}, nil)
		})
		client, err := newTransport("127.0.0.1:0", nil, testLogger("client"), "n1", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		errc := make(chan error, 1)
		go func() {
			var resp raft.AppendEntriesResponse
			errc <- client.AppendEntries("n0", raft.ServerAddress(addr), heartbeat, &resp)
		}()
		select {
		case <-handled:
			viaHandler = true
		case rpc := <-consumer:
			if req, ok := rpc.Command.(*raft.AppendEntriesRequest); !ok || req.Term != 7 || len(req.Entries) != 0 {
				t.Fatalf("consumer got %#v, want the heartbeat", rpc.Command)
			}
			rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: true}, nil)
		case <-time.After(10 * time.Second):
			t.Fatal("the heartbeat reached neither the handler nor the consumer in 10 s")
		}
		select {
		case err := <-errc:
			if err != nil {
				t.Fatalf("heartbeat: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no answer to the heartbeat in 10 s")
		}
		return viaHandler
	}

	plain, err := raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, 3, 10*time.Second, testLogger("plain"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	if !send(t, plain.SetHeartbeatHandler, plain.Consumer(), string(plain.LocalAddr())) {
		t.Fatal("control: the plain transport did not use the fast-path handler")
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	inner, err := newTransport(addr, ln, testLogger("ours"), "n0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() })
	inner.in.gate.attach(fixedView{term: 7, leader: "n1"})
	var tr raft.Transport = raftTransport{netTransport: inner} // what raft.NewRaft is given
	if send(t, tr.SetHeartbeatHandler, tr.Consumer(), addr) {
		t.Fatal("our transport ran the heartbeat on the fast-path handler; it must go to the main loop")
	}
}

// stuckPipeline is a pipeline whose AppendEntries blocks until Close, as hashicorp/raft's does
// once its queues are full and nobody reads its answers.
type stuckPipeline struct {
	closed chan struct{}
	once   sync.Once
	block  bool
}

func (p *stuckPipeline) AppendEntries(*raft.AppendEntriesRequest, *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	if !p.block {
		return nil, nil
	}
	<-p.closed
	return nil, raft.ErrPipelineShutdown
}
func (p *stuckPipeline) Consumer() <-chan raft.AppendFuture { return nil }
func (p *stuckPipeline) Close() error {
	p.once.Do(func() { close(p.closed) })
	return nil
}

// TestStalledPipelineIsClosed: a pipelined AppendEntries that cannot hand its request over is
// failed by closing the pipeline after the stall bound, so Raft's replication goroutine (and its
// Shutdown) is never stuck behind it; one that returns in time leaves the pipeline open.
func TestStalledPipelineIsClosed(t *testing.T) {
	c := raftTransport{stall: 100 * time.Millisecond}
	quick := &stuckPipeline{closed: make(chan struct{})}
	if _, err := guardedPipeline(quick, c, "peer").AppendEntries(&raft.AppendEntriesRequest{}, &raft.AppendEntriesResponse{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	select {
	case <-quick.closed:
		t.Fatal("a pipeline whose AppendEntries returned in time was closed")
	default:
	}

	stuck := &stuckPipeline{closed: make(chan struct{}), block: true}
	began := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := guardedPipeline(stuck, c, "peer").AppendEntries(&raft.AppendEntriesRequest{}, &raft.AppendEntriesResponse{})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the stalled AppendEntries succeeded")
		}
		if d := time.Since(began); d < 100*time.Millisecond {
			t.Fatalf("returned after %v, before the stall bound", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stalled pipelined AppendEntries was still blocked after 10 s")
	}
}

// appender is a peer's transport that accepts every AppendEntries, until stopped.
func appender(t *testing.T, addr string) (stop func()) {
	return fakePeer(t, addr, "appender", func(rpc raft.RPC) {
		rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true}, nil)
	})
}

// TestReplicationWaitsForADownPeer: an AppendEntries carrying entries to a peer that cannot be
// dialled is tried again until the peer is back, instead of failing at once into Raft's growing
// backoff; a heartbeat still fails at once, and the wait ends when the node shuts down.
func TestReplicationWaitsForADownPeer(t *testing.T) {
	addr := freeAddr(t)
	self := selfTransport(t)
	stop := make(chan struct{})
	tr := raftTransport{netTransport: self, stop: stop, downWait: 10 * time.Second}
	entries := func() *raft.AppendEntriesRequest {
		return &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("self")}, Term: 1, PrevLogEntry: 4, PrevLogTerm: 1,
			LeaderCommitIndex: 4, Entries: []*raft.Log{{Index: 5, Term: 1, Type: raft.LogCommand, Data: []byte("x")}}}
	}

	var resp raft.AppendEntriesResponse
	hb := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("self")}, Term: 1}
	start := time.Now()
	if err := tr.AppendEntries("peer", raft.ServerAddress(addr), hb, &resp); err == nil || !dialFailed(err) {
		t.Fatalf("heartbeat to a down peer: %v, want a dial error", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a heartbeat to a down peer took %v: it must not wait", took)
	}

	var stopPeer func()
	var mu sync.Mutex
	back := time.AfterFunc(400*time.Millisecond, func() {
		mu.Lock()
		defer mu.Unlock()
		stopPeer = appender(t, addr)
	})
	defer func() {
		back.Stop()
		mu.Lock()
		defer mu.Unlock()
		if stopPeer != nil {
			stopPeer()
		}
	}()
	start = time.Now()
	if err := tr.AppendEntries("peer", raft.ServerAddress(addr), entries(), &resp); err != nil || !resp.Success {
		t.Fatalf("entries to a peer back after 400 ms: %v, success %v", err, resp.Success)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 5*time.Second {
		t.Fatalf("entries answered after %v: want the peer's return (400 ms) plus at most a retry", took)
	}

	// A peer that never comes back: the wait ends with the node.
	gone := freeAddr(t)
	time.AfterFunc(200*time.Millisecond, func() { close(stop) })
	start = time.Now()
	if err := tr.AppendEntries("gone", raft.ServerAddress(gone), entries(), &resp); err == nil || !dialFailed(err) {
		t.Fatalf("entries to a peer that never came back: %v, want its dial error", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("the wait went on %v after the node stopped", took)
	}
}

// TestPipelineRefusedWhileAFollowerTrails: a follower whose last answer puts it more than one
// batch behind this node's log gets no pipeline (Raft's plain AppendEntries loop catches it up
// first, see AppendEntriesPipeline); one within a batch, or never heard from, does.
func TestPipelineRefusedWhileAFollowerTrails(t *testing.T) {
	addr := freeAddr(t)
	stopPeer := appender(t, addr)
	defer stopPeer()
	var last uint64
	tr := raftTransport{netTransport: selfTransport(t), followers: &followerLog{}, batch: 64,
		lastIndex: func() (uint64, error) { return last, nil }}
	target := raft.ServerAddress(addr)
	pipeline := func() error {
		p, err := tr.AppendEntriesPipeline("peer", target)
		if err == nil {
			p.Close()
		}
		return err
	}

	last = 1000
	if err := pipeline(); err != nil {
		t.Fatalf("a follower never heard from: %v, want a pipeline", err)
	}
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("self")}, Term: 1, PrevLogEntry: 4, PrevLogTerm: 1,
		LeaderCommitIndex: 4, Entries: []*raft.Log{{Index: 5, Term: 1, Type: raft.LogCommand, Data: []byte("x")}}}
	var resp raft.AppendEntriesResponse
	if err := tr.AppendEntries("peer", target, req, &resp); err != nil || !resp.Success {
		t.Fatalf("entries: %v, success %v", err, resp.Success)
	}
	for _, c := range []struct {
		last uint64
		want error
	}{{5, nil}, {5 + 64, nil}, {5 + 65, raft.ErrPipelineReplicationNotSupported}, {1000, raft.ErrPipelineReplicationNotSupported}} {
		last = c.last
		if err := pipeline(); !errors.Is(err, c.want) {
			t.Fatalf("follower at 5, log at %d: %v, want %v", c.last, err, c.want)
		}
	}
	tr.lastIndex = func() (uint64, error) { return 0, errors.New("log store closed") }
	if err := pipeline(); err != nil {
		t.Fatalf("the log's end unknown: %v, want a pipeline", err)
	}
}
