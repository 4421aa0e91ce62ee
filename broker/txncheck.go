package broker

// The transaction service: the leader's (classic: the master's) view of unresolved half
// messages (txnBook, read from the half and op queues), END_TRANSACTION's resolution under a
// per-transaction claim, and the check-back loop.
//
// Check-back: every transactionCheckInterval the master reads the half and op queues up to
// their ends and, for each unresolved half born more than transactionTimeOut ago (or its
// CHECK_IMMUNITY_TIME_IN_SECONDS), oldest first:
//   - checked transactionCheckMax times already: it is discarded (a copy goes to
//     TRANS_CHECK_MAX_TIME_TOPIC with an op record for the half, in one append) and logged;
//   - no live producer connection of its PGROUP: skipped (not counted; asked at the next pass);
//   - else it is re-put: a copy with TRANSACTION_CHECK_TIMES + 1 and an op record for the old
//     half, in one append, then CHECK_TRANSACTION_STATE (39, oneway) goes to a random live
//     connection of the group, naming the copy. The producer answers END_TRANSACTION with
//     fromTransactionCheck=true.
//
// DLedger mode: only the ready leader checks and resolves (txnMaster); its view is built from
// the replicated queues the first time it is needed, after the Barrier that made it leader, so
// transactions left unknown by a killed leader are checked by the next one. Every write goes
// through b.commitLog.Append as one unit, so a commit (real message + op record) or a re-put (copy +
// op record) is one Raft entry.
//
// Locking: txnService.mu guards the book and the claims; it is never held across an append or a
// network write. A claim (per transaction, by origin) is held across the append that resolves or
// re-puts it, so two answers for one transaction never both commit. Lock order: claim ->
// txnService.mu -> store reads (acquireStore).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"rocketraft/broker/meta"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// txnReadBatch and txnReadBytes bound one read of the half or op queue (at least one record is
// always returned).
const (
	txnReadBatch = 64
	txnReadBytes = 1 << 20
)

// txnMaxChecksPerPass bounds the work of one check pass (each check is one append).
const txnMaxChecksPerPass = 2000

// txnService owns the transaction bookkeeping of one broker.
type txnService struct {
	b  *Broker
	mu sync.Mutex
	// book is nil until first needed on the master (built from the persisted cursor).
	book *txnBook
	// busy marks transactions (by origin) being resolved or re-put; closed when released.
	busy map[int64]chan struct{}
	// cursor is the last half offset committed as txnGroup's consumer offset.
	cursor int64
}

func newTxnService(b *Broker) *txnService {
	return &txnService{b: b, busy: map[int64]chan struct{}{}, cursor: -1}
}

