package storage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Group commit. Appenders never sync. A SYNC_FLUSH appender publishes its bytes, kicks the
// flusher (a non-blocking send on a 1-slot channel) and waits on the current round's done
// channel. The flusher reads the commitlog end once, msyncs everything from the last flushed
// position to it in one call per segment, publishes the new flushed position and closes the
// round's channel, waking every appender that was waiting. Appends that arrive during a sync
// are covered by the next round, so the number of syncs per second is bounded by the disk, not
// by the number of appenders.

// flushLoop is the commitlog flusher goroutine.
func (s *Store) flushLoop() {
	defer s.wg.Done()
	interval := s.cfg.FlushIntervalCommitLog
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.flushKick:
		case <-t.C:
		}
		s.gather()
		if err := s.flushCommitLog(); err != nil {
			s.log.Error("commitlog flush failed", "error", err)
		}
	}
}

// kickFlushIfDue asks the flusher for a round now if FlushCommitLogBytes are unflushed below end.
func (s *Store) kickFlushIfDue(end int64) {
	if n := s.cfg.FlushCommitLogBytes; n > 0 && end-s.cl.flushed.Load() >= n {
		select {
		case s.flushKick <- struct{}{}:
		default:
		}
	}
}

// gather delays a sync briefly while several appenders are waiting and bytes keep arriving,
// so one sync covers the appenders just released by the previous round instead of leaving them
// to the round after (which halves the batch: two groups alternate). It waits while the
// commitlog grew in the last 50 µs, for at most half the last sync's duration (≤ 2 ms). A lone
// appender is never delayed.
func (s *Store) gather() {
	if s.waiters.Load() < 2 {
		return
	}
	limit := min(time.Duration(s.lastSyncNanos.Load())/2, 2*time.Millisecond)
	deadline := time.Now().Add(limit)
	prev := s.cl.writePos.Load()
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Microsecond)
		cur := s.cl.writePos.Load()
		if cur == prev {
			return
		}
		prev = cur
	}
}

// flushCommitLog syncs the commitlog up to its current end and wakes waiting appenders. In
// EntryLog mode it syncs up to the written end (syncWrittenLocked) and moves the flushed end up
// to the dispatched end that covers.
func (s *Store) flushCommitLog() error {
	s.clFlushMu.Lock()
	defer s.clFlushMu.Unlock()
	defer s.endFlushRound()
	if s.released {
		return ErrStoreClosed
	}
	if err := s.failed(); err != nil {
		return err
	}
	if s.cl.entryLog {
		// the written bytes, which include every dispatched one
		began := time.Now()
		if err := s.syncWrittenLocked(false); err != nil {
			return err
		}
		s.lastSyncNanos.Store(int64(time.Since(began)))
		s.flushRounds.Add(1)
		return nil
	}
	target := s.cl.writePos.Load()
	from := s.cl.flushed.Load()
	if target <= from {
		return nil
	}
	began := time.Now()
	if err := s.cl.segs.sync(from, target); err != nil {
		return s.fail(fmt.Errorf("commitlog flush [%d,%d): %w", from, target, err))
	}
	s.lastSyncNanos.Store(int64(time.Since(began)))
	s.cl.flushed.Store(target)
	s.flushRounds.Add(1)
	return nil
}

func (s *Store) endFlushRound() {
	s.flushMu.Lock()
	close(s.flushDone)
	s.flushDone = make(chan struct{})
	s.flushMu.Unlock()
}

// waitFlushed blocks until the commitlog is durable up to end, the store fails, or
// syncFlushTimeout (or ctx) expires.
func (s *Store) waitFlushed(ctx context.Context, end int64) error {
	timer := time.NewTimer(s.cfg.SyncFlushTimeout)
	defer timer.Stop()
	s.waiters.Add(1)
	defer s.waiters.Add(-1)
	for {
		s.flushMu.Lock()
		done := s.flushDone
		s.flushMu.Unlock()
		if s.cl.flushed.Load() >= end {
			return nil
		}
		if err := s.failed(); err != nil {
			return err
		}
		select {
		case s.flushKick <- struct{}{}:
		default:
		}
		select {
		case <-done:
		case <-timer.C:
			return fmt.Errorf("append: not flushed within %v: %w", s.cfg.SyncFlushTimeout, ErrFlushDiskTimeout)
		case <-ctx.Done():
			return fmt.Errorf("append: %w: %w", ErrFlushDiskTimeout, ctx.Err())
		}
	}
}

// logicsLoop periodically makes consume queues, index and checkpoint durable.
func (s *Store) logicsLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.FlushIntervalConsumeQueue)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if err := s.flushLogicsOpt(true); err != nil {
			s.log.Error("consume queue / index flush failed", "error", err)
		}
	}
}

// flushLogics syncs every consume queue and index file written since the last call, then
// records in the checkpoint the commitlog offset below which all of that is durable.
// Recovery re-dispatches from there.
func (s *Store) flushLogics() error { return s.flushLogicsOpt(false) }

// flushLogicsOpt is flushLogics; with periodic it leaves the index file the checkpoint names as
// active (and any newer one) unsynced. Crash recovery never trusts those files: it drops every
// index file from the checkpoint's indexFileID on and rebuilds them from indexRebuildFrom (the
// active file's first entry), so syncing them buys nothing but I/O. And it costs a lot: hash
// slots are spread over the whole slot table, so each msync wrote back most of its pages (20 MB
// at the default 5,000,000 slots) and write-protected them again, and the next entry in each
// slot page took a page fault (about 13 % of a DLedger follower's CPU, measured with perf).
// Sealed files are still synced before a checkpoint names a newer file, and Close, Flush and
// recovery sync everything, so a clean shutdown leaves a fully durable index.
func (s *Store) flushLogicsOpt(periodic bool) error {
	s.logicsMu.Lock()
	defer s.logicsMu.Unlock()
	if s.released {
		return ErrStoreClosed
	}
	if err := s.failed(); err != nil {
		return err
	}
	// Snapshot under the append lock: everything before dispatched is in the queues/index,
	// and the index state matches it.
	s.mu.Lock()
	dispatched := s.cl.writePos.Load()
	lastTS := s.lastStoreTS.Load()
	queues := s.allQueues()
	maxes := make([]int64, len(queues))
	for i, q := range queues {
		maxes[i] = q.max.Load()
	}
	var idxID, idxFrom int64
	if s.idx != nil {
		idxID, idxFrom = s.idx.active(dispatched)
	}
	s.mu.Unlock()

	var errs []error
	for i, q := range queues {
		if err := q.sync(maxes[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if s.idx != nil {
		skipFrom := int64(math.MaxInt64)
		if periodic && idxID != 0 {
			skipFrom = idxID
		}
		if err := s.idx.sync(skipFrom); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return s.fail(err)
	}
	durable := min(dispatched, s.cl.flushed.Load())
	cp := checkpoint{
		physicMsgTimestamp: lastTS,
		logicsMsgTimestamp: lastTS,
		indexMsgTimestamp:  lastTS,
		dispatchedOffset:   durable,
		indexFileID:        idxID,
		indexRebuildFrom:   min(idxFrom, durable),
	}
	if err := s.cp.write(cp); err != nil {
		return s.fail(err)
	}
	return nil
}
