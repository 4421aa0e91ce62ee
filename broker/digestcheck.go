package broker

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/fsm"
)

// Replica digest checks (fsm/digest.go): the leader proposes its running digest every
// digestCheckInterval; every replica compares it with its own when it applies the entry. A
// replica that disagrees has stopped applying (the state machine saw to that) and serves no reads
// (fsm.Acquire fails); watchDiverged, on watchRole's ticks, takes it out of the group: it
// unregisters from the name servers, registers nothing more and shuts its Raft node down, so it
// neither votes nor leads, and stays up so raftStatus, /status and the metrics show why.

// digestCheckInterval is how often a leader proposes a digest check: one small entry, so a
// divergence is reported within seconds of being applied.
const digestCheckInterval = 2 * time.Second

// proposeDigestChecks runs until the group closes: while this node leads, it proposes a check of
// its digest whenever it has applied something since the last one (a rebase if it does not know
// its digest).
func (rg *raftGroup) proposeDigestChecks(logger hclog.Logger) {
	t := time.NewTicker(digestCheckInterval)
	defer t.Stop()
	var last uint64
	for {
		select {
		case <-rg.readCtx.Done():
			return
		case <-t.C:
		}
		if !rg.node.IsLeader() || rg.fsm.Diverged() != nil {
			continue
		}
		idx, sum, known := rg.fsm.Digest()
		if idx == last {
			continue
		}
		data := fsm.EncodeDigestCheck(idx, sum)
		if !known {
			data = fsm.EncodeDigestCheck(0, 0)
		}
		ctx, cancel := context.WithTimeout(rg.readCtx, digestCheckInterval)
		_, err := rg.node.Apply(ctx, data)
		cancel()
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				logger.Debug("digest check not committed", "index", idx, "error", err)
			}
			continue
		}
		// The check is applied now; an idle group proposes no more until something else is.
		last, _, _ = rg.fsm.Digest()
	}
}

// watchDiverged takes a replica whose digest check failed out of its group, once.
func (ra *raftAdmin) watchDiverged(rp *raftPlace, w *memberWatch) {
	d := rp.fsm.Diverged()
	if d == nil || w.divergedHandled {
		return
	}
	w.divergedHandled = true
	ra.logger.Error("this replica diverged from its group: it unregisters, shuts its Raft node down and serves nothing; rebuild it (mqadmin removePeer, delete its data directory, restart with dLegerJoin=true, mqadmin addPeer)",
		"detail", d.String())
	rp.setRole(roleUnknown)
	ra.unregisterAsync()
	ra.wg.Add(1)
	go func() {
		defer ra.wg.Done()
		if err := rp.node.Shutdown(); err != nil {
			ra.logger.Warn("shutting down the diverged replica's raft node", "error", err)
		}
	}()
}

// excluded reports whether this node must register nothing and serve no writes: removed from
// the group's configuration, diverged from it, or stopping after a disk failure (diskfail.go).
func (rg *raftGroup) excluded() bool {
	return rg.removed.Load() || rg.fsm.Diverged() != nil || rg.diskFailed.Load()
}
