// Package sendtrace breaks the latency of a replicated send into the steps it passes, so that a
// benchmark can say where each microsecond of a send goes at the median and in the tail, not only
// how long a send took.
//
// A send on the leader passes the milestones of LeaderStages in that order; a follower's handling
// of one AppendEntries passes FollowerStages. A Trace holds the time each milestone was reached.
// Milestones that belong to a Raft entry rather than to one send (the leader's write, the first
// follower's acknowledgement, the background fsync, the state machine's apply) are recorded once
// per entry, by index, in Entries, and copied into every send of the entry when its outcome is
// known. A Collector keeps the last completed traces and reports, for the sends whose total
// latency lies around a percentile, the mean time each step added: step i's share of a send is how
// much later milestone i was reached than every milestone before it, so the shares add up to the
// total exactly, whatever order steps that run in parallel (the leader's fsync and the followers'
// acknowledgements) finished in.
//
// Tracing is off unless a broker is started with sendTraceEnable: it costs a few clock reads and
// two short critical sections per send, and, on the leader, one goroutine hand-off per Raft
// pipeline answer (the hook that sees the follower's acknowledgement).
package sendtrace

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"time"
)

// Stage is one milestone of a traced operation; its meaning depends on the Collector's stage
// names (LeaderStages or FollowerStages).
type Stage uint8

// Milestones of a send on the leader, in the order a send passes them.
const (
	Received   Stage = iota // the send request was decoded
	Queued                  // handed to the batcher
	Proposed                // taken into a Raft entry, about to be handed to Raft
	Handed                  // Raft accepted the entry into its queue
	Written                 // the leader's copy of the entry was written (not yet synced)
	Sending                 // Raft's replication began sending the entry to a follower (the first to)
	Replicated              // the first follower acknowledged the entry (a quorum of three)
	Synced                  // the leader's copy is durable
	Applying                // the state machine took the entry
	Applied                 // the state machine applied it
	Answered                // the batcher saw the entry's outcome
	Responded               // the response was handed to the client's connection
	numLeader
)

// Milestones of one AppendEntries on a follower.
const (
	FollowerReceived Stage = iota // the request was decoded off the connection
	FollowerStoring               // Raft's loop took it and began to store its entries
	FollowerWritten               // the entries were written (not yet synced)
	FollowerSynced                // the entries are durable
	FollowerAnswered              // the response was written to the connection
	numFollower
)

// LeaderStages names the leader's milestones, for a Collector and its report.
var LeaderStages = []string{"received", "queued", "proposed", "handed", "written", "sending", "replicated", "synced", "applying", "applied", "answered", "responded"}

// FollowerStages names a follower's milestones.
var FollowerStages = []string{"received", "storing", "written", "synced", "answered"}

// maxStages bounds the milestones of a Trace.
const maxStages = int(numLeader)

// base is the origin of every stamp in this process: stamps are monotonic nanoseconds since it,
// so 0 means "not reached".
var base = time.Now()

// Now returns the current stamp.
func Now() int64 { return int64(time.Since(base)) + 1 }

// Trace is the time each milestone of one operation was reached (0: not reached).
type Trace struct {
	At [maxStages]int64
}

// Mark records that s was reached now.
func (t *Trace) Mark(s Stage) {
	if t != nil {
		t.At[s] = Now()
	}
}

// entryRing is how many recent entries Entries remembers; an entry is looked up shortly after it
// commits, so only the entries in flight must fit.
const entryRing = 8192

// Entries records the per-entry milestones (Written, Sending, Replicated, Synced, Applying, Applied) by
// Raft index. The zero value is not usable; use NewEntries. A nil *Entries records nothing.
type Entries struct {
	mu    sync.Mutex
	slots []entrySlot
}

type entrySlot struct {
	index uint64
	at    [maxStages]int64
}

// NewEntries returns an empty record.
func NewEntries() *Entries { return &Entries{slots: make([]entrySlot, entryRing)} }

// Mark records that entry index reached s now, unless it reached s before (the first follower's
// acknowledgement counts, not the second's).
func (e *Entries) Mark(index uint64, s Stage) {
	if e == nil || index == 0 {
		return
	}
	now := Now()
	e.mu.Lock()
	sl := e.slot(index)
	if sl.at[s] == 0 {
		sl.at[s] = now
	}
	e.mu.Unlock()
}

// MarkRange records that the entries from..to (inclusive) reached s now. Only the most recent
// entryRing of them are recorded: older ones are no longer looked up.
func (e *Entries) MarkRange(from, to uint64, s Stage) {
	if e == nil || to == 0 || from > to {
		return
	}
	if to-from >= entryRing {
		from = to - entryRing + 1
	}
	from = max(from, 1)
	now := Now()
	e.mu.Lock()
	for i := from; i <= to; i++ {
		sl := e.slot(i)
		if sl.at[s] == 0 {
			sl.at[s] = now
		}
	}
	e.mu.Unlock()
}

// slot returns index's slot, cleared if it held an older entry. The caller holds mu.
func (e *Entries) slot(index uint64) *entrySlot {
	sl := &e.slots[index%entryRing]
	if sl.index != index {
		*sl = entrySlot{index: index}
	}
	return sl
}

// Fill copies entry index's milestones into t.
func (e *Entries) Fill(index uint64, t *Trace) {
	if e == nil || t == nil || index == 0 {
		return
	}
	e.mu.Lock()
	sl := &e.slots[index%entryRing]
	if sl.index == index {
		for s, at := range sl.at {
			if at != 0 {
				t.At[s] = at
			}
		}
	}
	e.mu.Unlock()
}

