package longpoll

import (
	"sync"
	"testing"
	"time"
)

// queues is a fake store end per queue.
type queues struct {
	mu  sync.Mutex
	end map[string]int64
}

func (q *queues) max(topic string, _ int32) (int64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	v, ok := q.end[topic]
	return v, ok
}

func (q *queues) set(topic string, end int64) { q.mu.Lock(); q.end[topic] = end; q.mu.Unlock() }

// answered collects the waiters answered, by name.
type answered chan string

func (a answered) waiter(name, topic string, offset int64, deadline time.Time) *Waiter {
	return &Waiter{Topic: topic, Offset: offset, Deadline: deadline, Answer: func() { a <- name }}
}

func (a answered) want(t *testing.T, names ...string) {
	t.Helper()
	got := map[string]bool{}
	for range names {
		select {
		case n := <-a:
			got[n] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("answered %v, want %v", got, names)
		}
	}
	for _, n := range names {
		if !got[n] {
			t.Fatalf("answered %v, want %v", got, names)
		}
	}
	select {
	case n := <-a:
		t.Fatalf("%s answered too", n)
	case <-time.After(20 * time.Millisecond):
	}
}

// TestNotifyWakesMatchingWaiters: a stored message wakes the waiters of its queue that asked
// for its offset or an earlier one and whose filter selects its tags code; the others stay.
func TestNotifyWakesMatchingWaiters(t *testing.T) {
	q := &queues{end: map[string]int64{"T": 5}}
	h := New(Config{MaxOffset: q.max})
	a := make(answered, 10)
	far := time.Now().Add(time.Hour)
	h.Suspend(a.waiter("at5", "T", 5, far))
	h.Suspend(a.waiter("at7", "T", 7, far))
	tagged := a.waiter("tag42", "T", 5, far)
	tagged.Match = func(code int64) bool { return code == 42 }
	h.Suspend(tagged)
	h.Suspend(a.waiter("other", "U", 0, far))
	if h.Len() != 4 {
		t.Fatalf("%d parked", h.Len())
	}
	h.Notify("T", 0, 5, 7)
	a.want(t, "at5")
	h.Notify("T", 0, 6, 42)
	a.want(t, "tag42")
	h.Notify("T", 1, 9, 42) // another queue of T
	a.want(t)
	if h.Len() != 2 {
		t.Fatalf("%d parked, want 2", h.Len())
	}
}

// TestSuspendSeesAMessageStoredMeanwhile: a waiter parked after its queue already grew past its
// offset is answered at once.
func TestSuspendSeesAMessageStoredMeanwhile(t *testing.T) {
	q := &queues{end: map[string]int64{"T": 4}}
	h := New(Config{MaxOffset: q.max})
	a := make(answered, 10)
	h.Suspend(a.waiter("late", "T", 3, time.Now().Add(time.Hour)))
	a.want(t, "late")
	h.Suspend(a.waiter("waits", "T", 4, time.Now().Add(time.Hour)))
	a.want(t)
}

// TestCheckAnswersTimedOutGrownAndGone: the periodic check answers waiters past their deadline,
// those whose queue grew without a notification selecting them, and those whose requester is
// gone; the rest stay parked.
func TestCheckAnswersTimedOutGrownAndGone(t *testing.T) {
	q := &queues{end: map[string]int64{"T": 1, "U": 1, "V": 1}}
	h := New(Config{MaxOffset: q.max})
	a := make(answered, 10)
	now := time.Now()
	h.Suspend(a.waiter("expired", "T", 1, now.Add(time.Second)))
	h.Suspend(a.waiter("grown", "U", 1, now.Add(time.Hour)))
	gone := a.waiter("gone", "V", 1, now.Add(time.Hour))
	closed := make(chan struct{})
	gone.Gone = closed
	h.Suspend(gone)
	h.Suspend(a.waiter("stays", "V", 1, now.Add(time.Hour)))
	h.Check(now)
	a.want(t)
	q.set("U", 2)
	close(closed)
	h.Check(now.Add(2 * time.Second))
	a.want(t, "expired", "grown", "gone")
	if h.Len() != 1 {
		t.Fatalf("%d parked, want 1", h.Len())
	}
}

// TestRunStops: Run returns when stop closes, and its ticks answer expired waiters.
func TestRunStops(t *testing.T) {
	q := &queues{end: map[string]int64{}}
	h := New(Config{MaxOffset: q.max})
	a := make(answered, 1)
	h.Suspend(a.waiter("soon", "T", 0, time.Now()))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { h.Run(stop); close(done) }()
	a.want(t, "soon")
	close(stop)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
}
