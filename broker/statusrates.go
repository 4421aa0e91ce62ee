package broker

// Message rates for the status page and VIEW_BROKER_STATS_DATA (statsdata.go): a sampler reads
// the broker's running totals (the counters GET_BROKER_RUNTIME_INFO reports as
// msgPutTotalTodayNow / msgGetTotalTodayNow, per topic as well) and the consumer groups'
// committed offsets every rateInterval into a small ring, so a rate is a difference of two
// samples and the page can draw the last rateHistory samples as a sparkline. Nothing on the
// send or pull path changes: the counters are the ones stats.go keeps anyway.

import (
	"sync"
	"time"
)

const (
	rateInterval = 2 * time.Second
	rateHistory  = 60 // samples kept: two minutes at rateInterval
	// rateKeyed is how many of the newest samples keep their per-topic and per-group figures:
	// a minute and one sample, enough for the one-minute figures of VIEW_BROKER_STATS_DATA.
	rateKeyed = 31
	// rateMaxKeys bounds the per-topic and per-group figures of one sample.
	rateMaxKeys = 5000
	// rateNowWindow is the window of the "now" rates (page, per topic); group consume rates use
	// rateGroupWindow because clients commit offsets only every few seconds.
	rateNowWindow   = 10 * time.Second
	rateGroupWindow = 30 * time.Second
)

// rateCounters is one reading of the totals the sampler follows. Topics maps a topic to its
// put and get counts; Groups maps an offset key (topic@group) to the sum of its committed
// offsets over its queues.
type rateCounters struct {
	Put, Get int64
	Topics   map[string][2]int64
	Groups   map[string]int64
}

type rateSample struct {
	at time.Time
	c  rateCounters
}

// statusRates is the ring of samples; read counters once per tick.
type statusRates struct {
	read func() rateCounters

	mu    sync.Mutex
	ring  [rateHistory]rateSample
	n     int        // samples taken
	first rateSample // the first sample: the base of the since-start sums
}

func newStatusRates(read func() rateCounters) *statusRates { return &statusRates{read: read} }

// run samples until stop is closed.
func (r *statusRates) run(stop <-chan struct{}) {
	r.sample(time.Now())
	t := time.NewTicker(rateInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			r.sample(now)
		}
	}
}

// sample takes one reading; the sample falling out of the keyed part drops its maps.
func (r *statusRates) sample(now time.Time) {
	c := r.read()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		r.first = rateSample{at: now, c: c}
	}
	r.ring[r.n%rateHistory] = rateSample{at: now, c: c}
	r.n++
	if r.n > rateKeyed {
		old := &r.ring[(r.n-1-rateKeyed)%rateHistory]
		old.c.Topics, old.c.Groups = nil, nil
	}
}

// at returns the i-th newest sample (0 = newest); ok is false past the kept ones.
func (r *statusRates) at(i int) (rateSample, bool) {
	if i < 0 || i >= min(r.n, rateHistory) {
		return rateSample{}, false
	}
	return r.ring[(r.n-1-i)%rateHistory], true
}

// back returns the newest sample and the oldest one still within window of it that has keyed
// figures when keyed is set; ok is false with fewer than two samples.
func (r *statusRates) back(window time.Duration, keyed bool) (newest, older rateSample, ok bool) {
	newest, ok = r.at(0)
	if !ok {
		return newest, older, false
	}
	limit := min(r.n, rateHistory)
	if keyed {
		limit = min(limit, rateKeyed)
	}
	for i := 1; i < limit; i++ {
		s, _ := r.at(i)
		if newest.at.Sub(s.at) > window+rateInterval/2 {
			break
		}
		older, ok = s, true
	}
	return newest, older, ok && older.at.Before(newest.at)
}

// perSecond is the change from a to b per second of b.at-a.at, never negative (a counter that
// went back, e.g. a group's offsets reset, counts as no traffic).
func perSecond(a, b int64, dt time.Duration) float64 {
	if dt <= 0 || b <= a {
		return 0
	}
	return float64(b-a) / dt.Seconds()
}

