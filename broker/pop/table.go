// Package pop is the state of POP consumption (RocketMQ 5.x POP_MESSAGE, ACK_MESSAGE,
// CHANGE_MESSAGE_INVISIBLETIME): per (group, topic, queue) which messages were handed out and
// until when they stay invisible to other POPs.
//
// Design (simpler than RocketMQ's checkpoint + revive-topic + %RETRY% machinery, same contract):
// each queue a group pops has
//
//   - Next: the first offset never handed out; POP reads new messages from here.
//   - Inflight: offsets below Next handed out and not acked, each with the popTime of its current
//     checkpoint and the time it becomes visible again (Deadline).
//   - Start (derived): the smallest in-flight offset, or Next when none: every offset below it is
//     acked (or was skipped by the POP's tag filter). It is the group's POP offset and is what the
//     broker commits as the group's consumer offset.
//
// An in-flight offset whose Deadline has passed is "revived": the next POP of the queue hands it
// out again (before new messages) under a new checkpoint. An ACK or CHANGE_MESSAGE_INVISIBLETIME
// names a checkpoint by its offset and popTime; one carrying an older popTime (the message was
// revived and popped again since) changes nothing.
//
// Every change is an operation whose effect depends only on its fields and the table, so in
// DLedger mode the leader proposes it through Raft and every replica applies the same sequence
// (broker/pop.go). Times are the leader's clock in milliseconds, carried in the operation.
package pop

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
)

// Key names one queue of one group.
type Key struct {
	Group   string `json:"group"`
	Topic   string `json:"topic"`
	QueueID int32  `json:"queueId"`
}

// Entry is one in-flight message.
type Entry struct {
	Offset int64 `json:"offset"`
	// PopTime identifies the current checkpoint (ms): the time of the POP or of the last
	// CHANGE_MESSAGE_INVISIBLETIME.
	PopTime int64 `json:"popTime"`
	// Deadline is when the message becomes visible again (ms).
	Deadline int64 `json:"deadline"`
	// Deliveries counts the times it was handed out (1 on the first POP); a redelivery carries
	// Deliveries-1 as the message's reconsumeTimes.
	Deliveries int32 `json:"deliveries"`
}

type queue struct {
	next     int64
	inflight map[int64]*Entry
}

func (q *queue) start() int64 {
	s := q.next
	for off := range q.inflight {
		s = min(s, off)
	}
	return s
}

// AckResult is the outcome of an ACK.
type AckResult int

const (
	// Acked: the checkpoint was in flight and is now consumed.
	Acked AckResult = iota
	// AlreadyDone: the offset was handed out and is no longer in flight (acked before).
	AlreadyDone
	// Stale: the offset is in flight under another checkpoint (it was revived and popped again).
	Stale
	// Unknown: this group never handed out that offset.
	Unknown
)

// Table is the POP state of every group. It is safe for concurrent use.
type Table struct {
	mu     sync.Mutex
	queues map[Key]*queue
}

// NewTable returns an empty table.
func NewTable() *Table { return &Table{queues: map[Key]*queue{}} }

// Known reports whether the group has popped the queue before.
func (t *Table) Known(k Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.queues[k] != nil
}

// Offsets returns the queue's POP offset (Start) and Next; ok false if never popped.
func (t *Table) Offsets(k Key) (start, next int64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.queues[k]
	if q == nil {
		return 0, 0, false
	}
	return q.start(), q.next, true
}

// Expired lists up to max in-flight entries of the queue visible again at now, lowest offset
// first (copies).
func (t *Table) Expired(k Key, now int64, max int) []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.queues[k]
	if q == nil || max <= 0 {
		return nil
	}
	var out []Entry
	for _, e := range q.inflight {
		if e.Deadline <= now {
			out = append(out, *e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.Offset, b.Offset) })
	if len(out) > max {
		out = out[:max]
	}
	return out
}

// Inflight lists every in-flight entry of the queue, lowest offset first (copies).
func (t *Table) Inflight(k Key) []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.queues[k]
	if q == nil {
		return nil
	}
	out := make([]Entry, 0, len(q.inflight))
	for _, e := range q.inflight {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.Offset, b.Offset) })
	return out
}

// OrderlyRedeliver is what an orderly POP may take from the queue before any new message. An
// orderly consumer holds a queue while any of its messages is in flight: held is true when some
// in-flight entry is still invisible at now (the queue gives nothing). Otherwise redeliver lists
// the in-flight entries (all visible again), lowest offset first, at most max: the same messages
// are handed out again, in order, before anything after them. Both empty: nothing in flight,
// the POP reads new messages.
func (t *Table) OrderlyRedeliver(k Key, now int64, max int) (redeliver []Entry, held bool) {
	all := t.Inflight(k)
	for _, e := range all {
		if e.Deadline > now {
			return nil, true
		}
	}
	if len(all) > max {
		all = all[:max]
	}
	return all, false
}

