package dledger

import (
	"errors"

	"github.com/hashicorp/raft"
)

// LeaderChanges delivers true when this node has become leader and applied everything committed
// before its term (a Barrier completed), and false when it lost leadership. The channel holds the
// latest value only: a slow reader sees the current state, intermediate flips may coalesce, and
// Raft is never blocked by it. It is never closed.
func (n *Node) LeaderChanges() <-chan bool { return n.changes }

// observe turns raft's NotifyCh into LeaderChanges.
func (n *Node) observe() {
	defer n.observerWG.Done()
	for {
		select {
		case <-n.stop:
			return
		case leader := <-n.notify:
			if leader && n.barrier() {
				n.leaderReady.Store(true)
				n.publish(true)
			} else if !leader && n.leaderReady.Swap(false) {
				n.publish(false)
			}
		}
	}
}

// barrier waits until the FSM has applied every entry before this term's. It returns false if
// leadership was lost (a false notification follows) or the node is stopping: the wait ends
// when stop closes even if Raft never answers the barrier (shutdown.go says when it would not).
func (n *Node) barrier() bool {
	for {
		err := awaitFuture(n.raft.Barrier(n.cfg.ElectionTimeout*4), n.stop)
		switch {
		case err == nil:
			return true
		case errors.Is(err, raft.ErrRaftShutdown):
			return false
		case errors.Is(err, raft.ErrEnqueueTimeout):
			select {
			case <-n.stop:
				return false
			default:
				continue
			}
		default:
			n.cfg.Logger.Warn("leadership barrier failed", "error", err)
			return false
		}
	}
}

// publish overwrites the pending value in n.changes with v.
func (n *Node) publish(v bool) {
	for {
		select {
		case n.changes <- v:
			return
		default:
		}
		select {
		case <-n.changes:
		default:
		}
	}
}
