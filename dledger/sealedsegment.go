package dledger

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft-wal/types"
)

// releasingFiler is raft-wal's segment filer with sealed segments read through a plain reader.
//
// raft-wal (v0.4.1) keeps the writer that filled a segment as that segment's reader until the
// segment is deleted, and the writer keeps its write buffer, which grows to the largest Append it
// took (several group-committed entries of up to dLegerBatchMaxBytes each: 1-4 MiB). Segments are
// deleted only after a snapshot, behind TrailingLogs entries, so under a steady load the live heap
// grew with the log: 122 MiB of write buffers 45 s into a run at 2048 sends in flight, the heap
// (GOGC=400) up to 1.4 GiB, and the page faults of that growth took the brokers' system time
// from 15-20 to 33 us per message (scripts/cpubench.sh R3, DUR=60s, 2026-11-30).
//
// So once a segment reports itself sealed, reads go to a reader opened on the file (the index
// block raft-wal wrote at sealing tells it where each entry is) and the writer is closed, which
// lets its buffer go. The close runs in the background: a syncFile fsyncs itself on Close when
// the leader's deferred fsync has not reached it yet.
type releasingFiler struct {
	types.SegmentFiler
	logger hclog.Logger
}

// Create wraps the new segment's writer.
func (f releasingFiler) Create(info types.SegmentInfo) (types.SegmentWriter, error) {
	w, err := f.SegmentFiler.Create(info)
	return f.wrap(info, w, err)
}

// RecoverTail wraps the writer of the unsealed segment found at start-up.
func (f releasingFiler) RecoverTail(info types.SegmentInfo) (types.SegmentWriter, error) {
	w, err := f.SegmentFiler.RecoverTail(info)
	return f.wrap(info, w, err)
}

// wrap puts a releasingWriter around a writer the filer opened for info.
func (f releasingFiler) wrap(info types.SegmentInfo, w types.SegmentWriter, err error) (types.SegmentWriter, error) {
	if err != nil {
		return nil, err
	}
	return &releasingWriter{w: w, filer: f.SegmentFiler, info: info, logger: f.logger}, nil
}

// releasingWriter is a segment writer that hands its reads to a reader once sealed. raft-wal
// calls Append, Sealed and ForceSeal from one goroutine at a time and GetLog from any.
type releasingWriter struct {
	filer  types.SegmentFiler
	info   types.SegmentInfo
	logger hclog.Logger

	mu sync.RWMutex
	w  types.SegmentWriter // nil once released (info then has the sealed segment's MaxIndex)
	r  types.SegmentReader // the sealed segment's reader once released
}

var _ types.SegmentWriter = (*releasingWriter)(nil)

// Append is the writer's (raft-wal never appends to a sealed segment).
func (s *releasingWriter) Append(entries []types.LogEntry) error {
	s.mu.RLock()
	w := s.w
	s.mu.RUnlock()
	if w == nil {
		return types.ErrSealed
	}
	return w.Append(entries)
}

// Sealed is the writer's answer; a segment it reports sealed is released.
func (s *releasingWriter) Sealed() (bool, uint64, error) {
	s.mu.RLock()
	w := s.w
	s.mu.RUnlock()
	if w == nil {
		return true, s.info.IndexStart, nil
	}
	sealed, indexStart, err := w.Sealed()
	if sealed && err == nil {
		s.release(w, indexStart)
	}
	return sealed, indexStart, err
}

// ForceSeal is the writer's. raft-wal force-seals a segment when it truncates the log's tail and
// then records a last index below the writer's own, so such a segment is not released: it is
// rare and keeps its writer until it is deleted.
func (s *releasingWriter) ForceSeal() (uint64, error) {
	s.mu.RLock()
	w := s.w
	s.mu.RUnlock()
	if w == nil {
		return s.info.IndexStart, nil
	}
	return w.ForceSeal()
}

// LastIndex is the writer's, or the sealed segment's last index.
func (s *releasingWriter) LastIndex() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.w == nil {
		return s.info.MaxIndex
	}
	return s.w.LastIndex()
}

// GetLog reads through the writer, or the reader once released.
func (s *releasingWriter) GetLog(idx uint64) (*types.PooledBuffer, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.w == nil {
		return s.r.GetLog(idx)
	}
	return s.w.GetLog(idx)
}

// Close closes the writer, or the reader once released.
func (s *releasingWriter) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return s.r.Close()
	}
	return s.w.Close()
}

// release opens a reader on the sealed segment and, once it serves the reads, closes the
// writer. A reader that cannot be opened leaves the writer in place: only memory is at stake.
func (s *releasingWriter) release(w types.SegmentWriter, indexStart uint64) {
	info := s.info
	info.IndexStart = indexStart
	info.MaxIndex = w.LastIndex()
	info.SealTime = time.Now()
	r, err := s.filer.Open(info)
	if err != nil {
		s.logger.Warn("sealed raft log segment stays open for writing", "segment", info.ID, "error", err)
		return
	}
	s.mu.Lock()
	s.info, s.w, s.r = info, nil, r
	s.mu.Unlock()
	go func() {
		// Nothing reads through w any more (GetLog holds the read lock while it does).
		if err := w.Close(); err != nil {
			s.logger.Error("closing a sealed raft log segment", "segment", info.ID, "error", err)
		}
	}()
}
