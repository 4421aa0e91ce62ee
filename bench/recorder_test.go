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
	after := time.Now().UTC()
	r.RecordOp(3*time.Millisecond, 1, 100)
	r.RecordOp(4*time.Millisecond, 2, 200)
	lines := regexp.MustCompile(`(?m)^slow: ([0-9.]+) ms, started (\d\d:\d\d:\d\d\.\d{6})$`).FindAllStringSubmatch(out.String(), -1)
	if len(lines) != 2 || lines[0][1] != "5.250" || lines[1][1] != "4.000" {
		t.Fatalf("slow log %q", out.String())
	}
	// The start is 5.25 ms before the moment RecordOp ran, which lies between before and after.
	lo, hi := before.Add(-5250*time.Microsecond).Truncate(time.Microsecond), after.Add(-5250*time.Microsecond)
	if got := lines[0][2]; got < lo.Format("15:04:05.000000") && lo.Day() == hi.Day() || got > hi.Format("15:04:05.000000") && lo.Day() == hi.Day() {
		t.Fatalf("started %s, want between %s and %s", got, lo.Format("15:04:05.000000"), hi.Format("15:04:05.000000"))
	}
	var st Stats
	r.Drain(&st)
	if st.Ops != 3 || st.Msgs != 4 {
		t.Fatalf("recorded %d ops %d msgs, want 3/4", st.Ops, st.Msgs)
	}
}
