package fsm

import (
	"errors"
	"fmt"
	"time"

	"rocketraft/storage"
)

// The applied marker is written only after the commitlog bytes it names are durable, never per
// entry: an mmap'ed marker updated by Apply could reach the disk (kernel writeback) before the
// commitlog pages it describes, and a power loss then left a marker ahead of the store. syncLoop
// bounds the replay after a power loss; snapshots (Persist), topic deletions and Close write it
// too.

// syncLoop makes the applied state durable every MarkerSyncInterval until Close.
func (f *FSM) syncLoop() {
	defer close(f.syncDone)
	d := f.cfg.MarkerSyncInterval
	if d == 0 {
		d = DefaultMarkerSyncInterval
	}
	if d < 0 {
		<-f.syncStop
		return
	}
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-f.syncStop:
			return
		case <-t.C:
		}
		err := f.syncApplied(nil, applied{})
		if errors.Is(err, errDiskWrite) && f.cfg.OnDiskFailure != nil {
			f.cfg.OnDiskFailure("applied marker sync", err)
		}
		if err != nil && err != errMarkerClosed {
			f.log.Warn("making the applied marker durable failed; the next round retries", "error", err)
		}
	}
}

// syncApplied makes the current applied state durable: it captures it, flushes the commitlog up
// to its end, and only then writes and syncs the marker, so the marker never names bytes the
// commitlog on disk may lack. With want set (a snapshot's store), it fails if that store is no
// longer the FSM's; floor, if set, is a state whose whole store the caller has flushed.
func (f *FSM) syncApplied(want *storage.Store, floor applied) error {
	f.mu.Lock()
	st, mk, cur, known := f.store, f.mk, f.cur, f.dig.known
	diverged := f.divergence.Load() != nil
	f.mu.Unlock()
	if st == nil || mk == nil || (want != nil && st != want) {
		return fmt.Errorf("the store was replaced")
	}
	if diverged {
		return nil // keep the marker where the divergence found it
	}
	if m, written := mk.state(); written && m.Cur.Index >= cur.Index && m.Floor.Index >= floor.Index {
		return nil
	}
	if err := st.FlushCommitLog(cur.End); err != nil {
		if errors.Is(err, storage.ErrIO) {
			err = fmt.Errorf("%w: %w", errDiskWrite, err)
		}
		return fmt.Errorf("flush the commitlog before the marker: %w", err)
	}
	if f.entries != nil {
		// The commitlog holds records the state machine refused (entryapply.go), which a
		// recovery re-dispatching from it could not tell apart: make the consume queues and
		// the index durable first, so recovery never re-dispatches below the marker.
		if err := st.FlushDispatched(); err != nil {
			if errors.Is(err, storage.ErrIO) {
				err = fmt.Errorf("%w: %w", errDiskWrite, err)
			}
			return fmt.Errorf("flush the consume queues before the marker: %w", err)
		}
	}
	if err := mk.writeSync(markerState{Cur: cur, Floor: floor, DigestKnown: known}); err != nil {
		if err != errMarkerClosed {
			err = fmt.Errorf("%w: %w", errDiskWrite, err)
		}
		return err
	}
	return nil
}

// errDiskWrite marks a marker sync that failed on the disk (not on a closed or replaced store).
var errDiskWrite = errors.New("fsm: disk write failed")
