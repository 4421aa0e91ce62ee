package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

const mib = 1 << 20

// Interval is one periodic report: the Stats drained from the Recorder at
// the end of the interval, and where the interval lies in the run.
type Interval struct {
	// Elapsed is the time from the start of the run to the end of the
	// interval.
	Elapsed time.Duration
	// Length is the interval's actual duration (about the reporting
	// period; shorter for the last one).
	Length time.Duration
	// Warmup tells that the interval belongs to the warm-up period and is
	// excluded from the summary.
	Warmup bool
	// Tail marks the last interval of a run when it is much shorter than
	// the reporting period (its rates are then noisy).
	Tail bool
	// Stats is what completed during the interval.
	Stats *Stats
}

// rate returns n per second over d.
func rate(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// usToMs converts microseconds to milliseconds.
func usToMs(us int64) float64 { return float64(us) / 1000 }

// IntervalHeader returns the column header for FormatInterval lines;
// latLabel names the latency columns ("lat" for send latency, "e2e" for
// end-to-end latency).
func IntervalHeader(latLabel string) string {
	return fmt.Sprintf("%7s %11s %9s %10s %10s %10s %10s %8s",
		"time", "msg/s", "MiB/s",
		latLabel+".p50", latLabel+".p99", latLabel+".p999", latLabel+".max", "errors") +
		"   (latencies in ms)"
}

// FormatInterval formats one per-interval line: elapsed time, messages per
// second, MiB per second of message bodies, p50/p99/p999/max latency in
// milliseconds and the error count; warm-up intervals are marked.
func FormatInterval(iv Interval) string {
	st := iv.Stats
	h := &st.Latency
	line := fmt.Sprintf("%6.1fs %11.0f %9.2f %10.2f %10.2f %10.2f %10.2f %8d",
		iv.Elapsed.Seconds(),
		rate(st.Msgs, iv.Length),
		rate(st.Bytes, iv.Length)/mib,
		usToMs(h.Quantile(0.50)), usToMs(h.Quantile(0.99)),
		usToMs(h.Quantile(0.999)), usToMs(h.Max()),
		st.Errors)
	if iv.Warmup {
		line += "  warm-up"
	}
	if iv.Tail {
		line += fmt.Sprintf("  (last %.2fs)", iv.Length.Seconds())
	}
	return line
}

// Summary is the result of a run. Rates and latency percentiles cover the
// steady state only (after warm-up); Total* fields cover the whole run.
type Summary struct {
	// Kind is "produce" or "consume".
	Kind string `json:"kind"`
	// Mode is the send mode (sync, async, oneway) or the consumer type
	// (push, pull).
	Mode string `json:"mode"`
	// Client is "native" for runs of the native client, "grpc" for the
	// 5.x client through a proxy; empty for the official client.
	Client string `json:"client,omitempty"`
	Topic  string `json:"topic"`
	// Size is the message body size in bytes (producer only).
	Size int `json:"size,omitempty"`
	// Batch is the number of messages per send call (producer only).
	Batch int `json:"batch,omitempty"`
	// Concurrency is the number of sends in flight (producer only).
	Concurrency int `json:"concurrency,omitempty"`

	// ElapsedSec is the length of the whole run.
	ElapsedSec float64 `json:"elapsed_sec"`
	// WarmupSec is the length of the excluded warm-up.
	WarmupSec float64 `json:"warmup_sec"`
	// SteadySec is the length of the measured window.
	SteadySec float64 `json:"steady_sec"`

	// Msgs, Bytes, Ops and Errors are counted in the measured window.
	Msgs   uint64 `json:"msgs"`
	Bytes  uint64 `json:"bytes"`
	Ops    uint64 `json:"ops"`
	Errors uint64 `json:"errors"`
	// MsgsPerSec and MiBPerSec are the average rates over the window.
	MsgsPerSec float64 `json:"msgs_per_sec"`
	MiBPerSec  float64 `json:"mib_per_sec"`

	// Latency names what was measured: "send" (duration of one send
	// call) or "end_to_end" (receive time minus born timestamp).
	Latency string  `json:"latency"`
	P50Ms   float64 `json:"p50_ms"`
	P90Ms   float64 `json:"p90_ms"`
	P99Ms   float64 `json:"p99_ms"`
	P999Ms  float64 `json:"p999_ms"`
	MaxMs   float64 `json:"max_ms"`
	MeanMs  float64 `json:"mean_ms"`

	// TotalMsgs and TotalErrors include the warm-up.
	TotalMsgs   uint64 `json:"total_msgs"`
	TotalErrors uint64 `json:"total_errors"`
	// NoSteadyState is set when the run ended before the warm-up did;
	// the figures then cover the whole run.
	NoSteadyState bool `json:"no_steady_state,omitempty"`
	// TopErrors lists the most frequent error messages with counts.
	TopErrors []string `json:"top_errors,omitempty"`

	// Retried counts the sends (producer only) that failed on a dead broker
	// address or a missing route and were sent again (ProduceConfig.RouteRetries).
	Retried uint64 `json:"retried"`
	// LongestGapMs is the longest time in the whole run without a successful
	// send (producer only): the pause a failover caused.
	LongestGapMs float64 `json:"longest_gap_ms"`
}

// setRecovery fills in how the run got over failed sends.
func (s *Summary) setRecovery(retried uint64, longestGap time.Duration) {
	s.Retried = retried
	s.LongestGapMs = float64(longestGap.Microseconds()) / 1000
}

// fillLatency sets the latency fields from h (microseconds).
func (s *Summary) fillLatency(h *Histogram) {
	s.P50Ms = usToMs(h.Quantile(0.50))
	s.P90Ms = usToMs(h.Quantile(0.90))
	s.P99Ms = usToMs(h.Quantile(0.99))
	s.P999Ms = usToMs(h.Quantile(0.999))
	s.MaxMs = usToMs(h.Max())
	s.MeanMs = h.Mean() / 1000
}

// FormatSummary returns the human-readable summary line.
func FormatSummary(s *Summary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "SUMMARY %s %s topic=%s", s.Kind, s.Mode, s.Topic)
	if s.Kind == "produce" {
		fmt.Fprintf(&b, " size=%d batch=%d concurrency=%d", s.Size, s.Batch, s.Concurrency)
	}
	// The measured window is the steady state after the warm-up, or the whole run when it
	// ended within the warm-up.
	window := "after warm-up"
	if s.NoSteadyState {
		window = "whole run (it ended within the warm-up)"
	}
	fmt.Fprintf(&b, " | %s, %.1fs: %d msgs, %.0f msg/s, %.2f MiB/s, %d errors",
		window, s.SteadySec, s.Msgs, s.MsgsPerSec, s.MiBPerSec, s.Errors)
	fmt.Fprintf(&b, " | %s latency ms p50=%.2f p99=%.2f p999=%.2f max=%.2f",
		s.Latency, s.P50Ms, s.P99Ms, s.P999Ms, s.MaxMs)
	fmt.Fprintf(&b, " | total %d msgs, %d errors in %.1fs", s.TotalMsgs, s.TotalErrors, s.ElapsedSec)
	if !s.NoSteadyState {
		fmt.Fprintf(&b, " (warm-up %.1fs)", s.WarmupSec)
	}
	if s.Kind == "produce" {
		fmt.Fprintf(&b, " | retried %d sends, longest gap between successful sends %.0f ms", s.Retried, s.LongestGapMs)
	}
	return b.String()
}

