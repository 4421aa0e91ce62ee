package dledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// Sentinel errors; check them with errors.Is.
var (
	// ErrNotLeader: this node is not the leader, the entry was not appended (safe to retry on the
	// leader). The concrete error is a *NotLeaderError naming the leader when one is known.
	ErrNotLeader = errors.New("dledger: not the leader")
	// ErrLeadershipLost: leadership was lost while the entry was in flight; it may or may not be
	// committed by the next leader.
	ErrLeadershipLost = errors.New("dledger: leadership lost, outcome unknown")
	// ErrShutdown: the node or batcher is shut down.
	ErrShutdown = errors.New("dledger: shut down")
	// ErrUnknownPeer: the id is not in the current configuration.
	ErrUnknownPeer = errors.New("dledger: unknown peer")
	// ErrLogStoreMismatch: a follower refused entries proposed by a leader on another kind of
	// Raft log store (storeguard.go); every node of a group must use the same one.
	ErrLogStoreMismatch = errors.New("every node of a group must use the same raft log store")
)

// NotLeaderError is returned when a write reaches a node that is not the leader. LeaderID and
// LeaderAddr are empty when no leader is known (an election is in progress).
type NotLeaderError struct {
	LeaderID   string
	LeaderAddr string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return "dledger: not the leader (no leader known)"
	}
	return fmt.Sprintf("dledger: not the leader (leader %s at %s)", e.LeaderID, e.LeaderAddr)
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// translate maps hashicorp/raft errors onto ours, filling in the leader for ErrNotLeader.
func (n *Node) translate(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		id, addr := n.Leader()
		if id == n.cfg.SelfID { // stale view while stepping down
			id, addr = "", ""
		}
		return &NotLeaderError{LeaderID: id, LeaderAddr: addr}
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: %v", ErrLeadershipLost, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %v", ErrShutdown, err)
	}
	return err
}

// wait waits for f or ctx. A future abandoned because ctx ended still completes inside Raft.
func wait(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
