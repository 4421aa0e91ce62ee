package storage

import (
	"time"

	"github.com/hashicorp/go-hclog"
)

// Recovery progress: walking a big commitlog (gigabytes after a crash, or with the checkpoint
// far behind) can take minutes, and an operator watching a silent broker cannot tell a slow
// recovery from a hung one. scanProgress logs a line every progressBytes or progressEvery,
// whichever comes first, with how far the walk is and its speed.
const (
	progressBytes = 256 << 20
	progressEvery = 5 * time.Second
)

// scanProgress reports a walk over [from, to) of the commitlog.
type scanProgress struct {
	log      hclog.Logger
	what     string
	from, to int64
	start    time.Time
	lastAt   time.Time
	lastPos  int64
	reported bool
	calls    int
	now      func() time.Time // tests
}

func newScanProgress(log hclog.Logger, what string, from, to int64) *scanProgress {
	t := time.Now()
	return &scanProgress{log: log, what: what, from: from, to: to, start: t, lastAt: t, lastPos: from, now: time.Now}
}

// at is called with the position of each record walked; it logs when a step is due.
func (p *scanProgress) at(pos int64) {
	p.calls++
	if pos-p.lastPos < progressBytes && p.calls%1024 != 0 {
		return // cheap path: the clock is read once every 1024 records
	}
	now := p.now()
	if pos-p.lastPos < progressBytes && now.Sub(p.lastAt) < progressEvery {
		return
	}
	p.lastAt, p.lastPos, p.reported = now, pos, true
	done := pos - p.from
	secs := now.Sub(p.start).Seconds()
	args := []any{"at", pos, "scannedMB", done >> 20, "elapsed", now.Sub(p.start).Round(time.Millisecond)}
	if secs > 0 {
		args = append(args, "MBps", float64(done>>20)/secs)
	}
	if p.to > p.from {
		args = append(args, "percent", 100*done/(p.to-p.from))
	}
	p.log.Info(p.what+": in progress", args...)
}

// done logs the end of a walk that reported progress before (a short walk stays silent).
func (p *scanProgress) done(end int64) {
	if p.reported {
		p.log.Info(p.what+": done", "end", end, "scannedMB", (end-p.from)>>20, "took", p.now().Sub(p.start).Round(time.Millisecond))
	}
}
