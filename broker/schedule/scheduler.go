package schedule

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/meta"
	"rocketraft/fsm"
	"rocketraft/message"
	"rocketraft/storage"
)

const (
	// PollInterval is how often the scheduler looks for due messages (RocketMQ: 100 ms).
	PollInterval = 100 * time.Millisecond
	// errorBackoff is how long a level waits after a failed delivery step.
	errorBackoff = time.Second
	// stepRecords and stepBytes bound one delivery step (one append, one Raft entry); the bytes
	// are further bounded by Config.MaxStepBytes (a quarter of a commitlog file: a step's records
	// are appended contiguously into one file).
	stepRecords = 32
	stepBytes   = 256 << 10
	// stepsPerPoll bounds the steps one level takes per poll, so a backlog in one level does not
	// starve the others.
	stepsPerPoll = 16
	// stepTimeout bounds one step's commit (as a send's).
	stepTimeout = 8 * time.Second
)

// Config is what a Scheduler needs from the broker.
type Config struct {
	// Levels is messageDelayLevel parsed: Levels[i] is level i+1's delay.
	Levels []time.Duration
	// Offsets is the progress per level (read here; Commit moves it).
	Offsets *meta.DelayOffsets
	// Acquire returns the store to read SCHEDULE_TOPIC_XXXX from and its release function.
	Acquire func() (*storage.Store, func(), error)
	// Commit appends a step's records and moves its level's progress from step.From to step.To,
	// as one unit where the mode allows; ctx ends at the step's timeout or at shutdown.
	Commit func(ctx context.Context, step *fsm.ScheduleDeliver) error
	// MayDeliver reports whether this node delivers now (a master; the ready leader).
	MayDeliver func() bool
	// AfterPoll runs after every poll while delivering (classic mode saves the table); may be nil.
	AfterPoll func()
	// StoreHost is the store host stamped on delivered records (known once the broker listens);
	// required.
	StoreHost func() netip.AddrPort
	// MaxStepBytes caps a step's bytes below stepBytes (0: no further cap).
	MaxStepBytes int
	// Now is the clock (time.Now when nil).
	Now    func() time.Time
	Logger hclog.Logger
}

// Scheduler delivers due messages of every level while MayDeliver holds.
type Scheduler struct {
	cfg Config
}

// New returns a scheduler over cfg; Run starts it.
func New(cfg Config) *Scheduler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Scheduler{cfg: cfg}
}

// Levels is the number of delay levels.
func (s *Scheduler) Levels() int { return len(s.cfg.Levels) }

// TimerLevel is the level a timer message with remaining time left waits in (PickLevel).
func (s *Scheduler) TimerLevel(left time.Duration) int { return PickLevel(s.cfg.Levels, left) }

// Run polls every level every PollInterval while this node may deliver, until stop closes.
func (s *Scheduler) Run(stop <-chan struct{}) {
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	backoff := make([]time.Time, len(s.cfg.Levels)+1)
	running := false
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		running = s.poll(stop, backoff, running)
	}
}

// poll is one tick of Run: it logs a change of the deliver decision and, while delivering, takes
// each level's steps (a level that failed waits until its backoff ends). It returns the decision.
func (s *Scheduler) poll(stop <-chan struct{}, backoff []time.Time, running bool) bool {
	if ok := s.cfg.MayDeliver(); ok != running {
		running = ok
		s.cfg.Logger.Info("delay scheduler "+map[bool]string{true: "started", false: "stopped"}[ok], "levels", len(s.cfg.Levels))
	}
	if !running {
		return false
	}
	now := s.cfg.Now()
	for level := 1; level <= len(s.cfg.Levels); level++ {
		if now.Before(backoff[level]) {
			continue
		}
		if err := s.deliverLevel(stop, int32(level)); err != nil {
			s.cfg.Logger.Warn("delay delivery step failed; retrying", "level", level, "in", errorBackoff, "error", err)
			backoff[level] = s.cfg.Now().Add(errorBackoff)
		}
	}
	if s.cfg.AfterPoll != nil {
		s.cfg.AfterPoll()
	}
	return true
}

// deliverLevel takes up to stepsPerPoll delivery steps of one level.
func (s *Scheduler) deliverLevel(stop <-chan struct{}, level int32) error {
	for range stepsPerPoll {
		select {
		case <-stop:
			return nil
		default:
		}
		if !s.cfg.MayDeliver() {
			return nil
		}
		step, err := s.NextStep(level, s.cfg.Now())
		if err != nil || step == nil {
			return err
		}
		if err := s.Deliver(stop, step); err != nil {
			return err
		}
	}
	return nil
}

// maxStepBytes bounds a step's records: well under one commitlog file.
func (s *Scheduler) maxStepBytes() int {
	if s.cfg.MaxStepBytes > 0 {
		return min(stepBytes, s.cfg.MaxStepBytes)
	}
	return stepBytes
}

// NextStep reads level's queue from its progress and returns the next delivery step at now, or
// nil when nothing is due. Units the store no longer has (retention) are stepped over.
func (s *Scheduler) NextStep(level int32, now time.Time) (*fsm.ScheduleDeliver, error) {
	from := s.cfg.Offsets.Get(level)
	st, release, err := s.cfg.Acquire()
	if err != nil {
		return nil, err
	}
	r := st.GetMessages(meta.ScheduleTopic, level-1, from, stepRecords, s.maxStepBytes(), nil)
	release()
	step := &fsm.ScheduleDeliver{Level: level, From: from, To: from}
	switch r.Status {
	case storage.Found:
	case storage.OffsetTooSmall, storage.OffsetFoundNull, storage.MessageWasRemoving, storage.NoMatchedMessage:
		if r.NextBeginOffset > from {
			s.cfg.Logger.Warn("delay queue units no longer in the store; skipped", "level", level, "from", from, "to", r.NextBeginOffset, "status", r.Status)
			step.To = r.NextBeginOffset
			return step, nil
		}
		return nil, nil
	default: // nothing stored yet, or nothing new
		return nil, nil
	}
	delay := s.cfg.Levels[level-1]
	size := 0
	for _, raw := range r.Records {
		v, err := message.ParseView(raw)
		if err != nil {
			return nil, fmt.Errorf("level %d offset %d: %w", level, step.To, err)
		}
		if time.UnixMilli(v.StoreTimestamp()).Add(delay).After(now) && !timerDueBy(v, now) {
			return nonEmpty(step), nil
		}
		rec, err := DeliveryRecord(raw, s.cfg.Levels, s.cfg.StoreHost(), now)
		if err != nil {
			s.cfg.Logger.Error("delayed message cannot be delivered; dropped", "level", level, "queueOffset", v.QueueOffset(), "error", err)
		}
		if rec != nil && len(step.Records) > 0 && size+len(rec) > s.maxStepBytes() {
			return nonEmpty(step), nil
		}
		if rec != nil {
			step.Records = append(step.Records, rec)
			size += len(rec)
		}
		step.To = v.QueueOffset() + 1
	}
	step.To = max(step.To, r.NextBeginOffset)
	return nonEmpty(step), nil
}

func nonEmpty(s *fsm.ScheduleDeliver) *fsm.ScheduleDeliver {
	if s.To <= s.From {
		return nil
	}
	return s
}

// Deliver commits one step, bounded by stepTimeout; a shutdown (stop closing) does not wait for
// a step that cannot commit (no quorum).
func (s *Scheduler) Deliver(stop <-chan struct{}, step *fsm.ScheduleDeliver) error {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return s.cfg.Commit(ctx, step)
}
