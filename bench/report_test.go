package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func statsWith(msgs, bytes, errs uint64, latUs ...int64) *Stats {
	st := &Stats{Ops: uint64(len(latUs)), Msgs: msgs, Bytes: bytes, Errors: errs}
	for _, v := range latUs {
		st.Latency.Record(v)
	}
	return st
}

func TestFormatInterval(t *testing.T) {
	st := statsWith(1000, 1000*1024, 3, 1000, 2000, 3000, 250000)
	line := FormatInterval(Interval{Elapsed: 2 * time.Second, Length: 500 * time.Millisecond, Stats: st})
	// 1000 msgs in 0.5s = 2000 msg/s; 1000 KiB in 0.5 s = 1.95 MiB/s;
	// p50 is 2000µs reported as its bucket's top (2015µs, within 0.8%).
	for _, want := range []string{"2.0s", " 2000 ", " 1.95 ", " 2.01 ", " 250.00 ", " 3"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "warm-up") {
		t.Error("non-warm-up line marked warm-up")
	}
	warm := FormatInterval(Interval{Elapsed: time.Second, Length: time.Second, Warmup: true, Stats: &Stats{}})
	if !strings.HasSuffix(warm, "warm-up") {
		t.Errorf("warm-up line %q not marked", warm)
	}
	tail := FormatInterval(Interval{Elapsed: time.Second, Length: 20 * time.Millisecond, Tail: true, Stats: &Stats{}})
	if !strings.HasSuffix(tail, "(last 0.02s)") {
		t.Errorf("tail line %q not marked", tail)
	}
	// Header and line have the same columns.
	hdr := IntervalHeader("lat")
	if len(strings.Fields(hdr)) < 8 || !strings.Contains(hdr, "lat.p999") {
		t.Errorf("header %q", hdr)
	}
	if got := len(strings.Fields(line)); got != 8 {
		t.Errorf("line has %d fields, want 8: %q", got, line)
	}
}

func TestWindowExcludesWarmup(t *testing.T) {
	w := window{warmup: 3 * time.Second, period: time.Second}
	for i := 0; i < 10; i++ {
		msgs := uint64(100)
		if i >= 3 {
			msgs = 1000
		}
		start, end := time.Duration(i)*time.Second, time.Duration(i+1)*time.Second
		// simulate slightly late ticks
		end += 3 * time.Millisecond
		if i > 0 {
			start += 3 * time.Millisecond
		}
		warm := w.add(start, end, statsWith(msgs, msgs*10, 0, int64(i+1)*1000))
		if warm != (i < 3) {
			t.Errorf("interval %d warm-up = %v", i, warm)
		}
	}
	var s Summary
	w.summary(&s)
	if s.Msgs != 7000 || s.TotalMsgs != 7300 {
		t.Errorf("msgs %d total %d", s.Msgs, s.TotalMsgs)
	}
	if s.SteadySec < 6.99 || s.SteadySec > 7.01 {
		t.Errorf("steady %.3fs", s.SteadySec)
	}
	if s.MsgsPerSec < 999 || s.MsgsPerSec > 1001 {
		t.Errorf("tps %.1f", s.MsgsPerSec)
	}
	// latency samples 4..10 ms in the steady state
	if s.P50Ms < 7 || s.P50Ms > 7*1.008 || s.MaxMs != 10 {
		t.Errorf("p50 %.2f max %.2f", s.P50Ms, s.MaxMs)
	}
	if s.WarmupSec != 3 || s.NoSteadyState {
		t.Errorf("warmup %.1f noSteady %v", s.WarmupSec, s.NoSteadyState)
	}
}

func TestWindowTrimIdle(t *testing.T) {
	w := window{period: time.Second, trimIdle: true}
	counts := []uint64{0, 0, 500, 1000, 500, 0, 0}
	for i, c := range counts {
		w.add(time.Duration(i)*time.Second, time.Duration(i+1)*time.Second, statsWith(c, c, 0))
	}
	var s Summary
	w.summary(&s)
	if s.SteadySec != 3 || s.Msgs != 2000 {
		t.Errorf("steady %.1fs msgs %d, want 3s 2000", s.SteadySec, s.Msgs)
	}
	if s.ElapsedSec != 7 {
		t.Errorf("elapsed %.1f", s.ElapsedSec)
	}
}

func TestWindowRunShorterThanWarmup(t *testing.T) {
	w := window{warmup: 10 * time.Second, period: time.Second}
	w.add(0, time.Second, statsWith(100, 100, 0, 5000))
	w.add(time.Second, 1500*time.Millisecond, statsWith(50, 50, 0, 7000))
	var s Summary
	w.summary(&s)
	if !s.NoSteadyState || s.Msgs != 150 || s.SteadySec != 1.5 || s.MsgsPerSec != 100 {
		t.Errorf("summary %+v", s)
	}
}

