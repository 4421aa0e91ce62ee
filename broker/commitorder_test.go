package broker

import (
	"testing"
)

func TestCommitOrderDropsAnOlderRequestOfTheSameConnection(t *testing.T) {
	var co commitOrder
	k := offsetKey{"G", "T", 0}
	var got []int
	commit := func(v int) func() { return func() { got = append(got, v) } }

	// The pull that arrived 2nd is served first, then the persist that arrived 1st: dropped.
	if !co.apply(k, commitOrigin{conn: 7, arrival: 2}, commit(44358)) {
		t.Fatal("the first commit served was dropped")
	}
	if co.apply(k, commitOrigin{conn: 7, arrival: 1}, commit(44357)) {
		t.Fatal("a commit that arrived before one already served on the same connection ran")
	}
	// Later requests of the connection, even moving back (a seek), land.
	if !co.apply(k, commitOrigin{conn: 7, arrival: 3}, commit(100)) {
		t.Fatal("a later request of the same connection was dropped")
	}
	// Another connection (another client, a reconnect) is not ordered against this one.
	if !co.apply(k, commitOrigin{conn: 8, arrival: 1}, commit(200)) {
		t.Fatal("another connection's commit was dropped")
	}
	// Another queue of the first connection is independent.
	if !co.apply(offsetKey{"G", "T", 1}, commitOrigin{conn: 7, arrival: 1}, commit(5)) {
		t.Fatal("a commit of another queue was dropped")
	}
	// Commits no request carried (resets, POP, the transaction checker) always run and do not
	// order the requests after them.
	if !co.apply(k, commitOrigin{}, commit(0)) {
		t.Fatal("an internal commit was dropped")
	}
	if !co.apply(k, commitOrigin{conn: 8, arrival: 2}, commit(201)) {
		t.Fatal("an internal commit made a later request look stale")
	}
	want := []int{44358, 100, 200, 5, 0, 201}
	if len(got) != len(want) {
		t.Fatalf("commits ran %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("commits ran %v, want %v", got, want)
		}
	}
}

// A classic broker given a pull's commit and then an older persist of the same connection
// (served in the reverse of their arrival, as concurrent handlers can) keeps the pull's offset.
func TestOlderPersistServedAfterPullKeepsTheQueueForward(t *testing.T) {
	b := httpTestBroker(t, nil)
	pull := commitOrigin{conn: 3, arrival: 11}
	persist := commitOrigin{conn: 3, arrival: 10}
	b.tables.commitPullOffset(pull, "G", "T", 0, 44358)
	b.tables.commitOffsetFrom(persist, "G", "T", 0, 44357)
	if off, ok := b.offsets.Query("G", "T", 0); !ok || off != 44358 {
		t.Fatalf("offset %d (found %v) after an older persist served late, want 44358", off, ok)
	}
	// The client's next persist, built after the pull, lands as usual (even moving back).
	b.tables.commitOffsetFrom(commitOrigin{conn: 3, arrival: 12}, "G", "T", 0, 44300)
	if off, _ := b.offsets.Query("G", "T", 0); off != 44300 {
		t.Fatalf("offset %d after a later persist, want 44300", off)
	}
}
