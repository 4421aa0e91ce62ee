// Package longpoll parks requests that found nothing (a pull with the suspend flag) until a
// message arrives in their queue or their hold ends, then has them answered.
//
// The store calls Holder.Notify for every message it dispatches, so a parked request is answered
// as soon as a matching message is stored; a periodic check (Run, every CheckInterval) answers
// the rest when they time out, or when their queue grew without a notification selecting them.
//
// Lock order: Holder.mu is never held while calling MaxOffset or a waiter's Answer; the store's
// dispatch callback (Notify) takes only Holder.mu. The package knows nothing of the broker: the
// queue's end comes from Config.MaxOffset and each waiter carries its own Answer.
package longpoll

import (
	"sync"
	"time"
)

// CheckInterval is how often Run looks for waiters whose time is up.
const CheckInterval = 200 * time.Millisecond

// CapSuspend is the hold of a long poll (a pull's suspendTimeoutMillis, a POP's pollTime)
// asking for ms milliseconds: at most maxMs (longPollingMaxMillis, 60 s by default), whatever
// the client asks. Clients ask 15 to 30 s; a client-chosen hold of weeks would keep the request
// and its goroutine that long. A pull held to the cap is answered PULL_NOT_FOUND, as at the end
// of any hold, and the client pulls again.
func CapSuspend(ms, maxMs int64) time.Duration {
	switch {
	case ms <= 0:
		return 0
	case ms >= maxMs:
		return time.Duration(maxMs) * time.Millisecond
	}
	return time.Duration(ms) * time.Millisecond
}

// Waiter is a request parked until a matching message arrives or it times out.
type Waiter struct {
	Topic   string
	QueueID int32
	// Offset is the queue offset the request asked for: a message at or past it wakes it.
	Offset int64
	// Match selects the messages (by tags code) that wake it; nil selects every message.
	Match func(tagsCode int64) bool
	// Deadline is when the hold ends.
	Deadline time.Time
	// Gone is closed when the requester disconnected (nil: never); such a waiter is dropped at
	// the next check.
	Gone <-chan struct{}
	// Answer runs the request again and replies; called once, on a goroutine of its own.
	Answer func()
}

// Config is what a Holder needs.
type Config struct {
	// MaxOffset is a queue's current end (its next queue offset).
	MaxOffset func(topic string, queueID int32) (int64, bool)
}

type queueKey struct {
	topic   string
	queueID int32
}

// Holder holds parked requests per queue.
type Holder struct {
	cfg     Config
	mu      sync.Mutex
	waiting map[queueKey][]*Waiter
}

// New returns an empty holder.
func New(cfg Config) *Holder {
	return &Holder{cfg: cfg, waiting: map[queueKey][]*Waiter{}}
}

// Suspend parks w. A message stored between the caller's lookup and the parking would
// otherwise wait for the periodic check, so the queue's end is looked at once more.
func (h *Holder) Suspend(w *Waiter) {
	k := queueKey{w.Topic, w.QueueID}
	h.mu.Lock()
	h.waiting[k] = append(h.waiting[k], w)
	h.mu.Unlock()
	if maxOff, _ := h.cfg.MaxOffset(w.Topic, w.QueueID); maxOff > w.Offset {
		h.wakeQueue(k, func(*Waiter) bool { return true })
	}
}

// Notify is the store's dispatch callback: it runs under the store's append lock, so it only
// picks the waiters to wake and hands them to goroutines.
func (h *Holder) Notify(topic string, queueID int32, queueOffset int64, tagsCode int64) {
	h.mu.Lock()
	if len(h.waiting) == 0 {
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	h.wakeQueue(queueKey{topic, queueID}, func(w *Waiter) bool {
		return queueOffset >= w.Offset && (w.Match == nil || w.Match(tagsCode))
	})
}

// wakeQueue answers every waiter of one queue that pick selects.
func (h *Holder) wakeQueue(k queueKey, pick func(*Waiter) bool) {
	h.mu.Lock()
	ws := h.waiting[k]
	var woken []*Waiter
	kept := ws[:0]
	for _, w := range ws {
		if pick(w) {
			woken = append(woken, w)
		} else {
			kept = append(kept, w)
		}
	}
	if len(kept) == 0 {
		delete(h.waiting, k)
	} else {
		h.waiting[k] = kept
	}
	h.mu.Unlock()
	for _, w := range woken {
		go w.Answer()
	}
}

// Run checks the waiters every CheckInterval until stop closes.
func (h *Holder) Run(stop <-chan struct{}) {
	t := time.NewTicker(CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			h.Check(now)
		}
	}
}

// Check answers the waiters whose time is up at now, or whose queue grew without a notification
// selecting them (their filter did not match the new messages' tag codes, or the notification
// came before they parked); a waiter whose requester is gone is answered too (the reply fails
// quietly), which drops it.
func (h *Holder) Check(now time.Time) {
	h.mu.Lock()
	keys := make([]queueKey, 0, len(h.waiting))
	for k := range h.waiting {
		keys = append(keys, k)
	}
	h.mu.Unlock()
	for _, k := range keys {
		maxOffset, _ := h.cfg.MaxOffset(k.topic, k.queueID)
		h.wakeQueue(k, func(w *Waiter) bool {
			select {
			case <-w.Gone:
				return true
			default:
			}
			return now.After(w.Deadline) || maxOffset > w.Offset
		})
	}
}

// Len is the number of parked requests.
func (h *Holder) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, ws := range h.waiting {
		n += len(ws)
	}
	return n
}