func TestSummaryFormats(t *testing.T) {
	s := &Summary{Kind: "produce", Mode: "sync", Topic: "T", Size: 1024, Batch: 1, Concurrency: 256,
		ElapsedSec: 30, WarmupSec: 3, SteadySec: 27, Msgs: 2700000, MsgsPerSec: 100000, MiBPerSec: 97.66,
		Latency: "send", P50Ms: 1.5, P99Ms: 4.25, P999Ms: 9, MaxMs: 12, TotalMsgs: 3000000, TopErrors: []string{"2× boom"}}
	h := FormatSummary(s)
	for _, want := range []string{"SUMMARY produce sync topic=T", "100000 msg/s", "97.66 MiB/s", "p50=1.50", "p99=4.25", "p999=9.00", "total 3000000 msgs"} {
		if !strings.Contains(h, want) {
			t.Errorf("summary %q lacks %q", h, want)
		}
	}
	j := FormatSummaryJSON(s)
	if strings.Contains(j, "\n") {
		t.Error("JSON summary spans lines")
	}
	var back map[string]any
	if err := json.Unmarshal([]byte(j), &back); err != nil {
		t.Fatal(err)
	}
	if back["msgs_per_sec"] != 100000.0 || back["p99_ms"] != 4.25 || back["kind"] != "produce" {
		t.Errorf("json %s", j)
	}

	var out, errw bytes.Buffer
	printSummary(s, true, &out, &errw)
	if strings.Count(out.String(), "\n") != 1 || !strings.HasPrefix(out.String(), "{") {
		t.Errorf("stdout with --json should be one JSON line, got %q", out.String())
	}
	if !strings.Contains(errw.String(), "SUMMARY") || !strings.Contains(errw.String(), "error: 2× boom") {
		t.Errorf("stderr %q", errw.String())
	}
	out.Reset()
	printSummary(s, false, &out, &errw)
	if !strings.HasPrefix(out.String(), "SUMMARY") {
		t.Errorf("human summary on stdout: %q", out.String())
	}
}

func TestReporterRun(t *testing.T) {
	rec := NewRecorder()
	var out bytes.Buffer
	r := newReporter(rec, &out, "lat", 20*time.Millisecond, 0, false)
	finished := make(chan struct{})
	done := make(chan struct{})
	go func() { r.run(finished); close(done) }()
	for i := 0; i < 50; i++ {
		rec.RecordOp(time.Millisecond, 1, 100)
		time.Sleep(time.Millisecond)
	}
	rec.RecordError()
	close(finished)
	<-done
	var s Summary
	r.win.summary(&s)
	if s.TotalMsgs != 50 || s.Msgs != 50 || s.Errors != 1 || s.P50Ms != 1 {
		t.Errorf("summary %+v", s)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], "msg/s") {
		t.Errorf("output %q", out.String())
	}
}

func TestErrorLog(t *testing.T) {
	var w bytes.Buffer
	e := newErrorLog(&w, 2)
	e.Add(errors.New("a"))
	e.Add(errors.New("b"))
	e.Add(errors.New("b"))
	e.Add(nil)
	e.AddText(strings.Repeat("x", 1000))
	if e.Total() != 4 {
		t.Errorf("total %d", e.Total())
	}
	if n := strings.Count(w.String(), "error #"); n != 2 {
		t.Errorf("printed %d errors, want 2: %q", n, w.String())
	}
	top := e.Top(2)
	if len(top) != 2 || top[0] != "2× b" || top[1] != "1× a" {
		t.Errorf("top %q", top)
	}
	e.distinct = 3
	e.Add(errors.New("c"))
	e.Add(errors.New("d"))
	if !strings.Contains(strings.Join(e.Top(10), "|"), "(other errors)") {
		t.Errorf("overflow not grouped: %q", e.Top(10))
	}
}

func TestResolveNameServers(t *testing.T) {
	got, err := ResolveNameServers("127.0.0.1:9876; localhost:9877,[::1]:9878")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != "127.0.0.1:9876" || got[2] != "[::1]:9878" {
		t.Errorf("got %v", got)
	}
	if strings.Contains(got[1], "localhost") {
		t.Errorf("host name not resolved: %v", got[1])
	}
	if _, err := ResolveNameServers(""); err == nil {
		t.Error("empty list accepted")
	}
	if _, err := ResolveNameServers("127.0.0.1"); err == nil {
		t.Error("address without port accepted")
	}
}

func TestSetupClientLog(t *testing.T) {
	for _, l := range []string{"error", "WARN", "warning", "off", "info"} {
		if err := SetupClientLog(l, ""); err != nil {
			t.Errorf("%s: %v", l, err)
		}
	}
	if err := SetupClientLog("loud", ""); err == nil {
		t.Error("unknown level accepted")
	}
	_ = SetupClientLog("error", "")
}
