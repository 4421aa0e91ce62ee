package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"rocketraft/storage/vfs"
)

// Store is the local durable message store: commitlog, consume queues, index, checkpoint.
// It is safe for concurrent use. See the package doc for formats and lock ordering.
type Store struct {
	cfg   Config
	log   hclog.Logger
	fs    vfs.FS
	lock  io.Closer
	cl    *commitLog
	idx   *indexService // nil when messageIndexEnable=false
	cp    *checkpointFile
	hours map[int]bool

	// mu is the append lock: it orders appends and serializes every writer of the commitlog,
	// consume queues and index.
	mu     sync.Mutex
	closed bool
	// stage and appendGen belong to the appender (under mu): see appendLocked.
	stage     stage
	appendGen uint64
	// entryBuf is WriteEntry's patched copy of an entry's records (under mu, EntryLog mode).
	entryBuf []byte
	// undispatched holds the records of the entries written and not yet dispatched, in order
	// (under mu, EntryLog mode; entrylog.go's writtenEntry).
	undispatched []writtenEntry

	// qmu guards queues (the map, not the queues' contents).
	qmu    sync.RWMutex
	queues map[string]map[int32]*consumeQueue

	failErr  atomic.Pointer[error] // set once a write/sync fails; writes are refused after
	diskFull atomic.Bool
	isClosed atomic.Bool

	flushKick chan struct{}
	flushMu   sync.Mutex
	flushDone chan struct{} // closed and replaced after every commitlog flush round
	waiters   atomic.Int32  // SYNC_FLUSH appenders waiting for a round
	// lastSyncNanos is how long the last commitlog sync took; it bounds gather.
	lastSyncNanos atomic.Int64

	logicsMu  sync.Mutex // one logics flush (CQ + index + checkpoint) at a time
	clFlushMu sync.Mutex // one commitlog flush at a time
	released  bool       // mappings closed; guarded by both flush mutexes

	lastStoreTS  atomic.Int64
	putCount     atomic.Int64
	putBytes     atomic.Int64
	flushRounds  atomic.Int64
	lastDiskUsed atomic.Int64 // percent * 100

	stop chan struct{}
	wg   sync.WaitGroup
}

// Open opens (creating if needed) the store described by cfg, takes its lock, recovers from a
// crash if the abort file says the last run did not close cleanly, and starts the flush and
// retention goroutines.
func Open(cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("storage config: %w", err)
	}
	hours, _ := parseDeleteWhen(cfg.DeleteWhen)
	s := &Store{
		cfg: cfg, log: cfg.Logger.Named("store"), fs: cfg.FS, hours: hours,
		queues:    map[string]map[int32]*consumeQueue{},
		flushKick: make(chan struct{}, 1),
		flushDone: make(chan struct{}),
		stop:      make(chan struct{}),
	}
	if err := s.open(); err != nil {
		s.release()
		return nil, err
	}
	s.wg.Add(3)
	go s.flushLoop()
	go s.logicsLoop()
	go s.retentionLoop()
	return s, nil
}

func (s *Store) open() error {
	root := s.cfg.StorePathRootDir
	if err := s.fs.MkdirAll(root); err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	lock, err := s.fs.Lock(filepath.Join(root, "lock"))
	if err != nil {
		return fmt.Errorf("open store %s: %w", root, err)
	}
	s.lock = lock
	abortPath := filepath.Join(root, "abort")
	_, err = s.fs.Stat(abortPath)
	abnormal := err == nil
	if s.cp, _, err = openCheckpoint(s.fs, root); err != nil {
		return err
	}
	if s.cl, err = openCommitLog(s.fs, s.cfg.commitLogDir(), s.cfg.MappedFileSizeCommitLog, s.cfg.EntryLog); err != nil {
		return err
	}
	if s.cfg.MessageIndexEnable {
		if s.idx, err = openIndexService(s.fs, root, s.cfg.MaxHashSlotNum, s.cfg.MaxIndexNum, s.cfg.Now); err != nil {
			return err
		}
	}
	if err := s.loadQueues(); err != nil {
		return err
	}
	if err := s.recover(abnormal); err != nil {
		return fmt.Errorf("recover store %s: %w", root, err)
	}
	if err := s.fs.WriteFile(abortPath, nil); err != nil {
		return fmt.Errorf("open store: create abort file: %w", err)
	}
	s.checkDisk()
	return nil
}

// loadQueues opens every consumequeue/<topic>/<queueId> directory.
func (s *Store) loadQueues() error {
	dir := filepath.Join(s.cfg.StorePathRootDir, "consumequeue")
	if err := s.fs.MkdirAll(dir); err != nil {
		return fmt.Errorf("consume queues: %w", err)
	}
	topics, err := s.fs.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("consume queues: %w", err)
	}
	for _, t := range topics {
		ids, err := s.fs.ReadDir(filepath.Join(dir, t))
		if err != nil {
			continue // a file, not a topic directory
		}
		for _, id := range ids {
			qid, err := strconv.ParseInt(id, 10, 32)
			if err != nil {
				continue
			}
			q, err := openConsumeQueue(s.fs, s.cfg.StorePathRootDir, t, int32(qid), s.cfg.MappedFileSizeConsumeQueue)
			if err != nil {
				return err
			}
			s.putQueue(q)
		}
	}
	return nil
}