// FormatSummaryJSON returns the summary as one line of JSON.
func FormatSummaryJSON(s *Summary) string {
	data, err := json.Marshal(s)
	if err != nil { // cannot happen: Summary has only plain fields
		return fmt.Sprintf(`{"error":%q}`, err.Error())
	}
	return string(data)
}

// window accumulates intervals into whole-run and steady-state totals and
// knows where the steady-state window starts and ends.
type window struct {
	warmup   time.Duration
	period   time.Duration
	trimIdle bool

	total  Stats
	steady Stats
	// steady window bounds, as offsets from the start of the run
	steadyStart, steadyEnd time.Duration
	haveSteady             bool
	elapsed                time.Duration
}

// isWarmup tells whether an interval starting at offset start belongs to
// the warm-up. The boundary is rounded to the nearest reporting tick so
// that a 3s warm-up with 1s ticks excludes exactly three intervals.
func (w *window) isWarmup(start time.Duration) bool {
	return w.warmup > 0 && start < w.warmup-w.period/2
}

// add accounts for one interval and reports whether it was warm-up.
func (w *window) add(start, end time.Duration, st *Stats) bool {
	w.elapsed = end
	w.total.Merge(st)
	if w.isWarmup(start) {
		return true
	}
	w.steady.Merge(st)
	if w.trimIdle && st.Msgs == 0 {
		// Idle intervals only count once messages have started flowing,
		// and only up to the last interval that had messages.
		return false
	}
	if !w.haveSteady {
		w.haveSteady = true
		w.steadyStart = start
	}
	w.steadyEnd = end
	return false
}

