package dledger

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Shutdown is bounded whatever the state of the group. hashicorp/raft's own Shutdown waits for
// every goroutine it started: a vote request to a peer that accepted the connection but never
// answers (a stopped process) holds it for the transport's I/O deadline, and an FSM.Apply or a
// snapshot stuck on a hung disk holds it for good. And with raft.Config.BatchApplyCh a future
// that entered Raft's buffered apply channel just before it stopped is never answered, so a
// goroutine waiting on it (the leadership barrier in observer.go) would wait forever. A node whose
// process is stopping gains nothing from waiting: past these bounds Shutdown reports what it
// abandoned and returns, and the process exit releases the rest.

// Bounds of Shutdown's waits; variables so the tests can shorten them.
var (
	// raftStopWait bounds the wait for Raft's goroutines (raft.Raft.Shutdown's future).
	raftStopWait = 5 * time.Second
	// observerStopWait bounds the wait for this package's watcher goroutines once stop is closed.
	observerStopWait = 2 * time.Second
)

// ErrShutdownIncomplete: Shutdown returned before Raft or a watcher goroutine finished; the log
// and stable stores were left open (Raft may still be using them), to be released by the
// process exit.
var ErrShutdownIncomplete = errors.New("dledger: shutdown incomplete")

// Shutdown stops Raft (without handing leadership over: call TransferLeadership first for a
// graceful stop), then closes the transport and stores. It returns within about
// raftStopWait+observerStopWait (see the file comment), with an error wrapping
// ErrShutdownIncomplete when it had to stop waiting. It is idempotent.
func (n *Node) Shutdown() error {
	n.shutdownOnce.Do(func() { n.shutdownErr = n.shutdown() })
	return n.shutdownErr
}

func (n *Node) shutdown() error {
	start := time.Now()
	// Watchers first: each one selects on stop (the barrier too), so none is left waiting on
	// Raft while Raft stops.
	close(n.stop)
	raftDone := make(chan error, 1)
	f := n.raft.Shutdown()
	go func() { raftDone <- f.Error() }()
	var raftErr error
	raftStopped := true
	select {
	case raftErr = <-raftDone:
	case <-time.After(raftStopWait):
		raftStopped = false
		n.cfg.Logger.Error("raft did not stop within the shutdown bound; going on without it",
			"bound", raftStopWait, "hint", "a peer that accepts connections but never answers, or a state machine or disk that does not return")
	}
	n.peerLog.close()
	n.raft.DeregisterObserver(n.leaderObs)
	if n.voteObs != nil {
		n.raft.DeregisterObserver(n.voteObs)
	}
	watchersDone := make(chan struct{})
	go func() { n.observerWG.Wait(); close(watchersDone) }()
	watchersStopped := true
	select {
	case <-watchersDone:
	case <-time.After(observerStopWait):
		watchersStopped = false
		n.cfg.Logger.Error("raft watcher goroutines did not stop within the shutdown bound; going on without them", "bound", observerStopWait)
	}
	n.leaderReady.Store(false) // after the watchers: none of them sets it again
	if !raftStopped || !watchersStopped {
		// Raft (or a watcher reading its state) may still use the stores: closing them under it
		// could block (bbolt waits for a writer) or fail its writes. The transport is closed so
		// peers see this node gone, as after a clean stop.
		return errors.Join(fmt.Errorf("%w after %v: raft stopped %v, watchers stopped %v",
			ErrShutdownIncomplete, time.Since(start).Round(time.Millisecond), raftStopped, watchersStopped), n.trans.Close())
	}
	return errors.Join(raftErr, n.trans.Close(), n.logs.Close(), n.stab.Close())
}

// awaitFuture waits for f until it completes or stop closes (then raft.ErrRaftShutdown). The
// goroutine left behind by an abandoned future ends if Raft ever answers it.
func awaitFuture(f raft.Future, stop <-chan struct{}) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-stop:
		return raft.ErrRaftShutdown
	}
}