func (s *Store) putQueue(q *consumeQueue) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	m := s.queues[q.topic]
	if m == nil {
		m = map[int32]*consumeQueue{}
		s.queues[q.topic] = m
	}
	m[q.qid] = q
}

// queue returns the consume queue of (topic, qid) or nil; topic as bytes avoids an allocation.
func (s *Store) queue(topic []byte, qid int32) *consumeQueue {
	s.qmu.RLock()
	defer s.qmu.RUnlock()
	return s.queues[string(topic)][qid]
}

func (s *Store) queueByName(topic string, qid int32) *consumeQueue {
	s.qmu.RLock()
	defer s.qmu.RUnlock()
	return s.queues[topic][qid]
}

// queueOrCreate returns the consume queue of (topic, qid), creating it. Hold s.mu.
func (s *Store) queueOrCreate(topic []byte, qid int32) (*consumeQueue, error) {
	if q := s.queue(topic, qid); q != nil {
		return q, nil
	}
	q, err := openConsumeQueue(s.fs, s.cfg.StorePathRootDir, string(topic), qid, s.cfg.MappedFileSizeConsumeQueue)
	if err != nil {
		return nil, err
	}
	s.putQueue(q)
	return q, nil
}

// allQueues returns every consume queue.
func (s *Store) allQueues() []*consumeQueue {
	s.qmu.RLock()
	defer s.qmu.RUnlock()
	var out []*consumeQueue
	for _, m := range s.queues {
		for _, q := range m {
			out = append(out, q)
		}
	}
	return out
}

// Topics lists the topics that have consume queues, sorted.
func (s *Store) Topics() []string {
	s.qmu.RLock()
	defer s.qmu.RUnlock()
	out := make([]string, 0, len(s.queues))
	for t := range s.queues {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// QueueIDs lists the queue ids of topic that have consume queues, sorted.
func (s *Store) QueueIDs(topic string) []int32 {
	s.qmu.RLock()
	defer s.qmu.RUnlock()
	out := make([]int32, 0, len(s.queues[topic]))
	for id := range s.queues[topic] {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// DeleteTopic drops every consume queue of topic (its messages stay in the commitlog until
// retention removes them). A later append to the topic starts again at queue offset 0. It
// then writes a checkpoint past the topic's records, so crash recovery does not re-dispatch
// them into a new queue.
func (s *Store) DeleteTopic(topic string) error {
	if err := s.deleteTopic(topic); err != nil {
		return err
	}
	if err := s.flushCommitLog(); err != nil {
		return fmt.Errorf("delete topic %s: %w", topic, err)
	}
	if err := s.flushLogics(); err != nil {
		return fmt.Errorf("delete topic %s: %w", topic, err)
	}
	return nil
}

func (s *Store) deleteTopic(topic string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrStoreClosed
	}
	s.qmu.Lock()
	qs := s.queues[topic]
	delete(s.queues, topic)
	s.qmu.Unlock()
	for _, q := range qs {
		q.segs.closeAll()
	}
	if err := s.fs.Remove(filepath.Join(s.cfg.StorePathRootDir, "consumequeue", topic)); err != nil {
		return fmt.Errorf("delete topic %s: %w", topic, err)
	}
	return nil
}

// fail records a write/sync failure; every later write is refused with ErrIO.
func (s *Store) fail(err error) error {
	werr := fmt.Errorf("%w: %w", ErrIO, err)
	if s.failErr.CompareAndSwap(nil, &werr) {
		s.log.Error("write failure, store refuses further writes", "error", err)
	}
	return *s.failErr.Load()
}

// failed returns the recorded write failure, or nil.
func (s *Store) failed() error {
	if p := s.failErr.Load(); p != nil {
		return *p
	}
	return nil
}

// createErr classifies an error creating a file: ErrDiskFull for no space, else ErrIO. It
// does not poison the store: nothing was written.
func createErr(err error) error {
	if errors.Is(err, vfs.ErrNoSpace) || errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	}
	return fmt.Errorf("%w: %w", ErrIO, err)
}

// Close flushes everything, writes the checkpoint, removes the abort file (so the next Open
// knows the shutdown was clean) and releases the lock. Appends after Close get ErrStoreClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.isClosed.Store(true)
	s.mu.Unlock()
	close(s.stop)
	s.wg.Wait()
	var errs []error
	if err := s.flushCommitLog(); err != nil {
		errs = append(errs, err)
	}
	if err := s.flushLogics(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 && s.failed() == nil {
		if err := s.fs.Remove(filepath.Join(s.cfg.StorePathRootDir, "abort")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	s.clFlushMu.Lock()
	s.logicsMu.Lock()
	s.released = true
	s.release()
	s.logicsMu.Unlock()
	s.clFlushMu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// Closed reports whether Close has been called. Reads of a closed store may find its files
// unmapped; a holder of a replicated store's reference (fsm.FSM.Acquire) never sees true.
func (s *Store) Closed() bool { return s.isClosed.Load() }

// release unmaps everything and drops the lock.
func (s *Store) release() {
	if s.cl != nil {
		s.cl.segs.closeAll()
	}
	for _, q := range s.allQueues() {
		q.segs.closeAll()
	}
	if s.idx != nil {
		s.idx.close()
	}
	if s.cp != nil {
		s.cp.m.Close()
	}
	if s.lock != nil {
		s.lock.Close()
	}
}
