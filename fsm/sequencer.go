package fsm

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"
	"sync/atomic"

	"rocketraft/message"
)

// The leader's sequencer. With the commitlog as the Raft log (storage.Config.EntryLog) every
// replica writes an entry's records, queue offsets included, before the entry commits, so the
// queue offsets cannot wait for the apply: the leader stamps them into the entry as it proposes
// it, in the order entries enter Raft's log, from per-queue counters loaded from the applied
// state. Counters are only a prediction: the apply checks every stamped offset against its
// consume queue (storage.Store.DispatchWritten) and refuses a send whose offsets do not match
// (storage.ErrQueueOffsetStale); the FSM then calls Invalidate and the next Stamp reloads.

// Sequencer stamps the queue offsets of the records of KindMessages and KindScheduleDeliver
// entries the leader proposes. It has dledger.Sequencer's method set (Stamp, Lost) without
// importing dledger, plus Invalidate, which is the FSM's to call. Stamp calls are serialized (the
// node calls it under its proposal lock, and the Sequencer locks too); Lost and Invalidate may be
// called from any goroutine at any time.
type Sequencer struct {
	next func(topic string, queueID int32) int64
	// maxEntry, when set, is the largest entry Stamp lets through: an entry lies whole in one
	// commitlog file (the FSM sets it from mappedFileSizeCommitLog).
	maxEntry int

	// invalid is set when the counters cannot be trusted (Lost, Invalidate, and at start); the
	// next Stamp reloads them after a barrier.
	invalid atomic.Bool

	mu     sync.Mutex
	term   uint64              // the term the counters belong to
	queues map[queueKey]*int64 // next queue offset per queue, loaded on first use
	views  []message.View      // scratch for one append's records, reused
}

// queueKey names one consume queue. Looking it up with a topic converted from the record's
// bytes (queueKey{string(topic), qid}) does not allocate (the compiler reuses the bytes for a
// map index); only a queue's first use builds a string, to insert it.
type queueKey struct {
	topic   string
	queueID int32
}

// NewSequencer returns a Sequencer whose counters load from next: the applied state's next queue
// offset of a queue (its consume queue's max offset), read under the state machine's lock. The
// first Stamp loads after a barrier.
func NewSequencer(next func(topic string, queueID int32) int64) *Sequencer {
	s := &Sequencer{next: next, queues: map[queueKey]*int64{}}
	s.invalid.Store(true)
	return s
}

// Lost reports that an entry this Sequencer stamped may not have reached the log: the counters
// past it are not to be trusted, so the next Stamp reloads them.
func (s *Sequencer) Lost() { s.invalid.Store(true) }

// Invalidate makes the next Stamp reload the counters. The FSM calls it when an applied entry's
// send was refused as stale, a topic was deleted, or a delay-delivery step was refused: the
// applied state then differs from what the counters assumed.
func (s *Sequencer) Invalidate() { s.invalid.Store(true) }