// NextDeadline is the earliest deadline of the queue's in-flight entries (0: none).
func (t *Table) NextDeadline(k Key) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var d int64
	if q := t.queues[k]; q != nil {
		for _, e := range q.inflight {
			if d == 0 || e.Deadline < d {
				d = e.Deadline
			}
		}
	}
	return d
}

// Get returns a copy of one in-flight entry.
func (t *Table) Get(k Key, off int64) (Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if q := t.queues[k]; q != nil {
		if e := q.inflight[off]; e != nil {
			return *e, true
		}
	}
	return Entry{}, false
}

// Pop records one POP of the queue: offsets were handed out at popTime, invisible for
// invisibleTime ms, and every offset in [old Next, next) not among them was skipped by the
// filter (done). from is where a queue the group never popped starts (its initial offset).
// Offsets below the queue's start or already acked are ignored (they cannot be handed out
// again).
func (t *Table) Pop(k Key, from, next int64, offsets []int64, popTime, invisibleTime int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.queues[k]
	if q == nil {
		q = &queue{next: from, inflight: map[int64]*Entry{}}
		t.queues[k] = q
	}
	for _, off := range offsets {
		e := q.inflight[off]
		switch {
		case e != nil:
			e.PopTime, e.Deadline, e.Deliveries = popTime, popTime+invisibleTime, e.Deliveries+1
		case off >= q.next && off < next:
			q.inflight[off] = &Entry{Offset: off, PopTime: popTime, Deadline: popTime + invisibleTime, Deliveries: 1}
		}
	}
	q.next = max(q.next, next)
}

// Check tells what Ack would do, without changing anything.
func (t *Table) Check(k Key, off, popTime int64) AckResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.check(k, off, popTime)
}

func (t *Table) check(k Key, off, popTime int64) AckResult {
	q := t.queues[k]
	switch {
	case q == nil || off >= q.next:
		return Unknown
	case q.inflight[off] == nil:
		return AlreadyDone
	case q.inflight[off].PopTime != popTime:
		return Stale
	}
	return Acked
}

// Ack consumes the checkpoint (off, popTime) when it is the current one.
func (t *Table) Ack(k Key, off, popTime int64) AckResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.check(k, off, popTime)
	if r == Acked {
		delete(t.queues[k].inflight, off)
	}
	return r
}

// Change moves the checkpoint (off, popTime) to newPopTime, invisible until
// newPopTime+invisibleTime (CHANGE_MESSAGE_INVISIBLETIME). The result is Acked when it changed.
func (t *Table) Change(k Key, off, popTime, newPopTime, invisibleTime int64) AckResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.check(k, off, popTime)
	if r == Acked {
		e := t.queues[k].inflight[off]
		e.PopTime, e.Deadline = newPopTime, newPopTime+invisibleTime
	}
	return r
}

// DeleteTopic forgets every group's state of a topic.
func (t *Table) DeleteTopic(topic string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.queues {
		if k.Topic == topic {
			delete(t.queues, k)
		}
	}
}

// DeleteGroup forgets a group's state.
func (t *Table) DeleteGroup(group string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.queues {
		if k.Group == group {
			delete(t.queues, k)
		}
	}
}

// QueueRecord is one queue's state in a snapshot.
type QueueRecord struct {
	Key
	Next     int64   `json:"next"`
	Inflight []Entry `json:"inflight,omitempty"`
}

// Records returns the whole table, sorted, for a snapshot.
func (t *Table) Records() []QueueRecord {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]QueueRecord, 0, len(t.queues))
	for k, q := range t.queues {
		r := QueueRecord{Key: k, Next: q.next}
		for _, e := range q.inflight {
			r.Inflight = append(r.Inflight, *e)
		}
		slices.SortFunc(r.Inflight, func(a, b Entry) int { return cmp.Compare(a.Offset, b.Offset) })
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b QueueRecord) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.QueueID, b.QueueID))
	})
	return out
}

// Restore replaces the table with records (nil: empty).
func (t *Table) Restore(recs []QueueRecord) {
	m := make(map[Key]*queue, len(recs))
	for _, r := range recs {
		q := &queue{next: r.Next, inflight: make(map[int64]*Entry, len(r.Inflight))}
		for _, e := range r.Inflight {
			e := e
			q.inflight[e.Offset] = &e
		}
		m[r.Key] = q
	}
	t.mu.Lock()
	t.queues = m
	t.mu.Unlock()
}

// MarshalJSON encodes the table as its records (snapshot file).
func (t *Table) MarshalJSON() ([]byte, error) { return json.Marshal(t.Records()) }

// UnmarshalJSON replaces the table with encoded records.
func (t *Table) UnmarshalJSON(b []byte) error {
	var recs []QueueRecord
	if err := json.Unmarshal(b, &recs); err != nil {
		return fmt.Errorf("pop table: %w", err)
	}
	t.Restore(recs)
	return nil
}