// Collector keeps the last completed traces of one kind. A nil *Collector keeps nothing.
type Collector struct {
	names []string
	mu    sync.Mutex
	ring  []Trace
	next  int
	full  bool
}

// collectorRing is how many completed traces a Collector keeps: enough for a p99 band of a few
// hundred sends.
const collectorRing = 1 << 16

// NewCollector returns a collector of traces whose milestones are names (LeaderStages or
// FollowerStages).
func NewCollector(names []string) *Collector {
	return &Collector{names: names, ring: make([]Trace, collectorRing)}
}

// Add keeps a copy of a completed trace: one whose first and last milestones were reached.
func (c *Collector) Add(t *Trace) {
	if c == nil || t == nil || t.At[0] == 0 || t.At[len(c.names)-1] == 0 {
		return
	}
	c.mu.Lock()
	c.ring[c.next] = *t
	c.next++
	if c.next == len(c.ring) {
		c.next, c.full = 0, true
	}
	c.mu.Unlock()
}

// Reset forgets every trace kept (a benchmark calls it after its warm-up).
func (c *Collector) Reset() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.next, c.full = 0, false
	c.mu.Unlock()
}

// Band is the breakdown of the traces whose total latency ranks in [From, To) (fractions of the
// traces kept, sorted by total).
type Band struct {
	Name    string  `json:"name"`
	From    float64 `json:"from"`
	To      float64 `json:"to"`
	Count   int     `json:"count"`
	TotalUs float64 `json:"totalUs"` // mean total latency of the band's traces
	// StepsUs is the mean time each milestone added over the ones before it, in milestone order
	// (the first milestone adds nothing); the steps add up to TotalUs.
	StepsUs []float64 `json:"stepsUs"`
}

// Report is what a Collector has seen.
type Report struct {
	Stages []string `json:"stages"`
	Count  int      `json:"count"`
	// Bands: the median (45-55 %), p90 (88-92 %) and p99 (98.5-99.5 %) sends.
	Bands []Band `json:"bands"`
	// StepP50Us and StepP99Us are each step's own percentiles over every trace, for steps whose
	// tail does not line up with the total's.
	StepP50Us []float64 `json:"stepP50Us"`
	StepP99Us []float64 `json:"stepP99Us"`
}

// Report computes the breakdown of the traces kept.
func (c *Collector) Report() Report {
	if c == nil {
		return Report{}
	}
	r := Report{Stages: c.names}
	c.mu.Lock()
	n := c.next
	if c.full {
		n = len(c.ring)
	}
	traces := make([]Trace, n)
	copy(traces, c.ring[:n])
	c.mu.Unlock()
	r.Count = n
	if n == 0 {
		return r
	}
	k := len(c.names)
	steps := make([][]float64, n) // per trace: each milestone's added time, in µs
	totals := make([]float64, n)
	for i := range traces {
		steps[i] = make([]float64, k)
		last := traces[i].At[0]
		for s := 1; s < k; s++ {
			at := traces[i].At[s]
			if at > last {
				steps[i][s] = float64(at-last) / 1e3
				last = at
			}
		}
		totals[i] = float64(last-traces[i].At[0]) / 1e3
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return totals[order[a]] < totals[order[b]] })
	for _, b := range []struct {
		name     string
		from, to float64
	}{{"p50", 0.45, 0.55}, {"p90", 0.88, 0.92}, {"p99", 0.985, 0.995}} {
		lo, hi := int(b.from*float64(n)), int(b.to*float64(n))
		if hi <= lo {
			hi = min(lo+1, n)
		}
		band := Band{Name: b.name, From: b.from, To: b.to, Count: hi - lo, StepsUs: make([]float64, k)}
		for _, i := range order[lo:hi] {
			band.TotalUs += totals[i]
			for s := range k {
				band.StepsUs[s] += steps[i][s]
			}
		}
		if band.Count > 0 {
			band.TotalUs /= float64(band.Count)
			for s := range k {
				band.StepsUs[s] /= float64(band.Count)
			}
		}
		r.Bands = append(r.Bands, band)
	}
	r.StepP50Us, r.StepP99Us = make([]float64, k), make([]float64, k)
	col := make([]float64, n)
	for s := range k {
		for i := range n {
			col[i] = steps[i][s]
		}
		sort.Float64s(col)
		r.StepP50Us[s] = col[n/2]
		r.StepP99Us[s] = col[min(n*99/100, n-1)]
	}
	return r
}

// WriteText writes the report as a table, in microseconds: one row per step (the time its
// milestone added), one column per band and the step's own p50 and p99.
func (r Report) WriteText(w io.Writer, title string) error {
	if _, err := fmt.Fprintf(w, "%s: %d traced, microseconds\n", title, r.Count); err != nil {
		return err
	}
	if r.Count == 0 {
		return nil
	}
	fmt.Fprintf(w, "%-12s", "step")
	for _, b := range r.Bands {
		fmt.Fprintf(w, " %9s", b.Name+" band")
	}
	fmt.Fprintf(w, " %9s %9s\n", "step p50", "step p99")
	for s := 1; s < len(r.Stages); s++ {
		fmt.Fprintf(w, "%-12s", r.Stages[s])
		for _, b := range r.Bands {
			fmt.Fprintf(w, " %9.1f", b.StepsUs[s])
		}
		fmt.Fprintf(w, " %9.1f %9.1f\n", r.StepP50Us[s], r.StepP99Us[s])
	}
	fmt.Fprintf(w, "%-12s", "total")
	for _, b := range r.Bands {
		fmt.Fprintf(w, " %9.1f", b.TotalUs)
	}
	_, err := fmt.Fprintf(w, "\n")
	return err
}
