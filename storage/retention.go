package storage

import (
	"errors"
	"fmt"
	"time"
)

// retentionLoop runs the cleaner every cleanResourceInterval.
func (s *Store) retentionLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.CleanResourceInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if err := s.Clean(s.cfg.Now()); err != nil {
			s.log.Warn("retention failed", "error", err)
		}
	}
}

// checkDisk updates the disk-full flag and returns the usage ratio in percent.
func (s *Store) checkDisk() float64 {
	u, err := s.fs.DiskUsage(s.cfg.StorePathRootDir)
	if err != nil {
		s.log.Warn("disk usage unknown", "error", err)
		return 0
	}
	r := u.Ratio()
	s.lastDiskUsed.Store(int64(r * 100))
	s.diskFull.Store(r > float64(s.cfg.DiskMaxUsedSpaceRatio))
	return r
}

// CheckDiskSpace returns an error wrapping ErrDiskFull if Append would refuse n more bytes for
// disk usage: when the last check (at open and by retention, every cleanResourceInterval) found
// usage over diskMaxUsedSpaceRatio, or when n bytes need a new commitlog file and usage is over
// it now. The leader of a replicated log calls it before proposing: its replicas append with
// AppendReplicated, which does not check (a decision every replica must take alike can only be
// taken once, before the entry exists). A closed store gives ErrStoreClosed.
func (s *Store) CheckDiskSpace(n int) error {
	if s.isClosed.Load() {
		return ErrStoreClosed
	}
	return s.checkSpace(n)
}

// checkSpace is the usage-ratio refusal shared by Append and CheckDiskSpace.
func (s *Store) checkSpace(n int) error {
	limit := s.cfg.DiskMaxUsedSpaceRatio
	if s.diskFull.Load() {
		return fmt.Errorf("disk usage %.2f%% is over diskMaxUsedSpaceRatio %d%%: %w", float64(s.lastDiskUsed.Load())/100, limit, ErrDiskFull)
	}
	if s.cl.needsRoll(n) {
		if r := s.checkDisk(); r > float64(limit) {
			return fmt.Errorf("disk usage %.2f%% is over diskMaxUsedSpaceRatio %d%% at commitlog file roll: %w", r, limit, ErrDiskFull)
		}
	}
	return nil
}

// Clean runs retention once as of now: when it is a deleteWhen hour, or disk usage is over
// diskMaxUsedSpaceRatio, it deletes commitlog files older than fileReservedTime (never the
// newest, nor any not yet flushed), then consume-queue and index files wholly below the new
// commitlog min offset, and advances the queues' min offsets. If usage is still over the ratio
// afterwards, appends are refused with ErrDiskFull until a later Clean finds room. The loop
// calls it every cleanResourceInterval; tests call it directly.
func (s *Store) Clean(now time.Time) error {
	ratio := s.checkDisk()
	over := ratio > float64(s.cfg.DiskMaxUsedSpaceRatio)
	if !over && !s.hours[now.Hour()] {
		return nil
	}
	deleted, err := s.deleteExpiredCommitLog(now)
	if deleted > 0 {
		s.log.Info("deleted expired commitlog files", "files", deleted, "diskRatio", ratio)
		err = errors.Join(err, s.cleanLogics())
	}
	s.checkDisk()
	return err
}

// deleteExpiredCommitLog removes the expired commitlog files from the oldest, stopping at the
// first one not expired.
func (s *Store) deleteExpiredCommitLog(now time.Time) (int, error) {
	reserve := time.Duration(s.cfg.FileReservedTime) * time.Hour
	flushed := s.cl.flushed.Load()
	n := 0
	for {
		segs := s.cl.segs.snapshot()
		if len(segs) < 2 {
			return n, nil
		}
		sg := segs[0]
		if sg.start+s.cl.size > flushed {
			return n, nil
		}
		st, err := s.fs.Stat(sg.name)
		if err != nil {
			return n, fmt.Errorf("retention: %w", err)
		}
		if now.Sub(st.ModTime) < reserve {
			return n, nil
		}
		if err := s.cl.segs.removeSegment(sg); err != nil {
			return n, fmt.Errorf("retention: %w", err)
		}
		n++
	}
}

// cleanLogics removes consume-queue and index files wholly below the commitlog min offset.
func (s *Store) cleanLogics() error {
	clMin := s.cl.minOffset()
	var errs []error
	for _, q := range s.allQueues() {
		segs := q.segs.snapshot()
		for i := 0; i+1 < len(segs); i++ { // keep the newest file: it carries max
			u, ok := q.unit((segs[i].start+q.segs.size)/ConsumeQueueUnitSize - 1)
			if !ok || u.size == 0 || (u.size != blankUnitSize && u.phys+int64(u.size) > clMin) {
				break
			}
			if err := q.segs.removeSegment(segs[i]); err != nil {
				errs = append(errs, err)
				break
			}
		}
		q.recomputeMin(clMin)
	}
	if s.idx != nil {
		errs = append(errs, s.idx.removeIf(func(f *indexFile, last bool) bool {
			return !last && f.indexCount() > 1 && f.endPhyOffset() < clMin
		}))
	}
	return errors.Join(errs...)
}

// Stats are the store figures reported by GET_BROKER_RUNTIME_INFO.
type Stats struct {
	PutMessageTimesTotal int64
	PutMessageSizeTotal  int64
	CommitLogMinOffset   int64
	CommitLogMaxOffset   int64
	CommitLogFlushed     int64
	FlushRounds          int64
	DiskRatio            float64 // percent of the store's file system in use
	DiskFull             bool
	// DiskMaxUsedSpaceRatio is the configured limit DiskRatio is compared with, so a status
	// page shows how close the store is to refusing writes.
	DiskMaxUsedSpaceRatio int
	WriteFailed           bool
	Queues                int
}

// Stats returns current figures.
func (s *Store) Stats() Stats {
	nq := 0
	s.qmu.RLock()
	for _, m := range s.queues {
		nq += len(m)
	}
	s.qmu.RUnlock()
	return Stats{
		PutMessageTimesTotal:  s.putCount.Load(),
		PutMessageSizeTotal:   s.putBytes.Load(),
		CommitLogMinOffset:    s.cl.minOffset(),
		CommitLogMaxOffset:    s.cl.writePos.Load(),
		CommitLogFlushed:      s.cl.flushed.Load(),
		FlushRounds:           s.flushRounds.Load(),
		DiskRatio:             float64(s.lastDiskUsed.Load()) / 100,
		DiskFull:              s.diskFull.Load(),
		DiskMaxUsedSpaceRatio: s.cfg.DiskMaxUsedSpaceRatio,
		WriteFailed:           s.failed() != nil,
		Queues:                nq,
	}
}
