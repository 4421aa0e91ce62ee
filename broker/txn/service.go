package txn

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/meta"
	"rocketraft/message"
	"rocketraft/remoting"
	"rocketraft/storage"
)

const (
	// Group is the internal consumer group whose offset on the half topic is the cursor below
	// which every half message is resolved (CID_RMQ_SYS_TRANS in RocketMQ).
	Group = "CID_RMQ_SYS_TRANS"
	// Timeout bounds one END_TRANSACTION or check-back write.
	Timeout = 8 * time.Second
	// readBatch and readBytes bound one read of the half or op queue (at least one record is
	// always returned).
	readBatch = 64
	readBytes = 1 << 20
	// maxChecksPerPass bounds the work of one check pass (each check is one append).
	maxChecksPerPass = 2000
)

// Producer is a live connection of a producer group that a check-back is sent on.
type Producer interface {
	InvokeOneway(req *remoting.Command) error
	RemoteAddr() string
}

// Config is what a Service needs from the broker.
type Config struct {
	// Acquire returns the store to read the half and op queues from, and its release function.
	Acquire func() (*storage.Store, func(), error)
	// Append appends records as one unit (one Raft entry in DLedger mode).
	Append func(ctx context.Context, records [][]byte) ([]storage.AppendResult, error)
	// IsMaster reports whether this node resolves transactions (classic master; ready leader).
	IsMaster func() bool
	// CommittedOffset and CommitOffset read and write the cursor (Group's offset on the half
	// topic's queue 0).
	CommittedOffset func(group, topic string, qid int32) (int64, bool)
	CommitOffset    func(group, topic string, qid int32, off int64)
	// EnsureCheckMaxTopic creates TRANS_CHECK_MAX_TIME_TOPIC before a discard (errors are logged).
	EnsureCheckMaxTopic func() error
	// ProducerConn returns a live connection of group, or nil when none is.
	ProducerConn func(group string) Producer
	// StoreHost is the store host stamped on the records written here; required.
	StoreHost func() netip.AddrPort
	// CheckInterval is transactionCheckInterval, CheckTimeout transactionTimeOut (the age of a
	// half before its first check-back), CheckMax transactionCheckMax.
	CheckInterval time.Duration
	CheckTimeout  time.Duration
	CheckMax      int
	// Now is the clock (time.Now when nil).
	Now    func() time.Time
	Logger hclog.Logger
}

// Service owns the transaction bookkeeping of one broker.
type Service struct {
	cfg Config
	mu  sync.Mutex
	// book is nil until first needed on the master (built from the persisted cursor).
	book *book
	// busy marks transactions (by origin) being resolved or re-put; closed when released.
	busy map[int64]chan struct{}
	// cursor is the last half offset committed as Group's consumer offset.
	cursor int64
}

// New returns a service over cfg.
func New(cfg Config) *Service {
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = time.Minute // a hand-built config (tests); config validation requires > 0
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg, busy: map[int64]chan struct{}{}, cursor: -1}
}

// claim marks the transaction origin as being handled, waiting (up to ctx) while another holder
// has it. The returned function releases it.
func (s *Service) claim(ctx context.Context, origin int64) (func(), error) {
	for {
		s.mu.Lock()
		ch, held := s.busy[origin]
		if !held {
			ch = make(chan struct{})
			s.busy[origin] = ch
			s.mu.Unlock()
			return func() {
				s.mu.Lock()
				delete(s.busy, origin)
				s.mu.Unlock()
				close(ch)
			}, nil
		}
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for another answer of the same transaction: %w", ctx.Err())
		}
	}
}

// tryClaim is claim without waiting: nil when the transaction is busy.
func (s *Service) tryClaim(origin int64) func() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	release, err := s.claim(ctx, origin)
	if err != nil {
		return nil
	}
	return release
}

// refresh brings the book up to the ends of the half and op queues (building it first if
// needed) and persists the cursor when it moved and this node is the master.
func (s *Service) refresh() error {
	st, release, err := s.cfg.Acquire()
	if err != nil {
		return err
	}
	defer release()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.book != nil && (s.book.halfNext > st.MaxOffset(meta.TransHalfTopic, 0) || s.book.opNext > st.MaxOffset(meta.TransOpHalfTopic, 0)) {
		// The queues restarted below what was read (an operator deleted the topics).
		s.cfg.Logger.Warn("transaction queues are shorter than already read; rebuilding the check state",
			"halfNext", s.book.halfNext, "opNext", s.book.opNext)
		s.book = nil
	}
	if s.book == nil {
		s.book = s.build(st)
		s.cfg.Logger.Info("transaction check state built", "halfFrom", s.book.halfNext, "opFrom", s.book.opNext)
	}
	k := s.book
	next := readQueue(st, meta.TransHalfTopic, k.halfNext, func(v message.View) {
		e, err := parseHalf(v)
		if err != nil {
			s.cfg.Logger.Warn("unreadable half message skipped", "error", err)
			k.skipHalves(v.QueueOffset() + 1)
			return
		}
		k.addHalf(e)
	})
	k.skipHalves(next)
	k.opNext = readQueue(st, meta.TransOpHalfTopic, k.opNext, func(v message.View) {
		for _, h := range parseOpBody(v.Body()) {
			k.addOp(h)
		}
	})
	if low := k.low(); low != s.cursor && s.cfg.IsMaster() {
		s.cfg.CommitOffset(Group, meta.TransHalfTopic, 0, low)
		s.cursor = low
	}
	return nil
}

