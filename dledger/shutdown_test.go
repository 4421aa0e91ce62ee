package dledger

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// shortenShutdownBounds makes Shutdown's and Batcher.Close's waits short for one test.
func shortenShutdownBounds(t *testing.T, d time.Duration) {
	r, o, b := raftStopWait, observerStopWait, batcherCloseWait
	raftStopWait, observerStopWait, batcherCloseWait = d, d, d
	t.Cleanup(func() { raftStopWait, observerStopWait, batcherCloseWait = r, o, b })
}

// TestShutdownLeaderless: the last running member of a three-node group, with no leader (the
// other two stopped) and campaigning, shuts down promptly and cleanly.
func TestShutdownLeaderless(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	lead := c.leader(10 * time.Second)
	for id, n := range c.nodes {
		if n != lead {
			c.stop(id)
		}
	}
	eventually(t, 10*time.Second, func() error {
		if id, _ := lead.Leader(); id != "" {
			return errors.New("still sees leader " + id)
		}
		return nil
	})
	start := time.Now()
	err := lead.Shutdown()
	took := time.Since(start)
	delete(c.nodes, lead.ID())
	if err != nil {
		t.Fatalf("shutdown of the leaderless node: %v", err)
	}
	if took > raftStopWait {
		t.Fatalf("shutdown of the leaderless node took %v (bound %v)", took, raftStopWait)
	}
	t.Logf("leaderless node shut down in %v", took.Round(time.Millisecond))
}

// enteringFSM signals each Apply before it runs (and perhaps blocks on the gate).
type enteringFSM struct {
	*testFSM
	entered chan struct{}
}

func (f *enteringFSM) Apply(l *raft.Log) any {
	select {
	case f.entered <- struct{}{}:
	default:
	}
	return f.testFSM.Apply(l)
}

// TestShutdownBoundedWhenRaftStuck: a state machine that never returns (a hung disk) keeps
// hashicorp/raft from stopping, and the leadership barrier waiting behind it from finishing.
// Shutdown still returns within its bounds, saying what it abandoned, and the barrier returns.
func TestShutdownBoundedWhenRaftStuck(t *testing.T) {
	shortenShutdownBounds(t, 500*time.Millisecond)
	gate := make(chan struct{})
	entered := make(chan struct{}, 3)
	c := newCluster(t, 3, nil, func() raft.FSM { return &enteringFSM{testFSM: &testFSM{gate: gate}, entered: entered} })
	t.Cleanup(func() { close(gate) }) // runs before the cluster's cleanup: the FSMs finish
	lead := c.leader(10 * time.Second)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = lead.Apply(ctx, []byte(`"gate"`)) // every FSM blocks on it
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no state machine reached the gated entry")
	}
	barrierDone := make(chan bool, 1)
	go func() { barrierDone <- lead.barrier() }()
	select {
	case ok := <-barrierDone:
		t.Fatalf("the barrier returned %v with the state machine blocked", ok)
	case <-time.After(200 * time.Millisecond):
	}

	start := time.Now()
	err := lead.Shutdown()
	took := time.Since(start)
	delete(c.nodes, lead.ID())
	if !errors.Is(err, ErrShutdownIncomplete) {
		t.Fatalf("shutdown with raft stuck: %v, want ErrShutdownIncomplete", err)
	}
	if bound := raftStopWait + observerStopWait + time.Second; took > bound {
		t.Fatalf("shutdown with raft stuck took %v (bound %v)", took, bound)
	}
	select {
	case ok := <-barrierDone:
		if ok {
			t.Fatal("the barrier reported success after shutdown")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the barrier still waits after shutdown")
	}
	t.Logf("shutdown with raft stuck returned in %v: %v", took.Round(time.Millisecond), err)
}

// TestBatcherCloseBounded: Close does not wait for an entry Raft never finishes beyond its bound.
func TestBatcherCloseBounded(t *testing.T) {
	shortenShutdownBounds(t, 300*time.Millisecond)
	gate := make(chan struct{})
	c := newCluster(t, 1, nil, func() raft.FSM { return &testFSM{gate: gate} })
	t.Cleanup(func() { close(gate) })
	lead := c.leader(10 * time.Second)
	b := NewBatcher(lead, testCodec, BatchOptions{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = b.Submit(ctx, "gate")
	}()
	eventually(t, 10*time.Second, func() error {
		if b.inflight.Load() == 0 {
			return errors.New("no entry in flight yet")
		}
		return nil
	})
	start := time.Now()
	b.Close()
	if took := time.Since(start); took > batcherCloseWait+time.Second {
		t.Fatalf("Close took %v with an entry stuck (bound %v)", took, batcherCloseWait)
	}
}
