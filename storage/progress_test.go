package storage

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// A long walk logs progress by size and by time; a short one stays silent.
func TestScanProgressLogsBySizeAndTime(t *testing.T) {
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})
	clock := time.Unix(1000, 0)
	p := newScanProgress(log, "recovery: checking", 0, 4*progressBytes)
	p.now = func() time.Time { return clock }
	p.start, p.lastAt = clock, clock
	p.at(1 << 20)
	if buf.Len() != 0 {
		t.Fatalf("logged after 1 MiB and no time:\n%s", buf.String())
	}
	p.at(progressBytes + 100) // size step
	if n := strings.Count(buf.String(), "in progress"); n != 1 || !strings.Contains(buf.String(), "percent=25") {
		t.Fatalf("after one size step:\n%s", buf.String())
	}
	clock = clock.Add(progressEvery)
	for i := range 1024 { // time step: the clock is read every 1024 records
		p.at(progressBytes + 200 + int64(i))
	}
	if n := strings.Count(buf.String(), "in progress"); n != 2 {
		t.Fatalf("after a time step, %d lines:\n%s", n, buf.String())
	}
	p.done(2 * progressBytes)
	if !strings.Contains(buf.String(), "recovery: checking: done") {
		t.Fatalf("no done line:\n%s", buf.String())
	}

	buf.Reset()
	q := newScanProgress(log, "short", 0, 100)
	q.at(10)
	q.done(100)
	if buf.Len() != 0 {
		t.Fatalf("a short walk logged:\n%s", buf.String())
	}
}