// build starts a book at the persisted cursor: every half below it is resolved. Op records
// stored before the half at the cursor can only name halves below it (an op record is written
// after the half it names), so the op queue is read from the first record after that half.
func (s *Service) build(st *storage.Store) *book {
	hmin, hmax := st.MinOffset(meta.TransHalfTopic, 0), st.MaxOffset(meta.TransHalfTopic, 0)
	cur, ok := s.cfg.CommittedOffset(Group, meta.TransHalfTopic, 0)
	if !ok || cur < hmin {
		cur = hmin
	}
	cur = min(cur, hmax)
	s.cursor = cur
	opStart := st.MaxOffset(meta.TransOpHalfTopic, 0)
	if cur < hmax {
		opStart = st.MinOffset(meta.TransOpHalfTopic, 0)
		if phys, ok := physAt(st, meta.TransHalfTopic, cur); ok {
			opStart = firstAfter(st, meta.TransOpHalfTopic, phys)
		}
	}
	return newBook(cur, opStart)
}

// readQueue calls fn for every record of queue 0 of topic from offset from to the queue's end
// and returns the offset after the last one read. Ranges retention removed are skipped.
func readQueue(st *storage.Store, topic string, from int64, fn func(v message.View)) int64 {
	for {
		r := st.GetMessages(topic, 0, from, readBatch, readBytes, nil)
		switch r.Status {
		case storage.Found:
			for _, rec := range r.Records {
				if v, err := message.ParseView(rec); err == nil {
					fn(v)
				}
			}
		case storage.NoMatchedMessage, storage.MessageWasRemoving, storage.OffsetTooSmall, storage.OffsetFoundNull:
		default: // at the end, or no such queue yet
			return from
		}
		if r.NextBeginOffset <= from {
			return from
		}
		from = r.NextBeginOffset
	}
}

// physAt is the commitlog offset of the record at queue offset off of queue 0 of topic.
func physAt(st *storage.Store, topic string, off int64) (int64, bool) {
	r := st.GetMessages(topic, 0, off, 1, 0, nil)
	if r.Status != storage.Found || len(r.Records) == 0 {
		return 0, false
	}
	v, err := message.ParseView(r.Records[0])
	if err != nil {
		return 0, false
	}
	return v.PhysicalOffset(), true
}

