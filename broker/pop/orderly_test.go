package pop

import (
	"reflect"
	"testing"
)

// TestOrderlyRedeliver: an orderly POP gets nothing from a queue while one of its messages is
// invisible (CHANGE extends that), the same offsets once all are visible again (with the
// delivery count grown by the re-pop), and new messages only after every in-flight one is acked.
func TestOrderlyRedeliver(t *testing.T) {
	tb := NewTable()
	if r, held := tb.OrderlyRedeliver(qk, 0, 32); held || len(r) != 0 {
		t.Fatalf("unknown queue: %v %v", r, held)
	}
	tb.Pop(qk, 0, 3, []int64{0, 1, 2}, 1000, 100) // deadline 1100
	if _, held := tb.OrderlyRedeliver(qk, 1050, 32); !held {
		t.Fatal("not held while in flight")
	}
	// Message 1's invisible time moved: the queue stays held after the others expire.
	if r := tb.Change(qk, 1, 1000, 1090, 100); r != Acked { // deadline 1190
		t.Fatalf("change: %v", r)
	}
	if _, held := tb.OrderlyRedeliver(qk, 1150, 32); !held {
		t.Fatal("not held while the changed message is invisible")
	}
	r, held := tb.OrderlyRedeliver(qk, 1200, 2)
	if held || !reflect.DeepEqual(offsets(r), []int64{0, 1}) {
		t.Fatalf("after expiry: %v held %v, want [0 1] (lowest first, at most 2)", offsets(r), held)
	}
	tb.Pop(qk, 0, 3, []int64{0, 1}, 1200, 100) // re-popped: same offsets, Next unchanged
	if e, _ := tb.Get(qk, 0); e.Deliveries != 2 || e.PopTime != 1200 {
		t.Fatalf("re-popped entry %+v, want 2 deliveries at 1200", e)
	}
	if _, held := tb.OrderlyRedeliver(qk, 1250, 32); !held {
		t.Fatal("not held after the re-pop")
	}
	for _, off := range []int64{0, 1} {
		if r := tb.Ack(qk, off, 1200); r != Acked {
			t.Fatalf("ack %d: %v", off, r)
		}
	}
	// 2 is still in flight (expired, never re-popped): it comes back before anything new.
	if r, held := tb.OrderlyRedeliver(qk, 1300, 32); held || !reflect.DeepEqual(offsets(r), []int64{2}) {
		t.Fatalf("after acking 0 and 1: %v held %v, want [2]", offsets(r), held)
	}
	if r := tb.Ack(qk, 2, 1000); r != Acked {
		t.Fatalf("ack 2: %v", r)
	}
	if r, held := tb.OrderlyRedeliver(qk, 1300, 32); held || len(r) != 0 {
		t.Fatalf("all acked: %v held %v, want nothing (new messages next)", offsets(r), held)
	}
	if s, n, _ := tb.Offsets(qk); s != 3 || n != 3 {
		t.Fatalf("offsets %d %d, want 3 3", s, n)
	}
}
