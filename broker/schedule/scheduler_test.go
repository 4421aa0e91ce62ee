package schedule

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"rocketraft/broker/internal/storetest"
	"rocketraft/broker/meta"
	"rocketraft/fsm"
	"rocketraft/message"
	"rocketraft/storage"
)

// rig is a scheduler over a store in a temporary directory; its commit appends to that store and
// moves the progress, as classic mode does.
type rig struct {
	st      *storage.Store
	offsets *meta.DelayOffsets
	s       *Scheduler
	levels  []time.Duration

	mu       sync.Mutex
	now      time.Time
	may      bool
	commits  int
	failWith error
	polls    int
}

func newRig(t *testing.T, levels ...time.Duration) *rig {
	t.Helper()
	r := &rig{st: storetest.Open(t), levels: levels, may: true, now: time.UnixMilli(1_800_000_000_000)}
	var err error
	if r.offsets, err = meta.OpenDelayOffsets(filepath.Join(t.TempDir(), "delayOffset.json"), nil); err != nil {
		t.Fatal(err)
	}
	r.s = New(Config{
		Levels:  levels,
		Offsets: r.offsets,
		Acquire: storetest.Acquire(r.st),
		Commit: func(ctx context.Context, s *fsm.ScheduleDeliver) error {
			r.mu.Lock()
			r.commits++
			fail := r.failWith
			r.mu.Unlock()
			if fail != nil {
				return fail
			}
			if len(s.Records) > 0 {
				if _, err := r.st.Append(ctx, s.Records); err != nil {
					return err
				}
			}
			r.offsets.Set(s.Level, s.To)
			return nil
		},
		MayDeliver: func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.may },
		AfterPoll:  func() { r.mu.Lock(); r.polls++; r.mu.Unlock() },
		StoreHost:  func() netip.AddrPort { return storetest.Host },
		Now:        func() time.Time { r.mu.Lock(); defer r.mu.Unlock(); return r.now },
	})
	return r
}

// delayed stores a message as the send path leaves a delayed one: in SCHEDULE_TOPIC_XXXX queue
// level-1, real topic Real queue 1, stored at ts.
func (r *rig) delayed(t *testing.T, level int, ts time.Time, body string, props map[string]string) {
	t.Helper()
	p := map[string]string{message.PropertyRealTopic: "Real", message.PropertyRealQueueID: "1"}
	for k, v := range props {
		p[k] = v
	}
	storetest.Put(t, r.st, &message.Message{Topic: meta.ScheduleTopic, QueueID: int32(level - 1), BornTimestamp: ts.UnixMilli() - 5,
		StoreTimestamp: ts.UnixMilli(), Body: []byte(body), Properties: message.FormatProperties(p)})
}

func (r *rig) step(t *testing.T, level int32, at time.Time) *fsm.ScheduleDeliver {
	t.Helper()
	s, err := r.s.NextStep(level, at)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (r *rig) deliver(t *testing.T, s *fsm.ScheduleDeliver) {
	t.Helper()
	if err := r.s.Deliver(make(chan struct{}), s); err != nil {
		t.Fatal(err)
	}
}

func TestPickLevel(t *testing.T) {
	levels := []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, time.Minute}
	for _, c := range []struct {
		left time.Duration
		want int
	}{{0, 1}, {500 * time.Millisecond, 1}, {time.Second, 1}, {4 * time.Second, 1}, {5 * time.Second, 2}, {59 * time.Second, 3}, {time.Hour, 4}} {
		if got := PickLevel(levels, c.left); got != c.want {
			t.Errorf("PickLevel(%v) = %d, want %d", c.left, got, c.want)
		}
	}
	// Levels need not be sorted.
	if got := PickLevel([]time.Duration{time.Minute, time.Second, 10 * time.Second}, 30*time.Second); got != 3 {
		t.Errorf("unsorted levels: %d, want 3", got)
	}
}

// TestTimerDue: the absolute and both relative forms, the first present wins in the order
// TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS, and bad or too distant values are errors.
func TestTimerDue(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	for _, c := range []struct {
		props map[string]string
		want  time.Time
		timer bool
		bad   bool
	}{
		{map[string]string{}, time.Time{}, false, false},
		{map[string]string{"TIMER_DELIVER_MS": "1800000001500"}, time.UnixMilli(1_800_000_001_500), true, false},
		{map[string]string{"TIMER_DELAY_SEC": "3"}, now.Add(3 * time.Second), true, false},
		{map[string]string{"TIMER_DELAY_MS": "250"}, now.Add(250 * time.Millisecond), true, false},
		{map[string]string{"TIMER_DELAY_MS": "250", "TIMER_DELAY_SEC": "1"}, now.Add(time.Second), true, false},
		{map[string]string{"TIMER_DELAY_SEC": "-1"}, time.Time{}, false, true},
		{map[string]string{"TIMER_DELAY_SEC": "x"}, time.Time{}, false, true},
		{map[string]string{"TIMER_DELAY_SEC": strconv.Itoa(4 * 24 * 3600)}, time.Time{}, false, true},
		{map[string]string{"TIMER_DELAY_MS": strconv.Itoa(4 * 24 * 3600 * 1000)}, time.Time{}, false, true},
	} {
		due, timer, err := TimerDue(c.props, now)
		if (err != nil) != c.bad || timer != c.timer || !due.Equal(c.want) {
			t.Errorf("%v: %v %v %v, want %v %v bad=%v", c.props, due, timer, err, c.want, c.timer, c.bad)
		}
	}
}