// firstAfter is the first queue offset of queue 0 of topic whose record lies after commitlog
// offset phys (binary search; an unreadable probe counts as "after", which only makes the
// caller read more).
func firstAfter(st *storage.Store, topic string, phys int64) int64 {
	lo, hi := st.MinOffset(topic, 0), st.MaxOffset(topic, 0)
	for lo < hi {
		mid := lo + (hi-lo)/2
		if p, ok := physAt(st, topic, mid); ok && p <= phys {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// current returns the transaction's unresolved half after a refresh.
func (s *Service) current(origin int64) (halfEntry, bool, error) {
	if err := s.refresh(); err != nil {
		return halfEntry{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.book.current(origin)
	return e, ok, nil
}

// resolved drops a half whose op record this node just wrote (the next refresh would too).
func (s *Service) resolved(halfOffset int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.book != nil {
		s.book.resolve(halfOffset)
	}
}

// End resolves a transaction for END_TRANSACTION (commit or rollback; the caller answers
// unknown itself): it returns the response code and remark, or an error from the append (the
// broker maps it to a code).
func (s *Service) End(ctx context.Context, h *EndRequest) (int32, string, error) {
	half, named, remark := s.readHalf(h)
	if half == nil {
		return remoting.SystemError, remark, nil
	}
	release, err := s.claim(ctx, named.origin)
	if err != nil {
		return remoting.SystemError, err.Error(), nil
	}
	defer release()
	cur, ok, err := s.current(named.origin)
	if err != nil {
		return 0, "", err
	}
	if !ok {
		s.cfg.Logger.Info("END_TRANSACTION for a transaction already resolved; ignored", "group", h.ProducerGroup,
			"halfOffset", h.TranStateTableOffset, "msgId", h.MsgID, "fromCheck", h.FromTransactionCheck)
		return remoting.Success, "the transaction is already resolved", nil
	}
	if cur.offset != named.offset {
		// An answer for an older copy (the producer's own answer arriving after a check-back
		// re-put the half): it applies to the current copy.
		if half, err = s.readHalfAt(cur.phys); err != nil {
			return remoting.SystemError, "Find prepared transaction message failed: " + err.Error(), nil
		}
	}
	now, host := s.cfg.Now().UnixMilli(), s.cfg.StoreHost()
	op, err := opRecord(cur.offset, host, now)
	if err != nil {
		return remoting.SystemError, err.Error(), nil
	}
	records := [][]byte{op}
	what := "rolled back"
	if h.CommitOrRollback == message.TransactionCommitType {
		final, err := commitRecord(half, cur.origin, host, now)
		if err != nil {
			return remoting.SystemError, err.Error(), nil
		}
		records = [][]byte{final, op}
		what = "committed"
	}
	if _, err := s.append(ctx, records); err != nil {
		return 0, "", err
	}
	s.resolved(cur.offset)
	s.cfg.Logger.Debug("transaction "+what, "group", h.ProducerGroup, "halfOffset", cur.offset, "origin", cur.origin,
		"msgId", h.MsgID, "fromCheck", h.FromTransactionCheck)
	return remoting.Success, "", nil
}

// readHalf reads the half record h names and checks it against the header's group and queue
// offset, with RocketMQ's remarks for each mismatch (SYSTEM_ERROR).
func (s *Service) readHalf(h *EndRequest) (*message.Message, halfEntry, string) {
	st, release, err := s.cfg.Acquire()
	if err != nil {
		return nil, halfEntry{}, "Find prepared transaction message failed: " + err.Error()
	}
	rec, err := st.ReadRecord(h.CommitLogOffset)
	release()
	if err != nil {
		return nil, halfEntry{}, fmt.Sprintf("Find prepared transaction message failed: commitLogOffset %d: %v", h.CommitLogOffset, err)
	}
	m, _, err := message.DecodeRecord(rec)
	if err != nil {
		return nil, halfEntry{}, fmt.Sprintf("Find prepared transaction message failed: commitLogOffset %d: %v", h.CommitLogOffset, err)
	}
	if m.Topic != meta.TransHalfTopic {
		return nil, halfEntry{}, fmt.Sprintf("Find prepared transaction message failed: the message at commitLogOffset %d is in topic %s, not a half message", h.CommitLogOffset, m.Topic)
	}
	v, _ := message.ParseView(rec)
	e, err := parseHalf(v)
	if err != nil {
		return nil, halfEntry{}, "Find prepared transaction message failed: " + err.Error()
	}
	switch {
	case e.group != h.ProducerGroup:
		return nil, halfEntry{}, fmt.Sprintf("The producer group wrong: the half message belongs to %q", e.group)
	case m.QueueOffset != h.TranStateTableOffset:
		return nil, halfEntry{}, fmt.Sprintf("The transaction state table offset wrong: the half message at %d has queue offset %d", h.CommitLogOffset, m.QueueOffset)
	case m.PhysicalOffset != h.CommitLogOffset:
		return nil, halfEntry{}, "The commit log offset wrong"
	}
	return m, e, ""
}

// readHalfAt reads the half record at phys (the current copy of a transaction).
func (s *Service) readHalfAt(phys int64) (*message.Message, error) {
	st, release, err := s.cfg.Acquire()
	if err != nil {
		return nil, err
	}
	rec, err := st.ReadRecord(phys)
	release()
	if err != nil {
		return nil, fmt.Errorf("read half message at %d: %w", phys, err)
	}
	m, _, err := message.DecodeRecord(rec)
	if err != nil {
		return nil, fmt.Errorf("decode half message at %d: %w", phys, err)
	}
	return m, nil
}

// append appends records as one unit (one Raft entry in DLedger mode; a full disk is refused
// before proposing, as for sends). A flush timeout means stored.
func (s *Service) append(ctx context.Context, records [][]byte) ([]storage.AppendResult, error) {
	res, err := s.cfg.Append(ctx, records)
	if err != nil && !errors.Is(err, storage.ErrFlushDiskTimeout) {
		return nil, fmt.Errorf("append transaction records: %w", err)
	}
	if len(res) != len(records) {
		return nil, fmt.Errorf("append transaction records: %d results for %d records", len(res), len(records))
	}
	return res, nil
}

// Unresolved reads the half and op queues up to their ends and returns how many half messages
// are still unresolved.
func (s *Service) Unresolved() (int, error) {
	if err := s.refresh(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.book.size(), nil
}
