package bench

import (
	"bytes"
	"regexp"
	"testing"
	"time"
)

// LogSlow writes one line per operation at or over the threshold, with its latency and the
// wall-clock time it started, and nothing for faster ones; the samples are recorded either way.
func TestRecorderLogSlow(t *testing.T) {
	r := NewRecorder()
	var out bytes.Buffer
	r.LogSlow(&out, 4*time.Millisecond)
	before := time.Now().UTC()
	r.RecordOp(5250*time.Microsecond, 1, 100)
	r.RecordOp(3*time.Millisecond, 1, 100)
	r.RecordOp(4*time.Millisecond, 2, 200)
	lines := regexp.MustCompile(`(?m)^slow: ([0-9.]+) ms, started (\d\d:\d\d:\d\d\.\d{6})$`).FindAllStringSubmatch(out.String(), -1)
	if len(lines) != 2 || lines[0][1] != "5.250" || lines[1][1] != "4.000" {
		t.Fatalf("slow log %q", out.String())
	}
	started, err := time.Parse("15:04:05.000000", lines[0][2])
	if err != nil {
		t.Fatal(err)
	}
	// the start is 5.25 ms before the record, i.e. (about) before "before"
	day := time.Date(before.Year(), before.Month(), before.Day(), 0, 0, 0, 0, time.UTC)
	d := before.Sub(day.Add(started.Sub(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC))))
	if d < 0 {
		d += 24 * time.Hour // started before midnight
	}
	if d < 4*time.Millisecond || d > time.Second {
		t.Fatalf("start %s is %v before the record was made", lines[0][2], d)
	}
	var st Stats
	r.Drain(&st)
	if st.Ops != 3 || st.Msgs != 4 {
		t.Fatalf("recorded %d ops %d msgs, want 3/4", st.Ops, st.Msgs)
	}
}