// TestSchedulerSteps: a level's messages are handed out only once due, re-encoded for their real
// topic, and the progress moves; a timer message not yet due goes to another level.
func TestSchedulerSteps(t *testing.T) {
	r := newRig(t, time.Second, 2*time.Second, 4*time.Second)
	t0 := r.now
	r.delayed(t, 2, t0, "a", map[string]string{"DELAY": "2", "UNIQ_KEY": "UA", "KEYS": "ka", "TAGS": "ta"})
	r.delayed(t, 2, t0.Add(500*time.Millisecond), "b", map[string]string{"DELAY": "2", "UNIQ_KEY": "UB"})
	r.delayed(t, 3, t0, "timer", map[string]string{"TIMER_DELIVER_MS": strconv.FormatInt(t0.Add(6500*time.Millisecond).UnixMilli(), 10), "UNIQ_KEY": "UT"})

	if s := r.step(t, 2, t0.Add(1999*time.Millisecond)); s != nil {
		t.Fatalf("before due: %+v", s)
	}
	s := r.step(t, 2, t0.Add(2200*time.Millisecond))
	if s == nil || s.From != 0 || s.To != 1 || len(s.Records) != 1 {
		t.Fatalf("first due: %+v", s)
	}
	r.deliver(t, s)
	if got := r.offsets.Get(2); got != 1 {
		t.Fatalf("progress %d, want 1", got)
	}
	got := storetest.Read(t, r.st, "Real", 1)
	if len(got) != 1 {
		t.Fatalf("real topic holds %d records", len(got))
	}
	m := got[0]
	p := message.ParseProperties(m.Properties)
	if string(m.Body) != "a" || p["DELAY"] != "" || p["UNIQ_KEY"] != "UA" || p["KEYS"] != "ka" || p["TAGS"] != "ta" || p["WAIT"] != "false" ||
		m.StoreTimestamp != t0.Add(2200*time.Millisecond).UnixMilli() || m.StoreHost != storetest.Host {
		t.Fatalf("delivered: body %q props %v store %d host %v", m.Body, p, m.StoreTimestamp, m.StoreHost)
	}
	s = r.step(t, 2, t0.Add(3*time.Second))
	if s == nil || s.From != 1 || s.To != 2 {
		t.Fatalf("second: %+v", s)
	}
	r.deliver(t, s)
	if s := r.step(t, 2, t0.Add(time.Hour)); s != nil {
		t.Fatalf("nothing left, got %+v", s)
	}

	// The timer message (due at +6.5 s) waits in level 3 (4 s), then in level 2 (2 s) for the
	// 2.5 s left, and only then reaches Real, keeping its due time.
	s = r.step(t, 3, t0.Add(4*time.Second))
	if s == nil || len(s.Records) != 1 {
		t.Fatalf("timer step: %+v", s)
	}
	tm, _, _ := message.DecodeRecord(s.Records[0])
	if tm.Topic != meta.ScheduleTopic || tm.QueueID != 1 {
		t.Fatalf("timer message not due yet went to %s/%d, want level 2", tm.Topic, tm.QueueID)
	}
	r.deliver(t, s)
	s = r.step(t, 2, t0.Add(6600*time.Millisecond))
	if s == nil || len(s.Records) != 1 {
		t.Fatalf("timer second hop: %+v", s)
	}
	tm, _, _ = message.DecodeRecord(s.Records[0])
	if tm.Topic != "Real" || message.ParseProperties(tm.Properties)["TIMER_DELIVER_MS"] != strconv.FormatInt(t0.Add(6500*time.Millisecond).UnixMilli(), 10) {
		t.Fatalf("due timer message went to %s with %q", tm.Topic, tm.Properties)
	}
}

// TestTimerDueWithinLevel: a timer message with less time left than its level's delay is
// delivered at its own due time, not the level's: due at +2.5 s with levels 1 s 2 s 4 s, it
// waits 2 s in level 2, then 0.5 s (not 1 s) in level 1.
func TestTimerDueWithinLevel(t *testing.T) {
	r := newRig(t, time.Second, 2*time.Second, 4*time.Second)
	t0 := r.now
	r.delayed(t, 2, t0, "timer", map[string]string{"TIMER_DELIVER_MS": strconv.FormatInt(t0.Add(2500*time.Millisecond).UnixMilli(), 10), "UNIQ_KEY": "UT"})
	s := r.step(t, 2, t0.Add(2*time.Second))
	if s == nil || len(s.Records) != 1 {
		t.Fatalf("first hop: %+v", s)
	}
	r.deliver(t, s)
	if s := r.step(t, 1, t0.Add(2499*time.Millisecond)); s != nil {
		t.Fatalf("before its due time: %+v", s)
	}
	s = r.step(t, 1, t0.Add(2500*time.Millisecond))
	if s == nil || len(s.Records) != 1 {
		t.Fatalf("at its due time: %+v", s)
	}
	m, _, err := message.DecodeRecord(s.Records[0])
	if err != nil || m.Topic != "Real" || string(m.Body) != "timer" {
		t.Fatalf("delivered to %s body %q: %v", m.Topic, m.Body, err)
	}
}

