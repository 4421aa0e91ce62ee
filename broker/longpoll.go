package broker

import (
	"sync"
	"time"

	"rocketraft/broker/clients"
	"rocketraft/remoting"
)

// capSuspend is the hold of a long poll (a pull's suspendTimeoutMillis, a POP's pollTime)
// asking for ms milliseconds: at most maxMs (longPollingMaxMillis, 60 s by default), whatever
// the client asks. Clients ask 15 to 30 s; a client-chosen hold of weeks would keep the request
// and its goroutine that long. A pull held to the cap is answered PULL_NOT_FOUND, as at the end
// of any hold, and the client pulls again.
func capSuspend(ms, maxMs int64) time.Duration {
	switch {
	case ms <= 0:
		return 0
	case ms >= maxMs:
		return time.Duration(maxMs) * time.Millisecond
	}
	return time.Duration(ms) * time.Millisecond
}

// waiter is a pull parked until a matching message arrives or it times out.
type waiter struct {
	conn     *remoting.Conn
	req      *remoting.Command
	topic    string
	queueID  int32
	offset   int64
	sub      *clients.Subscription
	deadline time.Time
}

type queueKey struct {
	topic   string
	queueID int32
}

// longPoll holds parked pulls per queue. The store calls notify for every
// message it dispatches, so a parked pull is answered as soon as a matching
// message is stored; a periodic check answers the rest when they time out.
type longPoll struct {
	b       *Broker
	mu      sync.Mutex
	waiting map[queueKey][]*waiter
}

func newLongPoll(b *Broker) *longPoll {
	return &longPoll{b: b, waiting: map[queueKey][]*waiter{}}
}

func (lp *longPoll) suspend(w *waiter) {
	k := queueKey{w.topic, w.queueID}
	lp.mu.Lock()
	lp.waiting[k] = append(lp.waiting[k], w)
	lp.mu.Unlock()
	// A message stored between the lookup and the parking would otherwise wait
	// for the periodic check.
	if maxOff, _ := lp.b.queueMaxOffset(w.topic, w.queueID); maxOff > w.offset {
		lp.wakeQueue(k, func(*waiter) bool { return true })
	}
}

// notify is the store's dispatch callback: it runs under the store's append
// lock, so it only picks the waiters to wake and hands them to goroutines.
func (lp *longPoll) notify(topic string, queueID int32, queueOffset int64, tagsCode int64) {
	lp.mu.Lock()
	if len(lp.waiting) == 0 {
		lp.mu.Unlock()
		return
	}
	lp.mu.Unlock()
	lp.wakeQueue(queueKey{topic, queueID}, func(w *waiter) bool {
		return queueOffset >= w.offset && (w.sub == nil || w.sub.Match(tagsCode))
	})
}

// wakeQueue answers every waiter of one queue that pick selects.
func (lp *longPoll) wakeQueue(k queueKey, pick func(*waiter) bool) {
	lp.mu.Lock()
	ws := lp.waiting[k]
	var woken []*waiter
	kept := ws[:0]
	for _, w := range ws {
		if pick(w) {
			woken = append(woken, w)
		} else {
			kept = append(kept, w)
		}
	}
	if len(kept) == 0 {
		delete(lp.waiting, k)
	} else {
		lp.waiting[k] = kept
	}
	lp.mu.Unlock()
	for _, w := range woken {
		go lp.answer(w)
	}
}

func (lp *longPoll) answer(w *waiter) {
	resp := lp.b.pull(w.conn, w.req, false)
	if resp == nil {
		return
	}
	_ = w.conn.Reply(resp)
}

// run answers waiters whose time is up, or whose queue grew without a
// notification reaching them (their filter did not match the new messages'
// tag codes only when scanning finds nothing either).
func (lp *longPoll) run() {
	defer lp.b.wg.Done()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-lp.b.stop:
			return
		case now := <-t.C:
			lp.check(now)
		}
	}
}

func (lp *longPoll) check(now time.Time) {
	lp.mu.Lock()
	keys := make([]queueKey, 0, len(lp.waiting))
	for k := range lp.waiting {
		keys = append(keys, k)
	}
	lp.mu.Unlock()
	for _, k := range keys {
		maxOffset, _ := lp.b.queueMaxOffset(k.topic, k.queueID)
		lp.wakeQueue(k, func(w *waiter) bool {
			select {
			case <-w.conn.Done():
				return true // the answer will fail quietly; drop it
			default:
			}
			return now.After(w.deadline) || maxOffset > w.offset
		})
	}
}
