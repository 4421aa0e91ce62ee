package txn

import (
	"reflect"
	"testing"

	"rocketraft/remoting"
)

func half(off, origin int64, born int64) halfEntry {
	return halfEntry{offset: off, phys: 1000 + off, origin: origin, born: born, group: "PG"}
}

func pendingOffsets(k *book) []int64 {
	var out []int64
	for _, e := range k.due(1<<62, 0) {
		out = append(out, e.offset)
	}
	return out
}

// Halves are unresolved until an op names them, whichever of the two is read first; a re-put copy
// replaces its predecessor as the transaction's current half; low is the cursor a new leader may
// start from.
func TestTxnBookHalvesAndOps(t *testing.T) {
	k := newBook(0, 0)
	for i := int64(0); i < 4; i++ {
		k.addHalf(half(i, i, 100))
	}
	if got := pendingOffsets(k); !reflect.DeepEqual(got, []int64{0, 1, 2, 3}) {
		t.Fatalf("pending %v", got)
	}
	k.addOp(1) // rolled back
	k.addOp(0) // committed
	if got, low := pendingOffsets(k), k.low(); !reflect.DeepEqual(got, []int64{2, 3}) || low != 2 {
		t.Fatalf("pending %v low %d, want [2 3] 2", got, low)
	}
	// A check-back re-puts half 2 as half 4 (origin 2) with an op for 2, in one append.
	k.addHalf(halfEntry{offset: 4, phys: 1004, origin: 2, checks: 1, born: 100, group: "PG"})
	k.addOp(2)
	if e, ok := k.current(2); !ok || e.offset != 4 || e.checks != 1 {
		t.Fatalf("current(2) = %+v %v, want the copy at 4", e, ok)
	}
	if _, ok := k.current(4); ok {
		t.Fatal("a copy is found by its origin only")
	}
	if low := k.low(); low != 3 {
		t.Fatalf("low %d, want 3", low)
	}
	// An op read before its half (the half queue was read before the half was stored).
	k.addOp(5)
	k.addHalf(half(5, 5, 100))
	if _, ok := k.current(5); ok {
		t.Fatal("half 5 was resolved by an op read earlier")
	}
	// Resolving the copy resolves the transaction; ops for unknown or old halves are no-ops.
	k.addOp(4)
	k.addOp(4)
	k.addOp(0)
	if _, ok := k.current(2); ok {
		t.Fatal("transaction 2 still unresolved")
	}
	if got, low := pendingOffsets(k), k.low(); !reflect.DeepEqual(got, []int64{3}) || low != 3 {
		t.Fatalf("pending %v low %d", got, low)
	}
	k.addOp(3)
	if k.size() != 0 || k.low() != 6 || k.halfNext != 6 {
		t.Fatalf("size %d low %d halfNext %d, want 0 6 6", k.size(), k.low(), k.halfNext)
	}
	// Skipped ranges (retention) move halfNext and drop early ops below it.
	k.addOp(7)
	k.skipHalves(9)
	k.addHalf(half(9, 9, 100))
	if k.size() != 1 || k.low() != 9 {
		t.Fatalf("after skip: size %d low %d", k.size(), k.low())
	}
}

// due: born older than the timeout (or the half's own immunity time), oldest offset first.
func TestTxnBookDue(t *testing.T) {
	k := newBook(0, 0)
	k.addHalf(half(0, 0, 1000))
	k.addHalf(half(1, 1, 9000))
	k.addHalf(halfEntry{offset: 2, origin: 2, born: 1000, immunity: 20000})
	k.addHalf(half(3, 3, 500))
	var got []int64
	for _, e := range k.due(10000, 6000) {
		got = append(got, e.offset)
	}
	if !reflect.DeepEqual(got, []int64{0, 3}) {
		t.Fatalf("due %v, want [0 3]", got)
	}
	if n := len(k.due(30000, 6000)); n != 4 {
		t.Fatalf("due later: %d, want 4", n)
	}
}

func TestParseOpBody(t *testing.T) {
	cases := map[string][]int64{"12": {12}, "1,2,3,": {1, 2, 3}, "": nil, "x,4,-1, 5 ": {4, 5}}
	for in, want := range cases {
		if got := parseOpBody([]byte(in)); !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
}

func TestParseEndRequest(t *testing.T) {
	good := map[string]string{"producerGroup": "PG", "tranStateTableOffset": "3", "commitLogOffset": "400",
		"commitOrRollback": "8", "fromTransactionCheck": "true", "msgId": "M"}
	h, err := ParseEndRequest(remoting.NewRequest(remoting.EndTransaction, good, nil))
	if err != nil || h.TranStateTableOffset != 3 || h.CommitLogOffset != 400 || h.CommitOrRollback != 8 || !h.FromTransactionCheck {
		t.Fatalf("%+v %v", h, err)
	}
	for field, bad := range map[string]string{"producerGroup": "", "tranStateTableOffset": "x", "commitLogOffset": "-1",
		"commitOrRollback": "4", "fromTransactionCheck": "maybe"} {
		ext := map[string]string{}
		for k, v := range good {
			ext[k] = v
		}
		ext[field] = bad
		if _, err := ParseEndRequest(remoting.NewRequest(remoting.EndTransaction, ext, nil)); err == nil {
			t.Errorf("%s=%q accepted", field, bad)
		}
	}
}
