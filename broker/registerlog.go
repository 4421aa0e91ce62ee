package broker

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// registerLog collapses repeated registration failures against one name server: a WARN at the
// first failure, a WARN summary with the count at most every registerLogSummaryEvery while it
// keeps failing (topic changes register too, so failures can come more often than
// registerNameServerPeriod), and an INFO at the first success after failures. Its zero value
// is ready to use.
type registerLog struct {
	mu     sync.Mutex
	now    func() time.Time // nil: time.Now
	byAddr map[string]*registerFailures
}

// registerFailures is one name server's run of failed registrations.
type registerFailures struct {
	first, summarized time.Time
	total, since      int
}

const registerLogSummaryEvery = 30 * time.Second

func (r *registerLog) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

// failed records a failed registration with addr and logs msg (with args) if it is the first of
// a run, or a summary if one is due.
func (r *registerLog) failed(log hclog.Logger, addr, msg string, args ...any) {
	r.mu.Lock()
	now := r.clock()
	if r.byAddr == nil {
		r.byAddr = map[string]*registerFailures{}
	}
	f := r.byAddr[addr]
	first := f == nil
	if first {
		f = &registerFailures{first: now, summarized: now}
		r.byAddr[addr] = f
	}
	f.total++
	if !first {
		f.since++ // failures since the last line about addr
	}
	due := !first && now.Sub(f.summarized) >= registerLogSummaryEvery
	total, since, dur := f.total, f.since, now.Sub(f.first).Round(time.Second)
	if due {
		f.summarized, f.since = now, 0
	}
	r.mu.Unlock()
	switch {
	case first:
		log.Warn(msg+" (repeats are counted and summarized every "+registerLogSummaryEvery.String()+")", append([]any{"namesrv", addr}, args...)...)
	case due:
		log.Warn("registration with name server still failing", append([]any{"namesrv", addr, "failures", since, "total", total, "for", dur, "last", msg}, args...)...)
	}
}

// ok ends addr's run of failures, if any, with an INFO.
func (r *registerLog) ok(log hclog.Logger, addr string) {
	r.mu.Lock()
	f := r.byAddr[addr]
	delete(r.byAddr, addr)
	now := r.clock()
	r.mu.Unlock()
	if f != nil {
		log.Info("registered with name server again", "namesrv", addr, "failures", f.total, "failing_for", now.Sub(f.first).Round(time.Millisecond))
	}
}