// claim marks the transaction origin as being handled, waiting (up to ctx) while another holder
// has it. The returned function releases it.
func (s *txnService) claim(ctx context.Context, origin int64) (func(), error) {
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
func (s *txnService) tryClaim(origin int64) func() {
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
func (s *txnService) refresh() error {
	st, release, err := s.b.acquireStore()
	if err != nil {
		return err
	}
	defer release()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.book != nil && (s.book.halfNext > st.MaxOffset(meta.TransHalfTopic, 0) || s.book.opNext > st.MaxOffset(meta.TransOpHalfTopic, 0)) {
		// The queues restarted below what was read (an operator deleted the topics).
		s.b.logger.Warn("transaction queues are shorter than already read; rebuilding the check state",
			"halfNext", s.book.halfNext, "opNext", s.book.opNext)
		s.book = nil
	}
	if s.book == nil {
		s.book = s.build(st)
		s.b.logger.Info("transaction check state built", "halfFrom", s.book.halfNext, "opFrom", s.book.opNext)
	}
	k := s.book
	next := readQueue(st, meta.TransHalfTopic, k.halfNext, func(v message.View) {
		e, err := parseHalf(v)
		if err != nil {
			s.b.logger.Warn("unreadable half message skipped", "error", err)
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
	if low := k.low(); low != s.cursor && s.b.txnMaster() {
		s.b.commitOffset(txnGroup, meta.TransHalfTopic, 0, low)
		s.cursor = low
	}
	return nil
}

// build starts a book at the persisted cursor: every half below it is resolved. Op records
// stored before the half at the cursor can only name halves below it (an op record is written
// after the half it names), so the op queue is read from the first record after that half.
func (s *txnService) build(st *storage.Store) *txnBook {
	hmin, hmax := st.MinOffset(meta.TransHalfTopic, 0), st.MaxOffset(meta.TransHalfTopic, 0)
	cur, ok := s.b.committedOffset(txnGroup, meta.TransHalfTopic, 0)
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
	return newTxnBook(cur, opStart)
}

// readQueue calls fn for every record of queue 0 of topic from offset from to the queue's end
// and returns the offset after the last one read. Ranges retention removed are skipped.
func readQueue(st *storage.Store, topic string, from int64, fn func(v message.View)) int64 {
	for {
		r := st.GetMessages(topic, 0, from, txnReadBatch, txnReadBytes, nil)
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
func (s *txnService) current(origin int64) (halfEntry, bool, error) {
	if err := s.refresh(); err != nil {
		return halfEntry{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.book.current(origin)
	return e, ok, nil
}

// end resolves a transaction for END_TRANSACTION (commit or rollback): it returns the response
// code and remark, or an error from the append (errorCode maps it).
func (s *txnService) end(ctx context.Context, h *endTxnHeader) (int32, string, error) {
	b := s.b
	half, named, remark := b.readHalf(h)
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
		b.logger.Info("END_TRANSACTION for a transaction already resolved; ignored", "group", h.producerGroup,
			"halfOffset", h.tranStateTableOffset, "msgId", h.msgID, "fromCheck", h.fromTransactionCheck)
		return remoting.Success, "the transaction is already resolved", nil
	}
	if cur.offset != named.offset {
		// An answer for an older copy (the producer's own answer arriving after a check-back
		// re-put the half): it applies to the current copy.
		if half, err = b.readHalfAt(cur.phys); err != nil {
			return remoting.SystemError, "Find prepared transaction message failed: " + err.Error(), nil
		}
	}
	now := time.Now().UnixMilli()
	op, err := b.opRecord(cur.offset, now)
	if err != nil {
		return remoting.SystemError, err.Error(), nil
	}
	records := [][]byte{op}
	what := "rolled back"
	if h.commitOrRollback == message.TransactionCommitType {
		final, err := b.commitRecord(half, cur.origin, now)
		if err != nil {
			return remoting.SystemError, err.Error(), nil
		}
		records = [][]byte{final, op}
		what = "committed"
	}
	if _, err := b.appendTxn(ctx, records); err != nil {
		return 0, "", err
	}
	s.resolved(cur.offset)
	b.logger.Debug("transaction "+what, "group", h.producerGroup, "halfOffset", cur.offset, "origin", cur.origin,
		"msgId", h.msgID, "fromCheck", h.fromTransactionCheck)
	return remoting.Success, "", nil
}

// resolved drops a half whose op record this node just wrote (the next refresh would too).
func (s *txnService) resolved(halfOffset int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.book != nil {
		s.book.resolve(halfOffset)
	}
}

// txnCheckLoop runs a check pass every transactionCheckInterval while this node is the master.
func (b *Broker) txnCheckLoop() {
	defer b.wg.Done()
	every := time.Duration(b.cfg.TransactionCheckInterval) * time.Millisecond
	if every <= 0 {
		every = time.Minute // a hand-built config (tests); config validation requires > 0
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			if b.txnMaster() {
				b.txn.checkPass()
			}
		}
	}
}

// checkPass checks every due half once (see the file comment).
func (s *txnService) checkPass() {
	b := s.b
	if err := s.refresh(); err != nil {
		b.logger.Warn("transaction check: cannot read the half queue", "error", err)
		return
	}
	s.mu.Lock()
	due := s.book.due(time.Now().UnixMilli(), b.cfg.TransactionTimeOut)
	s.mu.Unlock()
	if len(due) > txnMaxChecksPerPass {
		due = due[:txnMaxChecksPerPass]
	}
	for _, e := range due {
		select {
		case <-b.stop:
			return
		default:
		}
		if !b.txnMaster() {
			return
		}
		if err := s.checkOne(e); err != nil {
			b.logger.Warn("transaction check failed", "halfOffset", e.offset, "group", e.group, "error", err)
			if errors.Is(err, errTxnStop) {
				return
			}
		}
	}
}

// errTxnStop ends a check pass early (the store or leadership is gone).
var errTxnStop = errors.New("check pass stopped")

// checkOne discards, re-puts and checks, or skips one due half.
func (s *txnService) checkOne(e halfEntry) error {
	b := s.b
	release := s.tryClaim(e.origin)
	if release == nil {
		return nil // an answer for it is being written
	}
	defer release()
	cur, ok, err := s.current(e.origin)
	if err != nil {
		return fmt.Errorf("%w: %w", errTxnStop, err)
	}
	if !ok || cur.offset != e.offset {
		return nil // resolved or re-put meanwhile
	}
	maxChecks := b.cfg.TransactionCheckMax
	if cur.group == "" {
		maxChecks = 0 // no PGROUP: no producer can ever be asked
	}
	var conn *remoting.Conn
	if cur.checks < maxChecks {
		if conn = b.clients.ProducerConn(cur.group); conn == nil {
			b.logger.Debug("transaction check skipped: no live producer of the group", "group", cur.group, "halfOffset", cur.offset)
			return nil
		}
	}
	half, err := b.readHalfAt(cur.phys)
	if err != nil {
		// Removed by retention (or damaged): nothing can resolve it any more.
		b.logger.Warn("half message unreadable; dropped from the transaction check", "halfOffset", cur.offset, "error", err)
		s.resolved(cur.offset)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), txnTimeout)
	defer cancel()
	now := time.Now().UnixMilli()
	op, err := b.opRecord(cur.offset, now)
	if err != nil {
		return err
	}
	if cur.checks >= maxChecks {
		return s.discard(ctx, cur, half, op, now)
	}
	cp, err := b.halfCopy(half, meta.TransHalfTopic, cur.origin, cur.checks+1, now)
	if err != nil {
		return err
	}
	res, err := b.appendTxn(ctx, [][]byte{cp, op})
	if err != nil {
		return fmt.Errorf("%w: re-put half message: %w", errTxnStop, err)
	}
	s.resolved(cur.offset)
	stored, err := b.readHalfAt(res[0].PhysicalOffset)
	if err != nil {
		return fmt.Errorf("read back the re-put half message: %w", err)
	}
	body, err := checkBody(stored, stored.QueueOffset, stored.PhysicalOffset)
	if err != nil {
		return err
	}
	req := remoting.NewRequest(remoting.CheckTransactionState, checkHeader(b.storeHost, stored, stored.QueueOffset, stored.PhysicalOffset), body)
	if err := conn.InvokeOneway(req); err != nil {
		return fmt.Errorf("send CHECK_TRANSACTION_STATE to %s: %w", conn.RemoteAddr(), err)
	}
	b.logger.Info("transaction check-back sent", "group", cur.group, "producer", conn.RemoteAddr(),
		"halfOffset", stored.QueueOffset, "origin", cur.origin, "checks", cur.checks+1)
	return nil
}

// discard gives up on a half checked transactionCheckMax times (or one without PGROUP): a copy goes to
// TRANS_CHECK_MAX_TIME_TOPIC (for an operator) and an op record resolves the half.
func (s *txnService) discard(ctx context.Context, cur halfEntry, half *message.Message, op []byte, now int64) error {
	b := s.b
	if _, _, err := b.ensureTopic(&protocol.TopicConfig{TopicName: meta.TransCheckMaxTimeTopic, ReadQueueNums: 1, WriteQueueNums: 1,
		Perm: protocol.PermRead | protocol.PermWrite, TopicFilterType: protocol.FilterSingleTag}); err != nil {
		b.logger.Warn("cannot create "+meta.TransCheckMaxTimeTopic, "error", err)
	}
	cp, err := b.halfCopy(half, meta.TransCheckMaxTimeTopic, cur.origin, cur.checks, now)
	if err != nil {
		return err
	}
	if _, err := b.appendTxn(ctx, [][]byte{cp, op}); err != nil {
		return fmt.Errorf("%w: discard half message: %w", errTxnStop, err)
	}
	s.resolved(cur.offset)
	b.logger.Warn("transactional half message discarded: the check-back found no answer", "group", cur.group,
		"halfOffset", cur.offset, "origin", cur.origin, "checks", cur.checks, "max", b.cfg.TransactionCheckMax,
		"msgId", message.ParseProperties(half.Properties)[message.PropertyUniqClientMessageID], "movedTo", meta.TransCheckMaxTimeTopic)
	return nil
}
