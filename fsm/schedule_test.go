package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"

	"rocketraft/storage/vfs"
)

// schedMeta is fakeMeta plus the delay progress table (fsm.ScheduleApplier), carried in
// snapshots as a second file.
type schedMeta struct {
	*fakeMeta
	Delay map[int32]int64
}

func newSchedMeta() *schedMeta { return &schedMeta{fakeMeta: newFakeMeta(), Delay: map[int32]int64{}} }

func (m *schedMeta) DelayOffset(level int32) int64 { return m.Delay[level] }

func (m *schedMeta) ApplyDelayOffset(level int32, off int64) { m.Delay[level] = off }

func (m *schedMeta) SnapshotMeta() ([]MetaFile, error) {
	files, err := m.fakeMeta.SnapshotMeta()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(m.Delay)
	return append(files, MetaFile{Name: "delay.json", Data: b}), err
}

func (m *schedMeta) RestoreMeta(files []MetaFile) error {
	m.Delay = map[int32]int64{}
	var rest []MetaFile
	for _, f := range files {
		if f.Name == "delay.json" {
			if err := json.Unmarshal(f.Data, &m.Delay); err != nil {
				return err
			}
			continue
		}
		rest = append(rest, f)
	}
	return m.fakeMeta.RestoreMeta(rest)
}

func (m *schedMeta) dump() string {
	b, _ := json.Marshal(m.Delay)
	return m.fakeMeta.dump() + string(b)
}

func mustSchedule(t testing.TB, d *ScheduleDeliver) []byte {
	t.Helper()
	b, err := EncodeScheduleDeliver(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// scheduleWorkload mixes message entries with delivery steps of two levels, including stale
// steps (a retried proposal, an old leader's) that must not apply.
func scheduleWorkload(t testing.TB, n int) []*raft.Log {
	logs := workload(t, n)
	next := map[int32]int64{}
	for i, l := range logs {
		if i%5 != 3 {
			continue
		}
		level := int32(1 + i%2)
		from := next[level]
		switch i % 15 {
		case 3: // a step whose from is stale: applies nothing
			from = max(0, from-1)
			if from == next[level] {
				from = next[level] + 7
			}
		default:
			next[level] = from + 3
		}
		var recs [][]byte
		for r := 0; r < 2; r++ {
			recs = append(recs, rec(t, "REAL", int32(r), fmt.Sprintf("due-%d-%d", i, r), int64(1_800_000_000_000+i)))
		}
		l.Data = mustSchedule(t, &ScheduleDeliver{Level: level, From: from, To: from + 3, Records: recs})
	}
	return logs
}

func TestScheduleDeliverCodec(t *testing.T) {
	d := &ScheduleDeliver{Level: 3, From: 10, To: 14, Records: [][]byte{rec(t, "T", 1, "a", 1), rec(t, "T", 2, "b", 2)}}
	b := mustSchedule(t, d)
	got, err := DecodeScheduleDeliver(b)
	if err != nil || !reflect.DeepEqual(got, d) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	empty := &ScheduleDeliver{Level: 1, From: 0, To: 5, Records: [][]byte{}}
	if got, err := DecodeScheduleDeliver(mustSchedule(t, empty)); err != nil || !reflect.DeepEqual(got, empty) {
		t.Fatalf("empty round trip: %+v %v", got, err)
	}
	for _, bad := range []*ScheduleDeliver{{Level: 0, From: 0, To: 1}, {Level: 1, From: 5, To: 5}, {Level: 1, From: -1, To: 2},
		{Level: 1, From: 0, To: 1, Records: [][]byte{{1}, {2}}}, {Level: 1, From: 0, To: 2, Records: [][]byte{{}}}} {
		if _, err := EncodeScheduleDeliver(bad); err == nil {
			t.Errorf("encode %+v: no error", bad)
		}
	}
	// Every truncation and every single-byte flip fails cleanly.
	for i := 0; i < len(b); i++ {
		if _, err := DecodeScheduleDeliver(b[:i]); !errors.Is(err, ErrMalformedEntry) {
			t.Fatalf("truncated to %d: %v", i, err)
		}
		c := append([]byte(nil), b...)
		c[i] ^= 0x40
		if _, err := DecodeScheduleDeliver(c); !errors.Is(err, ErrMalformedEntry) {
			t.Fatalf("flipped byte %d: %v", i, err)
		}
	}
}

func FuzzDecodeScheduleDeliver(f *testing.F) {
	f.Add(mustSchedule(f, &ScheduleDeliver{Level: 2, From: 1, To: 3, Records: [][]byte{rec(f, "T", 0, "x", 5)}}))
	f.Add([]byte{KindScheduleDeliver})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := DecodeScheduleDeliver(b)
		if err != nil {
			return
		}
		again, err := EncodeScheduleDeliver(d)
		if err != nil || !reflect.DeepEqual(again, b) {
			t.Fatalf("a decoded entry does not re-encode to its bytes: %v", err)
		}
	})
}

