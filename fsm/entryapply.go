package fsm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"rocketraft/storage"
)

// The apply side of the commitlog log store (Config.EntryLog): an entry's records are already in
// the commitlog, written when Raft stored the entry, with the queue offsets the leader gave them;
// applying it dispatches them where they lie (storage.Store.DispatchWritten). A send whose queue
// offsets are not the ones its queues expect (the leader's counters had moved on: a topic
// deleted, a delivery step refused, an entry lost before it reached the log) is refused on every
// replica alike with storage.ErrQueueOffsetStale; its records stay in the commitlog, never
// visible, and the leader reloads its counters (Sequencer) before it proposes again.

// LogStore is the Raft log store that lives in this state machine's commitlog, or nil when
// Config.EntryLog is off.
func (f *FSM) LogStore() raft.LogStore {
	if f.entries == nil {
		return nil
	}
	return f.entries
}

// Sequencer stamps the leader's proposals with their queue offsets, or is nil when
// Config.EntryLog is off.
func (f *FSM) Sequencer() *Sequencer { return f.seq }

// nextQueueOffset is the applied state's next queue offset of a queue, for the sequencer, which
// calls it only after a barrier (everything proposed before is applied).
func (f *FSM) nextQueueOffset(topic string, queueID int32) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, release, err := f.Acquire(ctx)
	if err != nil {
		return 0 // no store: the proposal is refused as stale when applied, and reloaded
	}
	defer release()
	return st.MaxOffset(topic, queueID)
}

// invalidateSequence makes the leader reload its queue counters before its next proposal.
func (f *FSM) invalidateSequence() {
	if f.seq != nil {
		f.seq.Invalidate()
	}
}

// dispatchMessages applies message entry l in place. Hold f.mu.
func (f *FSM) dispatchMessages(l *raft.Log) []AppendOutcome {
	end, form, counts, err := f.entries.messageCounts(l.Index)
	if err != nil {
		panic(fmt.Sprintf("fsm: raft entry %d (term %d): %v; a state machine must not skip an entry", l.Index, l.Term, err))
	}
	var outs []AppendOutcome
	var groups []storage.DispatchGroup
	if form == formMessages {
		// the records lie in the commitlog in the entry's order (splitEntry, which decoded and
		// checked l.Data as it stored them, so it is not decoded again); on the leader that
		// proposed the entry, the send path's reads of their properties come along (LeaderScans)
		scans := f.cfg.Scans.take(l.Data, counts)
		outs = make([]AppendOutcome, len(counts))
		groups = make([]storage.DispatchGroup, len(counts))
		for i, n := range counts {
			groups[i].Records = n
			if scans != nil {
				groups[i].Scans = scans[i]
			}
		}
	} else {
		appends := mustDecodeMessages(l)
		outs = make([]AppendOutcome, len(appends))
		// Stored whole (entryheader.go splitEntry): some record is not a stored record in
		// canonical form, which every replica decides alike. Refuse every append of it.
		for i, recs := range appends {
			err := checkStamped(i, recs)
			if err == nil {
				err = fmt.Errorf("fsm: append %d: %w: the entry holds records that are not in stored form, so none of it is stored", i, storage.ErrMessageIllegal)
			}
			outs[i].Err = err
		}
	}
	stored := f.dispatch(l, end, groups)
	for i := range groups {
		outs[i] = AppendOutcome{Results: stored[i].Results, Err: stored[i].Err}
		if errors.Is(stored[i].Err, storage.ErrQueueOffsetStale) {
			f.invalidateSequence()
		}
	}
	return outs
}

// dispatchSchedule applies a delay-delivery step in place: its records are dispatched iff the
// step is applied (apply, the level's progress matched) and their queue offsets are current.
// Hold f.mu.
func (f *FSM) dispatchSchedule(l *raft.Log, d *ScheduleDeliver, apply bool) ScheduleResult {
	end, form, err := f.entries.entrySpan(l.Index)
	if err != nil {
		panic(fmt.Sprintf("fsm: raft entry %d (term %d): %v; a state machine must not skip an entry", l.Index, l.Term, err))
	}
	if !apply {
		f.invalidateSequence() // the leader counted these records
	}
	var res ScheduleResult
	if form != formSchedule {
		f.dispatch(l, end, nil)
		if apply && len(d.Records) > 0 {
			res.Err = fmt.Errorf("fsm: delivery step: %w: its records are not in stored form", storage.ErrMessageIllegal)
		}
		return res
	}
	out := f.dispatch(l, end, []storage.DispatchGroup{{Records: len(d.Records), Skip: !apply}})
	if apply {
		res.Results, res.Err = out[0].Results, out[0].Err
		if errors.Is(res.Err, storage.ErrQueueOffsetStale) {
			f.invalidateSequence()
		}
	}
	return res
}

// dispatch makes the commitlog visible through end. A local failure stops the replica, as a
// failed append does (appendAll).
func (f *FSM) dispatch(l *raft.Log, end int64, groups []storage.DispatchGroup) []storage.BatchOutcome {
	out, err := f.store.DispatchWritten(end, groups)
	if err != nil {
		if f.cfg.OnDiskFailure != nil {
			f.cfg.OnDiskFailure(fmt.Sprintf("consume queue write applying raft entry %d", l.Index), err)
		}
		f.log.Error("raft apply failed to dispatch the entry's records; stopping this replica", "index", l.Index, "term", l.Term, "error", err)
		panic(fmt.Sprintf("fsm: raft entry %d (term %d): dispatch failed: %v; this replica cannot continue without diverging (fix the disk, then restart it: recovery rolls back to the applied marker and Raft replays)", l.Index, l.Term, err))
	}
	return out
}