// Stamp sets, in place, the QUEUEOFFSET of every record of a KindMessages or KindScheduleDeliver
// entry and recomputes the entry's CRC; entries of other kinds are left as they are. When term
// is not the counters' term, or they were invalidated, it first calls barrier (so everything
// already in the log is applied) and reloads them lazily from the applied state; a barrier error
// is returned wrapped, and the next Stamp tries again.
//
// A dispatchable record (message.IsDispatchable) gets its queue's next offset, which then
// advances; one that is not gets 0. An append holding a record that does not parse as a whole
// record (message.ParseView, with no trailing bytes) or has a negative queue id is left as it is
// and advances no counter: the state machine refuses it identically on every replica. A
// malformed envelope is an error wrapping ErrMalformedEntry, and nothing is changed.
func (s *Sequencer) Stamp(data []byte, term uint64, barrier func() error) error {
	if len(data) == 0 {
		return fmt.Errorf("%w: empty entry", ErrMalformedEntry)
	}
	if s.maxEntry > 0 && len(data) > s.maxEntry {
		return fmt.Errorf("fsm: a raft entry of %d bytes does not fit a commitlog file with dLegerLogStore=commitlog (at most %d: raise mappedFileSizeCommitLog)", len(data), s.maxEntry)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if term != s.term || s.invalid.Load() {
		// Cleared before the barrier: a Lost for an entry proposed before it is settled by the
		// barrier, one arriving later is kept.
		s.invalid.Store(false)
		if err := barrier(); err != nil {
			s.invalid.Store(true)
			return fmt.Errorf("fsm: sequencer: barrier before loading queue offsets: %w", err)
		}
		clear(s.queues)
		s.term = term
	}
	// A first walk checks the envelope, so a malformed entry is refused before anything changes;
	// the second one cannot fail.
	switch data[0] {
	case KindMessages:
		if err := walkMessages(data, nil); err != nil {
			return err
		}
		_ = walkMessages(data, s.stampAppend)
	case KindScheduleDeliver:
		if err := walkSchedule(data, nil); err != nil {
			return err
		}
		_ = walkSchedule(data, s.stampAppend)
	default:
		return nil
	}
	body := data[:len(data)-4]
	binary.BigEndian.PutUint32(data[len(data)-4:], crc32.Checksum(body, castagnoli))
	return nil
}

// stampAppend stamps the n records of one append (one send), laid out in recs as the envelope
// has them (a 4-byte length, then the record), unless one of them would make the store refuse
// the append.
func (s *Sequencer) stampAppend(recs []byte, n int) {
	views := s.views[:0]
	defer func() {
		clear(views) // do not keep the entry's bytes alive
		s.views = views[:0]
	}()
	r := entryReader{p: recs}
	for i := 0; i < n; i++ {
		b, _ := r.record() // the envelope was checked
		v, err := message.ParseView(b)
		if err != nil || v.Size() != len(b) || v.QueueID() < 0 {
			return
		}
		views = append(views, v)
	}
	for _, v := range views {
		// The store sets PHYSICALOFFSET where it writes the record; the entry carries 0, so that
		// Raft reads back from the commitlog exactly the entry it stored (entryheader.go).
		v.SetPhysicalOffset(0)
		if !message.IsDispatchable(v.SysFlag()) {
			v.SetQueueOffset(0)
			continue
		}
		c := s.queues[queueKey{string(v.Topic()), v.QueueID()}]
		if c == nil {
			k := queueKey{string(v.Topic()), v.QueueID()}
			c = new(int64)
			*c = s.next(k.topic, k.queueID)
			s.queues[k] = c
		}
		v.SetQueueOffset(*c)
		*c++
	}
}

// entryReader reads the big-endian lengths of an entry's envelope.
type entryReader struct{ p []byte }

func (r *entryReader) u32() (int, bool) {
	if len(r.p) < 4 {
		return 0, false
	}
	v := binary.BigEndian.Uint32(r.p)
	r.p = r.p[4:]
	return int(v), true
}

func (r *entryReader) record() ([]byte, bool) {
	n, ok := r.u32()
	if !ok || n > len(r.p) {
		return nil, false
	}
	b := r.p[:n:n]
	r.p = r.p[n:]
	return b, true
}

// walkMessages checks a KindMessages entry's envelope (the package doc's layout; the CRC is not
// checked) and, when each is set, calls it with each append's region of data and record count.
func walkMessages(data []byte, each func(recs []byte, n int)) error {
	if len(data) < messagesOverhead || data[0] != KindMessages {
		return fmt.Errorf("%w: not a messages entry (%d bytes)", ErrMalformedEntry, len(data))
	}
	r := entryReader{p: data[1 : len(data)-4]}
	na, ok := r.u32()
	if !ok || na > len(r.p)/4 {
		return fmt.Errorf("%w: bad append count", ErrMalformedEntry)
	}
	for i := 0; i < na; i++ {
		nr, ok := r.u32()
		if !ok || nr > len(r.p)/4 {
			return fmt.Errorf("%w: append %d: bad record count", ErrMalformedEntry, i)
		}
		start := r.p
		for j := 0; j < nr; j++ {
			if _, ok := r.record(); !ok {
				return fmt.Errorf("%w: append %d record %d: bad length", ErrMalformedEntry, i, j)
			}
		}
		if each != nil {
			each(start[:len(start)-len(r.p)], nr)
		}
	}
	if len(r.p) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformedEntry, len(r.p))
	}
	return nil
}

// walkSchedule checks a KindScheduleDeliver entry's envelope (EncodeScheduleDeliver's layout;
// the CRC is not checked) and, when each is set, calls it once with the records' region of data
// and their count (the records are one append).
func walkSchedule(data []byte, each func(recs []byte, n int)) error {
	if len(data) < scheduleHeader+4 || data[0] != KindScheduleDeliver {
		return fmt.Errorf("%w: not a schedule delivery entry (%d bytes)", ErrMalformedEntry, len(data))
	}
	body := data[:len(data)-4]
	nr := int(binary.BigEndian.Uint32(body[21:]))
	r := entryReader{p: body[scheduleHeader:]}
	if nr > len(r.p)/4 {
		return fmt.Errorf("%w: schedule delivery: bad record count %d", ErrMalformedEntry, nr)
	}
	for i := 0; i < nr; i++ {
		if _, ok := r.record(); !ok {
			return fmt.Errorf("%w: schedule delivery record %d: bad length", ErrMalformedEntry, i)
		}
	}
	if len(r.p) != 0 {
		return fmt.Errorf("%w: schedule delivery: %d trailing bytes", ErrMalformedEntry, len(r.p))
	}
	if each != nil && nr > 0 {
		each(body[scheduleHeader:], nr)
	}
	return nil
}
