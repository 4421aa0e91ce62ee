package dledger

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// voter is a peer's transport that grants every vote request, until stopped.
func voter(t *testing.T, addr string) (stop func()) {
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
	tr, err := newTransport(addr, ln, testLogger("voter"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case rpc := <-tr.Consumer():
				rpc.Respond(&raft.RequestVoteResponse{Granted: true}, nil)
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

// TestVoteRequestSurvivesPeerRestart: the transport's pool still holds a connection to a peer's
// previous process; the plain NetworkTransport fails the next vote request on it, ours sends it
// again on a fresh connection.
func TestVoteRequestSurvivesPeerRestart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	self, err := newTransport("127.0.0.1:0", nil, testLogger("self"))
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
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
	if err := vote(raftTransport{NetworkTransport: self}); err != nil {
		t.Fatalf("vote request after the peer restarted: %v", err)
	}
}
