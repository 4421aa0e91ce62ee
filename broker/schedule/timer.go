package schedule

import (
	"fmt"
	"strconv"
	"time"

	"rocketraft/message"
)

const (
	// TimerMaxDelay is how far ahead a timer message may be due (RocketMQ's timerMaxDelaySec
	// default, 3 days); further is MESSAGE_ILLEGAL.
	TimerMaxDelay = 3 * 24 * time.Hour
	// PropertyTimerDelayMS is the 5.x relative timer in milliseconds.
	PropertyTimerDelayMS = message.PropertyTimerDelayMS
)

// TimerDue reads the 5.x timer properties: TIMER_DELAY_SEC, else TIMER_DELAY_MS (relative to
// now), else TIMER_DELIVER_MS (absolute epoch ms), RocketMQ 5's precedence. timer is false when
// none is set.
func TimerDue(props map[string]string, now time.Time) (due time.Time, timer bool, err error) {
	for _, k := range []string{message.PropertyTimerDelaySec, PropertyTimerDelayMS, message.PropertyTimerDeliverMS} {
		s, ok := props[k]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return time.Time{}, false, fmt.Errorf("bad timer property %s=%q: want a non-negative integer", k, s)
		}
		switch k {
		case message.PropertyTimerDeliverMS:
			return time.UnixMilli(n), true, nil
		case message.PropertyTimerDelaySec:
			if n > int64(TimerMaxDelay/time.Second)+1 {
				return time.Time{}, false, fmt.Errorf("timer property %s=%d is more than %s", k, n, TimerMaxDelay)
			}
			return now.Add(time.Duration(n) * time.Second), true, nil
		default:
			if n > int64(TimerMaxDelay/time.Millisecond)+1 {
				return time.Time{}, false, fmt.Errorf("timer property %s=%d is more than %s", k, n, TimerMaxDelay)
			}
			return now.Add(time.Duration(n) * time.Millisecond), true, nil
		}
	}
	return time.Time{}, false, nil
}

// PickLevel is the level (1-based) a timer message with remaining time left waits in: the
// longest delay not beyond it, else the shortest. Levels need not be sorted.
func PickLevel(levels []time.Duration, left time.Duration) int {
	best, shortest := 0, 0
	for i, d := range levels {
		if d <= left && (best == 0 || d > levels[best-1]) {
			best = i + 1
		}
		if shortest == 0 || d < levels[shortest-1] {
			shortest = i + 1
		}
	}
	if best == 0 {
		return shortest
	}
	return best
}

// timerDueBy reports whether v is a timer message due by now. A timer message with less time
// left than its level's delay (the shortest level when under it) is delivered at its own due
// time rather than the level's, so it is not up to a whole level late. The records behind it
// in the queue wait no longer than they would have by their level's time alone.
func timerDueBy(v message.View, now time.Time) bool {
	s, ok := v.Property(message.PropertyTimerDeliverMS)
	if !ok {
		return false
	}
	ms, err := strconv.ParseInt(string(s), 10, 64)
	return err == nil && !time.UnixMilli(ms).After(now)
}