// RatePoint is one interval of the history: messages in (stored) and out (delivered to
// consumers) per second over the interval ending at T (ms since the epoch).
type RatePoint struct {
	T   int64   `json:"t"`
	In  float64 `json:"in"`
	Out float64 `json:"out"`
}

// StatusRates is the rates part of /status.
type StatusRates struct {
	IntervalMs int64       `json:"intervalMs"`
	WindowMs   int64       `json:"windowMs"` // the window of InPerSec and OutPerSec
	InPerSec   float64     `json:"inPerSec"`
	OutPerSec  float64     `json:"outPerSec"`
	History    []RatePoint `json:"history"` // oldest first
}

// status returns the broker-wide rates and their history.
func (r *statusRates) status() StatusRates {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := StatusRates{IntervalMs: rateInterval.Milliseconds(), WindowMs: rateNowWindow.Milliseconds(), History: []RatePoint{}}
	if newest, older, ok := r.back(rateNowWindow, false); ok {
		dt := newest.at.Sub(older.at)
		out.InPerSec, out.OutPerSec = perSecond(older.c.Put, newest.c.Put, dt), perSecond(older.c.Get, newest.c.Get, dt)
	}
	for i := min(r.n, rateHistory) - 2; i >= 0; i-- {
		a, _ := r.at(i + 1)
		b, _ := r.at(i)
		dt := b.at.Sub(a.at)
		out.History = append(out.History, RatePoint{T: b.at.UnixMilli(), In: perSecond(a.c.Put, b.c.Put, dt), Out: perSecond(a.c.Get, b.c.Get, dt)})
	}
	return out
}

// topicRates returns each topic's put and get rates over rateNowWindow.
func (r *statusRates) topicRates() map[string][2]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][2]float64{}
	newest, older, ok := r.back(rateNowWindow, true)
	if !ok {
		return out
	}
	dt := newest.at.Sub(older.at)
	for t, c := range newest.c.Topics {
		o := older.c.Topics[t]
		out[t] = [2]float64{perSecond(o[0], c[0], dt), perSecond(o[1], c[1], dt)}
	}
	return out
}

// groupRates returns each offset key's (topic@group) consume rate over rateGroupWindow: how
// fast its committed offsets advanced.
func (r *statusRates) groupRates() map[string]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]float64{}
	newest, older, ok := r.back(rateGroupWindow, true)
	if !ok {
		return out
	}
	dt := newest.at.Sub(older.at)
	for k, c := range newest.c.Groups {
		if o, had := older.c.Groups[k]; had {
			out[k] = perSecond(o, c, dt)
		}
	}
	return out
}

// keyStats is one key's figures for VIEW_BROKER_STATS_DATA: the count and rate over the last
// minute (or as much of it as was sampled) and the count since the sampler started.
type keyStats struct {
	MinuteSum   int64
	MinuteTps   float64
	SinceStart  int64
	SampledFrom time.Time
}

// keyed returns the figures of one key; get picks a topic's get count instead of its put count,
// group reads the committed-offset sums (key topic@group). ok is false when the key was never
// sampled.
func (r *statusRates) keyed(key string, group, get bool) (keyStats, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	val := func(c rateCounters) (int64, bool) {
		if group {
			v, ok := c.Groups[key]
			return v, ok
		}
		v, ok := c.Topics[key]
		if get {
			return v[1], ok
		}
		return v[0], ok
	}
	newest, ok := r.at(0)
	if !ok {
		return keyStats{}, false
	}
	cur, ok := val(newest.c)
	if !ok {
		return keyStats{}, false
	}
	// A key a sample lacks counts 0 there: a topic's counters start at 0 when it first sees
	// traffic, and a group that first committed later is counted from offset 0.
	ks := keyStats{SampledFrom: r.first.at}
	if _, older, ok := r.back(time.Minute, true); ok {
		o, _ := val(older.c)
		ks.MinuteSum = max(0, cur-o)
		ks.MinuteTps = perSecond(o, cur, newest.at.Sub(older.at))
	}
	base, _ := val(r.first.c)
	ks.SinceStart = max(0, cur-base)
	return ks, true
}