// TestUnusableRecordIsSkipped: a delayed record without a real topic is dropped (logged), and the
// progress moves past it, so it does not block its level.
func TestUnusableRecordIsSkipped(t *testing.T) {
	r := newRig(t, time.Second)
	t0 := r.now
	r.delayed(t, 1, t0, "bad", map[string]string{message.PropertyRealTopic: ""})
	r.delayed(t, 1, t0, "good", nil)
	s := r.step(t, 1, t0.Add(time.Second))
	if s == nil || s.From != 0 || s.To != 2 || len(s.Records) != 1 {
		t.Fatalf("step %+v, want [0,2) with one record", s)
	}
	if _, err := DeliveryRecord([]byte("garbage"), r.levels, storetest.Host, t0); err == nil {
		t.Fatal("a record that does not decode is an error")
	}
}

// TestStepBytesBound: a step stops before the record that would pass MaxStepBytes (but always
// takes one), so one step fits well inside a commitlog file.
func TestStepBytesBound(t *testing.T) {
	r := newRig(t, time.Second)
	r.s.cfg.MaxStepBytes = 600
	t0 := r.now
	body := string(make([]byte, 300))
	for range 3 {
		r.delayed(t, 1, t0, body, nil)
	}
	s := r.step(t, 1, t0.Add(time.Second))
	if s == nil || len(s.Records) != 1 || s.To != 1 {
		t.Fatalf("step %+v, want one record", s)
	}
	if got := r.s.maxStepBytes(); got != 600 {
		t.Fatalf("maxStepBytes %d", got)
	}
	r.s.cfg.MaxStepBytes = 0
	if got := r.s.maxStepBytes(); got != stepBytes {
		t.Fatalf("maxStepBytes %d, want %d", got, stepBytes)
	}
}

// TestPollFollowsMayDeliverAndBacksOff: a poll delivers only while MayDeliver holds, runs
// AfterPoll then, and a level whose commit failed waits errorBackoff before it is tried again.
func TestPollFollowsMayDeliverAndBacksOff(t *testing.T) {
	r := newRig(t, time.Second, 2*time.Second)
	t0 := r.now
	r.delayed(t, 1, t0, "x", nil)
	stop := make(chan struct{})
	backoff := make([]time.Time, 3)
	r.may = false
	r.now = t0.Add(5 * time.Second)
	if r.s.poll(stop, backoff, false) || r.commits != 0 || r.polls != 0 {
		t.Fatalf("delivered while not allowed: commits %d polls %d", r.commits, r.polls)
	}
	r.may = true
	r.failWith = errors.New("no quorum")
	if !r.s.poll(stop, backoff, false) || r.commits != 1 || r.polls != 1 {
		t.Fatalf("commits %d polls %d, want 1 1", r.commits, r.polls)
	}
	if !backoff[1].Equal(r.now.Add(errorBackoff)) {
		t.Fatalf("backoff %v", backoff[1])
	}
	r.failWith = nil
	r.s.poll(stop, backoff, true) // still backing off
	if r.commits != 1 {
		t.Fatalf("commit retried during the backoff")
	}
	r.now = r.now.Add(errorBackoff)
	r.s.poll(stop, backoff, true)
	if r.commits != 2 || r.offsets.Get(1) != 1 || len(storetest.Read(t, r.st, "Real", 1)) != 1 {
		t.Fatalf("commits %d progress %d after the backoff", r.commits, r.offsets.Get(1))
	}
}

// TestRunStopsAndDeliverHonoursStop: Run returns when stop closes, and a commit in flight sees its
// context cancelled by the stop.
func TestRunStopsAndDeliverHonoursStop(t *testing.T) {
	r := newRig(t, time.Second)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { r.s.Run(stop); close(done) }()
	close(stop)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after stop")
	}
	r.s.cfg.Commit = func(ctx context.Context, _ *fsm.ScheduleDeliver) error {
		<-ctx.Done()
		return ctx.Err()
	}
	err := r.s.Deliver(stop, &fsm.ScheduleDeliver{Level: 1, From: 0, To: 1})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Deliver after stop: %v, want context.Canceled", err)
	}
	if r.s.Levels() != 1 || r.s.TimerLevel(time.Hour) != 1 {
		t.Fatalf("Levels %d TimerLevel %d", r.s.Levels(), r.s.TimerLevel(time.Hour))
	}
}
