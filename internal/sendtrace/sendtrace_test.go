package sendtrace

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// trace builds a leader trace from milestone times in microseconds (0: not reached).
func trace(us ...int64) *Trace {
	t := &Trace{}
	for s, v := range us {
		if v != 0 {
			t.At[s] = v * 1000
		}
	}
	return t
}

func TestReportStepsAddUpToTheTotal(t *testing.T) {
	c := NewCollector(LeaderStages)
	// received 1, queued 2, proposed 4, handed 5, written 8, sent 9, replicated 20,
	// synced 12 (before the acknowledgement: adds nothing), applying 21, applied 25,
	// answered 26, responded 30.
	c.Add(trace(1, 2, 4, 5, 8, 9, 20, 12, 21, 25, 26, 30))
	r := c.Report()
	if r.Count != 1 || len(r.Bands) != 3 {
		t.Fatalf("count %d, %d bands", r.Count, len(r.Bands))
	}
	want := []float64{0, 1, 2, 1, 3, 1, 11, 0, 1, 4, 1, 4}
	for _, b := range r.Bands {
		if b.Count != 1 || b.TotalUs != 29 {
			t.Fatalf("band %s: count %d total %v, want 1 and 29", b.Name, b.Count, b.TotalUs)
		}
		sum := 0.0
		for s, v := range b.StepsUs {
			if v != want[s] {
				t.Errorf("band %s step %s = %v, want %v", b.Name, LeaderStages[s], v, want[s])
			}
			sum += v
		}
		if sum != b.TotalUs {
			t.Errorf("band %s: steps add up to %v, total %v", b.Name, sum, b.TotalUs)
		}
	}
}

func TestReportBandsPickTheirPercentile(t *testing.T) {
	c := NewCollector(FollowerStages)
	// 1000 traces, total i+1 µs, all of it in the fsync step.
	for i := range 1000 {
		c.Add(&Trace{At: [maxStages]int64{1000, 2000, 3000, 3000 + int64(i+1)*1000, 3000 + int64(i+1)*1000}})
	}
	r := c.Report()
	if r.Count != 1000 {
		t.Fatalf("count %d", r.Count)
	}
	for _, b := range r.Bands {
		mid := (b.From + b.To) / 2 * 1000
		// total = 2 µs (received -> written) + the fsync
		if math.Abs(b.TotalUs-2-mid) > 1 {
			t.Errorf("band %s: total %.1f µs, want about %.1f", b.Name, b.TotalUs, mid+2)
		}
		if b.StepsUs[FollowerSynced] != b.TotalUs-2 {
			t.Errorf("band %s: fsync step %.1f, total %.1f", b.Name, b.StepsUs[FollowerSynced], b.TotalUs)
		}
	}
	if r.StepP99Us[FollowerSynced] < 985 || r.StepP50Us[FollowerSynced] < 495 || r.StepP50Us[FollowerSynced] > 505 {
		t.Errorf("fsync step p50 %.1f p99 %.1f", r.StepP50Us[FollowerSynced], r.StepP99Us[FollowerSynced])
	}
	var out bytes.Buffer
	if err := r.WriteText(&out, "follower"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"follower: 1000 traced", "p99 band", "synced", "total"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestCollectorKeepsOnlyCompletedTracesAndResets(t *testing.T) {
	c := NewCollector(LeaderStages)
	c.Add(trace(1, 2, 3)) // never responded
	c.Add(&Trace{})       // nothing
	c.Add(nil)            // nil
	var none *Collector   // a nil collector keeps nothing and reports nothing
	none.Add(trace(1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2))
	if r := none.Report(); r.Count != 0 {
		t.Fatalf("nil collector reported %d", r.Count)
	}
	if r := c.Report(); r.Count != 0 || len(r.Bands) != 0 {
		t.Fatalf("incomplete traces kept: %+v", r)
	}
	for range collectorRing + 10 { // the ring wraps
		c.Add(trace(1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2))
	}
	if r := c.Report(); r.Count != collectorRing {
		t.Fatalf("kept %d, want the ring's %d", r.Count, collectorRing)
	}
	c.Reset()
	if r := c.Report(); r.Count != 0 {
		t.Fatalf("kept %d after Reset", r.Count)
	}
}

func TestEntriesFirstMarkWinsAndOldSlotsAreReused(t *testing.T) {
	e := NewEntries()
	e.Mark(7, Replicated)
	var first Trace
	e.Fill(7, &first)
	e.Mark(7, Replicated) // the second follower's acknowledgement
	var again Trace
	e.Fill(7, &again)
	if first.At[Replicated] == 0 || again.At[Replicated] != first.At[Replicated] {
		t.Fatalf("replicated %d then %d: the first mark must stay", first.At[Replicated], again.At[Replicated])
	}
	e.Mark(7+entryRing, Written) // takes entry 7's slot
	var gone Trace
	e.Fill(7, &gone)
	if gone.At[Replicated] != 0 || gone.At[Written] != 0 {
		t.Fatalf("entry 7 still filled after its slot was reused: %+v", gone.At)
	}
	e.MarkRange(1, 3*entryRing, Synced) // only the newest ring's worth is marked
	var old, recent Trace
	e.Fill(entryRing, &old)
	e.Fill(3*entryRing, &recent)
	if old.At[Synced] != 0 || recent.At[Synced] == 0 {
		t.Fatalf("synced: old %d, recent %d", old.At[Synced], recent.At[Synced])
	}
	var nilEntries *Entries // records nothing, fills nothing
	nilEntries.Mark(1, Written)
	nilEntries.MarkRange(1, 2, Written)
	nilEntries.Fill(1, &old)
}