// summary fills the measurement fields of s.
func (w *window) summary(s *Summary) {
	s.ElapsedSec = w.elapsed.Seconds()
	s.WarmupSec = min(w.warmup, w.elapsed).Seconds()
	s.TotalMsgs = w.total.Msgs
	s.TotalErrors = w.total.Errors
	st := &w.steady
	var d time.Duration
	switch {
	case w.haveSteady:
		d = w.steadyEnd - w.steadyStart
	case st.Msgs == 0 && st.Errors == 0 && w.total.Ops > 0:
		// Everything happened during warm-up: report the whole run.
		st = &w.total
		d = w.elapsed
		s.NoSteadyState = true
		s.WarmupSec = 0
	}
	s.SteadySec = d.Seconds()
	s.Msgs, s.Bytes, s.Ops, s.Errors = st.Msgs, st.Bytes, st.Ops, st.Errors
	s.MsgsPerSec = rate(st.Msgs, d)
	s.MiBPerSec = rate(st.Bytes, d) / mib
	s.fillLatency(&st.Latency)
}

// reporter drains a Recorder every period, prints one line per interval
// and accumulates the run's totals.
type reporter struct {
	rec    *Recorder
	out    io.Writer // per-interval lines; nil to suppress them
	label  string
	start  time.Time
	period time.Duration
	win    window
}

func newReporter(rec *Recorder, out io.Writer, label string, period, warmup time.Duration, trimIdle bool) *reporter {
	if period <= 0 {
		period = time.Second
	}
	return &reporter{
		rec: rec, out: out, label: label, period: period,
		win: window{warmup: warmup, period: period, trimIdle: trimIdle},
	}
}

// run reports every period from now until finished is closed, then reports
// the last (partial) interval and returns. It must run in one goroutine.
func (r *reporter) run(finished <-chan struct{}) {
	r.start = time.Now()
	if r.out != nil {
		fmt.Fprintln(r.out, IntervalHeader(r.label))
	}
	ticker := time.NewTicker(r.period)
	defer ticker.Stop()
	var st Stats
	prev := time.Duration(0)
	for {
		final := false
		select {
		case <-ticker.C:
		case <-finished:
			final = true
		}
		now := time.Since(r.start)
		r.rec.Drain(&st)
		if final && now-prev < 10*time.Millisecond && st.Ops == 0 && st.Errors == 0 {
			return // nothing in a negligible tail interval
		}
		warm := r.win.add(prev, now, &st)
		if r.out != nil {
			fmt.Fprintln(r.out, FormatInterval(Interval{Elapsed: now, Length: now - prev, Warmup: warm,
				Tail: final && now-prev < r.period/2, Stats: &st}))
		}
		prev = now
		if final {
			return
		}
	}
}
