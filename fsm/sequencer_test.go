package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"rocketraft/message"
)

// seqRec encodes a record with the given sysflag and a queue offset the sequencer must replace.
func seqRec(t testing.TB, topic string, qid, sysFlag int32) []byte {
	t.Helper()
	b, err := message.EncodeRecord(&message.Message{
		Topic: topic, QueueID: qid, SysFlag: sysFlag, QueueOffset: 999_999, StoreTimestamp: 1_700_000_000_000,
		BornTimestamp: 1_700_000_000_000, Body: []byte("body of " + topic),
		BornHost:   netip.MustParseAddrPort("10.0.0.1:1234"),
		StoreHost:  netip.MustParseAddrPort("10.0.0.9:10911"),
		Properties: message.FormatProperties(map[string]string{message.PropertyTags: "tg"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// seqFixture is a Sequencer over a table of applied next offsets, counting the loads and
// barriers it makes.
type seqFixture struct {
	seq      *Sequencer
	applied  map[queueKey]int64
	loads    []queueKey
	barriers int
	barErr   error
}

func newSeqFixture() *seqFixture {
	f := &seqFixture{applied: map[queueKey]int64{}}
	f.seq = NewSequencer(func(topic string, qid int32) int64 {
		k := queueKey{topic, qid}
		f.loads = append(f.loads, k)
		return f.applied[k]
	})
	return f
}

func (f *seqFixture) barrier() error {
	f.barriers++
	return f.barErr
}

func (f *seqFixture) stamp(t *testing.T, data []byte, term uint64) {
	t.Helper()
	if err := f.seq.Stamp(data, term, f.barrier); err != nil {
		t.Fatalf("stamp: %v", err)
	}
}

// queueOffsets decodes a stamped messages entry (which checks its CRC) and returns its records'
// queue offsets, append by append.
func queueOffsets(t *testing.T, data []byte) [][]int64 {
	t.Helper()
	appends, err := DecodeMessages(data)
	if err != nil {
		t.Fatalf("decode stamped entry: %v", err)
	}
	var out [][]int64
	for _, recs := range appends {
		var offs []int64
		for _, r := range recs {
			v, err := message.ParseView(r)
			if err != nil {
				t.Fatal(err)
			}
			offs = append(offs, v.QueueOffset())
		}
		out = append(out, offs)
	}
	return out
}

func TestSequencerConsecutiveOffsetsAcrossEntriesAndKinds(t *testing.T) {
	f := newSeqFixture()
	f.applied[queueKey{"A", 0}] = 100
	f.applied[queueKey{"B", 0}] = 7
	prepared, rollback := message.TransactionPreparedType, message.TransactionRollbackType
	committed := message.TransactionCommitType

	e1 := EncodeMessages([][][]byte{
		{seqRec(t, "A", 0, 0), seqRec(t, "A", 0, 0)},
		{seqRec(t, "B", 0, 0)},
		{seqRec(t, "A", 1, 0), seqRec(t, "A", 0, prepared), seqRec(t, "A", 0, committed)},
	})
	f.stamp(t, e1, 3)
	if got, want := fmt.Sprint(queueOffsets(t, e1)), "[[100 101] [7] [0 0 102]]"; got != want {
		t.Fatalf("entry 1 queue offsets %s, want %s", got, want)
	}

	e2, err := EncodeScheduleDeliver(&ScheduleDeliver{Level: 3, From: 10, To: 14,
		Records: [][]byte{seqRec(t, "A", 0, 0), seqRec(t, "B", 0, 0), seqRec(t, "B", 0, rollback)}})
	if err != nil {
		t.Fatal(err)
	}
	f.stamp(t, e2, 3)
	d, err := DecodeScheduleDeliver(e2)
	if err != nil {
		t.Fatalf("decode stamped schedule entry: %v", err)
	}
	var offs []int64
	for _, r := range d.Records {
		v, _ := message.ParseView(r)
		offs = append(offs, v.QueueOffset())
	}
	if got, want := fmt.Sprint(offs), "[103 8 0]"; got != want {
		t.Fatalf("schedule entry queue offsets %s, want %s", got, want)
	}
	if d.Level != 3 || d.From != 10 || d.To != 14 {
		t.Fatalf("schedule header changed: %+v", d)
	}

	e3 := EncodeMessages([][][]byte{{seqRec(t, "A", 0, 0)}, {seqRec(t, "A", 1, 0)}})
	f.stamp(t, e3, 3)
	if got, want := fmt.Sprint(queueOffsets(t, e3)), "[[104] [1]]"; got != want {
		t.Fatalf("entry 3 queue offsets %s, want %s", got, want)
	}
	if f.barriers != 1 {
		t.Fatalf("%d barriers in one term, want 1", f.barriers)
	}
	if got, want := fmt.Sprint(f.loads), "[{A 0} {B 0} {A 1}]"; got != want {
		t.Fatalf("loads %s, want %s (each queue once)", got, want)
	}
}

func TestSequencerLeavesOtherKindsAlone(t *testing.T) {
	f := newSeqFixture()
	meta := mustMeta(t, &MetaOp{Op: OpDeleteGroup, Name: "g", Now: 1})
	orig := bytes.Clone(meta)
	f.stamp(t, meta, 1)
	if !bytes.Equal(meta, orig) {
		t.Fatalf("metadata entry changed: %q", meta)
	}
	other := []byte{KindDigestCheck, 1, 2, 3}
	f.stamp(t, other, 1)
	if !bytes.Equal(other, []byte{KindDigestCheck, 1, 2, 3}) {
		t.Fatalf("digest entry changed: %v", other)
	}
	if len(f.loads) != 0 {
		t.Fatalf("loaded %v for entries without records", f.loads)
	}
}

func TestSequencerReloads(t *testing.T) {
	f := newSeqFixture()
	one := func() []byte { return EncodeMessages([][][]byte{{seqRec(t, "A", 0, 0)}}) }
	stampOne := func(term uint64) int64 {
		t.Helper()
		e := one()
		f.stamp(t, e, term)
		return queueOffsets(t, e)[0][0]
	}
	f.applied[queueKey{"A", 0}] = 5
	if got := stampOne(1); got != 5 {
		t.Fatalf("first stamp %d, want 5", got)
	}
	if got := stampOne(1); got != 6 {
		t.Fatalf("second stamp %d, want 6", got)
	}
	steps := []struct {
		name  string
		term  uint64
		drop  func()
		after int64
	}{
		{"term change", 2, func() {}, 50},
		{"Invalidate", 2, f.seq.Invalidate, 40},
		{"Lost", 2, f.seq.Lost, 30},
	}
	for i, st := range steps {
		st.drop()
		f.applied[queueKey{"A", 0}] = st.after
		barriers, loads := f.barriers, len(f.loads)
		if got := stampOne(st.term); got != st.after {
			t.Fatalf("%s: stamp %d, want the reloaded %d", st.name, got, st.after)
		}
		if f.barriers != barriers+1 || len(f.loads) != loads+1 {
			t.Fatalf("%s: %d barriers and %d loads, want one of each", st.name, f.barriers-barriers, len(f.loads)-loads)
		}
		if got := stampOne(st.term); got != st.after+1 {
			t.Fatalf("%s: next stamp %d, want %d", st.name, got, st.after+1)
		}
		if f.barriers != barriers+1 {
			t.Fatalf("step %d (%s): a barrier without a reason", i, st.name)
		}
	}
}

func TestSequencerBarrierError(t *testing.T) {
	f := newSeqFixture()
	f.applied[queueKey{"A", 0}] = 3
	boom := errors.New("not the leader")
	f.barErr = boom
	e := EncodeMessages([][][]byte{{seqRec(t, "A", 0, 0)}})
	orig := bytes.Clone(e)
	err := f.seq.Stamp(e, 1, f.barrier)
	if !errors.Is(err, boom) {
		t.Fatalf("stamp error %v, want it to wrap the barrier's", err)
	}
	if !bytes.Equal(e, orig) || len(f.loads) != 0 {
		t.Fatal("a failed barrier still stamped or loaded")
	}
	f.barErr = nil
	f.stamp(t, e, 1) // same term: the failed reload is retried
	if f.barriers != 2 {
		t.Fatalf("%d barriers, want 2 (the failed one retried)", f.barriers)
	}
	if got := queueOffsets(t, e)[0][0]; got != 3 {
		t.Fatalf("stamp %d, want 3", got)
	}
}

func TestSequencerMalformed(t *testing.T) {
	f := newSeqFixture()
	f.applied[queueKey{"A", 0}] = 1
	good := EncodeMessages([][][]byte{{seqRec(t, "A", 0, 0)}})
	sched, err := EncodeScheduleDeliver(&ScheduleDeliver{Level: 1, From: 0, To: 1, Records: [][]byte{seqRec(t, "A", 0, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	for name, e := range map[string][]byte{
		"empty":               {},
		"short messages":      {KindMessages, 0, 0},
		"messages truncated":  bytes.Clone(good[:len(good)-20]),
		"messages trailing":   append(bytes.Clone(good[:len(good)-4]), 0, 0, 0, 0, 0),
		"schedule truncated":  bytes.Clone(sched[:len(sched)-10]),
		"schedule bad count":  func() []byte { b := bytes.Clone(sched); b[21] = 0xff; return b }(),
		"messages bad length": func() []byte { b := bytes.Clone(good); b[9] = 0xff; return b }(),
	} {
		orig := bytes.Clone(e)
		err := f.seq.Stamp(e, 1, f.barrier)
		if !errors.Is(err, ErrMalformedEntry) {
			t.Errorf("%s: error %v, want ErrMalformedEntry", name, err)
		}
		if !bytes.Equal(e, orig) {
			t.Errorf("%s: a malformed entry was changed", name)
		}
	}
	// Nothing advanced a counter.
	f.stamp(t, good, 1)
	if got := queueOffsets(t, good)[0][0]; got != 1 {
		t.Fatalf("stamp after malformed entries %d, want 1", got)
	}
}

func TestSequencerSkipsAppendWithBadRecord(t *testing.T) {
	f := newSeqFixture()
	bad := seqRec(t, "A", 0, 0)
	bad[4] ^= 0xff // magic
	neg := seqRec(t, "A", -1, 0)
	trailing := append(seqRec(t, "A", 0, 0), 0)
	e := EncodeMessages([][][]byte{
		{seqRec(t, "A", 0, 0), bad},
		{neg, seqRec(t, "A", 0, 0)},
		{trailing},
		{seqRec(t, "A", 0, 0)},
	})
	f.stamp(t, e, 1)
	appends, err := DecodeMessages(e)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		v, _ := message.ParseView(appends[i][len(appends[i])-1])
		if i == 0 {
			v, _ = message.ParseView(appends[0][0])
		}
		if v.QueueOffset() != 999_999 {
			t.Errorf("append %d (with a bad record) was stamped: %d", i, v.QueueOffset())
		}
	}
	v, _ := message.ParseView(appends[3][0])
	if v.QueueOffset() != 0 {
		t.Fatalf("the good append got %d, want 0 (bad appends advance no counter)", v.QueueOffset())
	}
}

func TestSequencerStampAllocatesNothingPerRecord(t *testing.T) {
	f := newSeqFixture()
	var recs [][]byte
	for i := 0; i < 64; i++ {
		recs = append(recs, seqRec(t, fmt.Sprintf("Topic-%d", i%4), int32(i%3), 0))
	}
	e := EncodeMessages([][][]byte{recs[:32], recs[32:]})
	f.stamp(t, e, 1) // loads every queue
	allocs := testing.AllocsPerRun(50, func() {
		if err := f.seq.Stamp(e, 1, f.barrier); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per stamp of 64 records with the queues loaded, want 0", allocs)
	}
	if _, err := DecodeMessages(e); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkSequencerStamp(b *testing.B) {
	f := newSeqFixture()
	var recs [][]byte
	for i := 0; i < 64; i++ {
		recs = append(recs, seqRec(b, fmt.Sprintf("Topic-%d", i%4), int32(i%3), 0))
	}
	e := EncodeMessages([][][]byte{recs[:32], recs[32:]})
	b.SetBytes(int64(len(e)))
	b.ReportAllocs()
	for b.Loop() {
		if err := f.seq.Stamp(e, 1, f.barrier); err != nil {
			b.Fatal(err)
		}
	}
}
