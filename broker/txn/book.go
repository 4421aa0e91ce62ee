package txn

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"rocketraft/message"
)

// Bookkeeping: which half messages are still unresolved.
//
// Everything here is derived from two queues the store already holds (and, in DLedger mode,
// every replica holds identically): RMQ_SYS_TRANS_HALF_TOPIC queue 0 (half messages) and
// RMQ_SYS_TRANS_OP_HALF_TOPIC queue 0 (op records, whose body is the half queue offset they
// resolve). A half record is unresolved until an op record names its queue offset. So no state
// of its own needs replicating or snapshotting: a node that becomes leader reads both queues
// from a cursor (the lowest unresolved half, kept as the consumer offset of CID_RMQ_SYS_TRANS)
// and knows what the previous leader knew.
//
// A check-back re-puts the half message (a copy with TRANSACTION_CHECK_TIMES + 1) and, in the
// same append, an op record for the half it replaces, so the copy is the transaction's only
// unresolved half. Copies carry TRAN_PREPARED_QUEUE_OFFSET = the first half's queue offset (the
// transaction's "origin"), which is how an END_TRANSACTION naming an older copy (a producer's
// late answer) finds the current one, and how a second answer for a resolved transaction is
// recognised and ignored instead of committing the message twice.

// halfEntry is one unresolved half record as the bookkeeping needs it (the record itself is
// read again from the store when it is checked or committed).
type halfEntry struct {
	offset   int64  // queue offset in the half topic
	phys     int64  // commitlog offset
	origin   int64  // queue offset of the transaction's first half (= offset for a first half)
	checks   int    // TRANSACTION_CHECK_TIMES
	born     int64  // born timestamp, ms (RocketMQ ages half messages by it)
	immunity int64  // CHECK_IMMUNITY_TIME_IN_SECONDS in ms, 0 when absent
	group    string // PGROUP
}

// parseHalf reads a stored half record's bookkeeping fields.
func parseHalf(v message.View) (halfEntry, error) {
	e := halfEntry{offset: v.QueueOffset(), phys: v.PhysicalOffset(), born: v.BornTimestamp()}
	e.origin = e.offset
	if s, ok := v.Property(message.PropertyTranPreparedQueueOffset); ok {
		o, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil || o < 0 || o > e.offset {
			return e, fmt.Errorf("half message at %d: bad %s %q", e.phys, message.PropertyTranPreparedQueueOffset, s)
		}
		e.origin = o
	}
	if s, ok := v.Property(message.PropertyTransactionCheckTimes); ok {
		n, err := strconv.Atoi(string(s))
		if err != nil || n < 0 {
			return e, fmt.Errorf("half message at %d: bad %s %q", e.phys, message.PropertyTransactionCheckTimes, s)
		}
		e.checks = n
	}
	if s, ok := v.Property(message.PropertyCheckImmunityTime); ok {
		// RocketMQ ignores a malformed immunity time (the default timeout applies).
		if n, err := strconv.ParseInt(string(s), 10, 64); err == nil && n > 0 && n < 1<<40 {
			e.immunity = n * 1000
		}
	}
	g, _ := v.Property(message.PropertyProducerGroup)
	e.group = string(g)
	return e, nil
}

// parseOpBody returns the half queue offsets an op record resolves: RocketMQ 4.x writes one
// decimal offset, 5.x a run of "offset," entries. Malformed entries are skipped.
func parseOpBody(body []byte) []int64 {
	var out []int64
	for _, f := range strings.Split(string(body), ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if n, err := strconv.ParseInt(f, 10, 64); err == nil && n >= 0 {
			out = append(out, n)
		}
	}
	return out
}

// book is the leader's view of unresolved half messages. Not safe for concurrent use (Service
// guards it with its mu).
type book struct {
	// halfNext and opNext are the next queue offsets to read in the half and op queues.
	halfNext, opNext int64
	pending          map[int64]*halfEntry // by half queue offset
	byOrigin         map[int64]int64      // origin -> offset of its unresolved half
	// early holds op records read before the half they name (a half stored after the read of
	// the half queue stopped); applied when that half is read.
	early map[int64]struct{}
}

func newBook(halfNext, opNext int64) *book {
	return &book{halfNext: halfNext, opNext: opNext, pending: map[int64]*halfEntry{},
		byOrigin: map[int64]int64{}, early: map[int64]struct{}{}}
}

// addHalf records a half read from the half queue (in queue order; halfNext moves past it).
func (k *book) addHalf(e halfEntry) {
	k.halfNext = max(k.halfNext, e.offset+1)
	if _, ok := k.early[e.offset]; ok {
		delete(k.early, e.offset)
		return
	}
	k.pending[e.offset] = &e
	if cur, ok := k.byOrigin[e.origin]; !ok || cur < e.offset {
		k.byOrigin[e.origin] = e.offset
	}
}

// skipHalves moves halfNext to next without recording anything (records removed by retention,
// or an unreadable record).
func (k *book) skipHalves(next int64) { k.halfNext = max(k.halfNext, next) }

// addOp records an op record naming half queue offset h.
func (k *book) addOp(h int64) {
	if h >= k.halfNext {
		k.early[h] = struct{}{}
		return
	}
	k.resolve(h)
}

// resolve forgets half h (its op record is written, or it cannot be read any more).
func (k *book) resolve(h int64) {
	e, ok := k.pending[h]
	if !ok {
		return
	}
	delete(k.pending, h)
	if k.byOrigin[e.origin] == h {
		delete(k.byOrigin, e.origin)
	}
}

// current returns the unresolved half of the transaction whose first half is origin.
func (k *book) current(origin int64) (halfEntry, bool) {
	off, ok := k.byOrigin[origin]
	if !ok {
		return halfEntry{}, false
	}
	e, ok := k.pending[off]
	if !ok {
		return halfEntry{}, false
	}
	return *e, true
}

// due returns the unresolved halves old enough to be checked at now (ms), oldest first: born
// more than timeout ms ago, or more than their own immunity time when they carry one.
func (k *book) due(now, timeout int64) []halfEntry {
	var out []halfEntry
	for _, e := range k.pending {
		wait := timeout
		if e.immunity > 0 {
			wait = e.immunity
		}
		if now-e.born >= wait {
			out = append(out, *e)
		}
	}
	slices.SortFunc(out, func(a, b halfEntry) int { return cmp.Compare(a.offset, b.offset) })
	return out
}

// low is the lowest unresolved half queue offset, or halfNext when none is: every half below it
// is resolved, so a new leader may start reading there (the persisted cursor).
func (k *book) low() int64 {
	low := k.halfNext
	for off := range k.pending {
		low = min(low, off)
	}
	return low
}

// size is the number of unresolved halves known.
func (k *book) size() int { return len(k.pending) }
