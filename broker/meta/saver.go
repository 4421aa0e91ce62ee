package meta

import (
	"sync"
	"sync/atomic"
	"time"
)

// saver decides when a table's file is written. A change to a table that has not been written
// for the flush interval is written at once, by the caller, as before (an isolated admin change
// is on disk when its request is answered); changes arriving within the interval after a write
// are coalesced into one write at the interval's end, by a timer. Creating N topics in a burst
// therefore writes the file about once per interval instead of N times (each write is the
// whole table: O(N) each, O(N²) in all before). Interval 0, the default, writes every change at
// once. Flush writes what is pending (shutdown).
//
// Writes are ordered by the table's generation, a counter bumped under the table's write lock
// by every change: a snapshot older than the one last written is never written over it, so the
// file only moves forward whichever writer finishes first.
type saver struct {
	file jsonFile
	// snapshot copies the table and its generation under the table's read lock (timer and
	// Flush writes; the caller's own writes pass a copy made under its write lock).
	snapshot func() (any, uint64)
	what     string // for log lines

	mu       sync.Mutex
	interval time.Duration
	last     time.Time // when the last write ended
	writing  int       // writes under way (at once or by the timer)
	timer    *time.Timer
	dirty    bool           // a change is waiting for the timer
	inflight sync.WaitGroup // timer writes under way

	writeMu sync.Mutex // one write at a time
	written uint64     // generation on disk

	// changed and onDisk mirror the newest generation handed to changedLocked and the one
	// written, for sync's check without a lock (a send asks on every message).
	changed, onDisk atomic.Uint64
	saves           atomic.Int64 // files written, for tests of the coalescing
}

// setInterval sets the flush interval (0: write every change at once).
func (s *saver) setInterval(d time.Duration) {
	s.mu.Lock()
	s.interval = max(d, 0)
	s.mu.Unlock()
}

// changedLocked records a change at generation gen; the caller holds the table's write lock, and
// snapshotLocked copies the table under it (called only when this change is written at once).
// An error is the failed write's; a deferred write's error is logged (and retried).
//
// A change is written at once only when no write is under way and the last one ended an interval
// ago. Counting from a write's end, not its start, keeps a slow disk from undoing the coalescing:
// when one write took longer than the interval, every change after it was written at once again,
// each under the table's lock, and 20,000 group creations took 76 s instead of under 1.
func (s *saver) changedLocked(gen uint64, snapshotLocked func() any) error {
	s.changed.Store(gen)
	s.mu.Lock()
	now := time.Now()
	if s.interval <= 0 || (s.timer == nil && s.writing == 0 && now.Sub(s.last) >= s.interval) {
		s.writing++
		s.mu.Unlock()
		err := s.write(snapshotLocked(), gen)
		s.wrote()
		return err
	}
	s.dirty = true
	if s.timer == nil {
		s.timer = time.AfterFunc(max(s.interval-now.Sub(s.last), 0), s.onTimer)
	}
	s.mu.Unlock()
	return nil
}

// wrote ends a write begun with writing++: the interval counts from now.
func (s *saver) wrote() {
	s.mu.Lock()
	s.writing--
	s.last = time.Now()
	s.mu.Unlock()
}

func (s *saver) onTimer() {
	s.mu.Lock()
	s.timer = nil
	if !s.dirty {
		s.mu.Unlock()
		return
	}
	s.dirty = false
	s.writing++
	s.inflight.Add(1)
	s.mu.Unlock()
	defer s.inflight.Done()
	v, gen := s.snapshot()
	err := s.write(v, gen)
	s.wrote()
	if err != nil {
		// The table stays in memory; try again one interval later (or at the next change).
		s.file.logger.Error("cannot persist "+s.what+"; retrying", "file", s.file.path, "error", err)
		s.mu.Lock()
		s.dirty = true
		if s.timer == nil && s.interval > 0 {
			s.timer = time.AfterFunc(s.interval, s.onTimer)
		}
		s.mu.Unlock()
	}
}

// flush writes any change still waiting for the timer and waits for a timer write under way.
func (s *saver) flush() error {
	s.mu.Lock()
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	dirty := s.dirty
	s.dirty = false
	s.mu.Unlock()
	s.inflight.Wait()
	if !dirty {
		return nil
	}
	v, gen := s.snapshot()
	if err := s.write(v, gen); err != nil {
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
		return err
	}
	return nil
}

// sync returns once every change handed to changedLocked before the call is on disk, writing the
// table now if the timer has not yet. A classic broker calls it before it stores a message, so an
// acknowledged message never names a topic a crash could still take away (coalescing a burst of
// creations must not cost the messages sent to them). When nothing waits, it costs two atomic
// loads. Concurrent callers share writes: each writes the newest snapshot, and write skips one
// already covered.
func (s *saver) sync() error {
	want := s.changed.Load()
	if s.onDisk.Load() >= want {
		return nil
	}
	v, gen := s.snapshot()
	return s.write(v, gen)
}

// write saves v (the table at generation gen) unless a newer generation is already on disk.
func (s *saver) write(v any, gen uint64) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if gen != 0 && gen <= s.written {
		return nil
	}
	if err := s.file.save(v); err != nil {
		return err
	}
	s.written = gen
	s.onDisk.Store(gen)
	s.saves.Add(1)
	return nil
}
