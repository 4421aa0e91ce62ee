package broker

import (
	"testing"
	"time"
)

// TestStatusRates: rates are differences of samples over their time, per topic and per group;
// the history has one point per interval; a key's minute and since-start figures for
// VIEW_BROKER_STATS_DATA.
func TestStatusRates(t *testing.T) {
	var c rateCounters
	r := newStatusRates(func() rateCounters { return c })
	t0 := time.Unix(1000, 0)
	for i := range 6 { // 10 s of samples, 2 s apart: 100 puts and 50 gets a second
		c = rateCounters{Put: int64(i) * 200, Get: int64(i) * 100,
			Topics: map[string][2]int64{"T": {int64(i) * 200, int64(i) * 100}},
			Groups: map[string]int64{"T@G": int64(i) * 60}}
		r.sample(t0.Add(time.Duration(i) * rateInterval))
	}
	s := r.status()
	if s.InPerSec != 100 || s.OutPerSec != 50 || len(s.History) != 5 || s.History[4].In != 100 {
		t.Fatalf("status %+v", s)
	}
	if tr := r.topicRates()["T"]; tr != [2]float64{100, 50} {
		t.Fatalf("topic rates %v", tr)
	}
	if gr := r.groupRates()["T@G"]; gr != 30 {
		t.Fatalf("group rate %v", gr)
	}
	ks, ok := r.keyed("T", false, false)
	if !ok || ks.MinuteSum != 1000 || ks.SinceStart != 1000 || ks.MinuteTps != 100 {
		t.Fatalf("keyed %+v %v", ks, ok)
	}
	if _, ok := r.keyed("nope", false, false); ok {
		t.Fatal("an unknown key has stats")
	}
	d := statsData(ks, t0.Add(10*time.Second))
	if d.StatsMinute.Sum != 1000 || d.StatsDay.Sum != 1000 || d.StatsHour.Tps != 100 {
		t.Fatalf("stats data %+v", d)
	}
	// A counter that goes back (offsets reset) counts as no traffic, and old samples lose
	// their per-key maps but keep the totals for the history.
	for i := range rateHistory + 5 {
		r.sample(t0.Add(time.Duration(6+i) * rateInterval))
	}
	if s := r.status(); len(s.History) != rateHistory-1 || s.InPerSec != 0 {
		t.Fatalf("after a full ring: %d points, in %v", len(s.History), s.InPerSec)
	}
	if old, _ := r.at(rateKeyed); old.c.Topics != nil {
		t.Fatal("a sample past rateKeyed kept its topics")
	}
}

// TestAddGroupFigures: the time lag is the age of the oldest unconsumed message over the
// queues that are behind; a group that is not behind has none.
func TestAddGroupFigures(t *testing.T) {
	now := time.UnixMilli(100_000)
	gs := []StatusGroup{
		{Group: "G", Topic: "T", Lag: 5, Queues: []StatusGroupQueue{{QueueID: 0, ConsumerOffset: 3, Lag: 2}, {QueueID: 1, ConsumerOffset: 7, Lag: 3}, {QueueID: 2, Lag: 0}}},
		{Group: "H", Topic: "T", Queues: []StatusGroupQueue{{QueueID: 0, ConsumerOffset: 9}}},
	}
	stored := map[[2]int64]int64{{0, 3}: 95_000, {1, 7}: 90_000}
	reads := 0
	addGroupFigures(gs, map[string]int{"G": 2}, map[string]float64{"T@G": 1.5}, func(_ string, q int32, off int64) int64 {
		reads++
		return stored[[2]int64{int64(q), off}]
	}, now)
	if g := gs[0]; g.LagTimeMs != 10_000 || g.OldestUnconsumed != 90_000 || g.Online != 2 || g.ConsumePerSec != 1.5 {
		t.Fatalf("G: %+v", g)
	}
	if g := gs[1]; g.LagTimeMs != 0 || g.Online != 0 || reads != 2 {
		t.Fatalf("H: %+v, %d reads", g, reads)
	}
}