// TestScheduleApplyDeterministic: two replicas applying the same delivery steps end with
// identical commitlogs and progress; stale steps change nothing on either.
func TestScheduleApplyDeterministic(t *testing.T) {
	logs := scheduleWorkload(t, 150)
	fa, fb := vfs.NewMemFS(), vfs.NewMemFS()
	ma, mb := newSchedMeta(), newSchedMeta()
	a, b := newFSM(t, fa, ma), newFSM(t, fb, mb)
	defer a.Close()
	defer b.Close()
	ra, rb := applyAll(a, logs), applyAll(b, logs)
	if !reflect.DeepEqual(ra, rb) {
		t.Fatal("apply results differ")
	}
	stale, applied := 0, 0
	for i, r := range ra {
		s, ok := r.(*ScheduleResult)
		if !ok {
			continue
		}
		switch {
		case errors.Is(s.Err, ErrScheduleStale):
			stale++
			if len(s.Results) != 0 {
				t.Fatalf("entry %d: a stale step stored records", i+1)
			}
		case s.Err != nil || len(s.Results) != 2:
			t.Fatalf("entry %d: %+v", i+1, s)
		default:
			applied++
		}
	}
	if stale == 0 || applied == 0 {
		t.Fatalf("workload has %d stale and %d applied steps; want both", stale, applied)
	}
	sameImage(t, "replicas", commitlogImage(t, fa), commitlogImage(t, fb))
	if ma.dump() != mb.dump() {
		t.Fatalf("progress differs:\n%s\n%s", ma.dump(), mb.dump())
	}
	if ma.Delay[1] == 0 || ma.Delay[2] == 0 {
		t.Fatalf("progress did not move: %v", ma.Delay)
	}
	// The real topic got exactly the applied steps' records, two per step.
	st, release, err := a.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	var n int64
	for _, q := range []int32{0, 1} {
		n += st.GetMessages("REAL", q, 0, 1, 0, nil).MaxOffset
	}
	if n != int64(2*applied) {
		t.Fatalf("REAL holds %d records, want %d", n, 2*applied)
	}
}

// TestScheduleReplayAfterRestart: after a kill -9 at any point and a restart (tables empty, the
// store truncated to the marker), Raft's replay rebuilds the same progress and commitlog: a step
// whose records are already in the store is not appended again, and the compare-and-set decides
// as it did the first time.
func TestScheduleReplayAfterRestart(t *testing.T) {
	logs := scheduleWorkload(t, 120)
	refFS := vfs.NewMemFS()
	refMeta := newSchedMeta()
	ref := newFSM(t, refFS, refMeta)
	defer ref.Close()
	applyAll(ref, logs)
	for _, crashAt := range []int{4, 33, 61, 120} {
		t.Run(fmt.Sprint(crashAt), func(t *testing.T) {
			fs := vfs.NewMemFS()
			f := newFSM(t, fs, newSchedMeta())
			applyAll(f, logs[:crashAt])
			crashed := fs.CrashKeeping(func(string, int) bool { return true })
			f.Close()
			meta := newSchedMeta()
			g := newFSM(t, crashed, meta)
			defer g.Close()
			applyAll(g, logs)
			sameImage(t, "after replay", commitlogImage(t, refFS), commitlogImage(t, crashed))
			if refMeta.dump() != meta.dump() {
				t.Fatalf("progress differs after replay:\n%s\n%s", refMeta.dump(), meta.dump())
			}
		})
	}
}

// TestScheduleSnapshotCarriesProgress: a snapshot holds the progress table; a node restored from
// it continues (stale steps stay stale, fresh ones apply) exactly as the source.
func TestScheduleSnapshotCarriesProgress(t *testing.T) {
	logs := scheduleWorkload(t, 160)
	srcFS := vfs.NewMemFS()
	srcMeta := newSchedMeta()
	src := newFSM(t, srcFS, srcMeta)
	defer src.Close()
	applyAll(src, logs[:90])
	snap := snapshotBytes(t, src)

	fs := vfs.NewMemFS()
	meta := newSchedMeta()
	dst := newFSM(t, fs, meta)
	defer dst.Close()
	if err := dst.Restore(reader(snap)); err != nil {
		t.Fatal(err)
	}
	if srcMeta.dump() != meta.dump() {
		t.Fatalf("restored progress differs:\n%s\n%s", srcMeta.dump(), meta.dump())
	}
	for _, l := range logs[90:] {
		if a, b := src.Apply(l), dst.Apply(l); !reflect.DeepEqual(a, b) {
			t.Fatalf("entry %d: results differ: %+v / %+v", l.Index, a, b)
		}
	}
	sameImage(t, "restored", commitlogImage(t, srcFS), commitlogImage(t, fs))
	if srcMeta.dump() != meta.dump() {
		t.Fatal("progress differs after the replay")
	}
}

// TestScheduleWithoutApplierPanics: a metadata applier that keeps no delay progress cannot
// decide a delivery; the FSM stops rather than guess.
func TestScheduleWithoutApplierPanics(t *testing.T) {
	f := newFSM(t, vfs.NewMemFS(), newFakeMeta())
	defer f.Close()
	data := mustSchedule(t, &ScheduleDeliver{Level: 1, From: 0, To: 1})
	mustPanic(t, "schedule entry without a ScheduleApplier", func() {
		f.Apply(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: data})
	})
}
