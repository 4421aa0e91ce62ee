package dledger

import (
	"fmt"
	"testing"
	"time"
)

// TestFollowers: the leader reports both followers with the match index their answers gave,
// caught up after the applies; a follower reports none; a stopped follower's lag grows.
func TestFollowers(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	lead := c.leader(20 * time.Second)
	c.sameLogs(20*time.Second, applyN(t, lead, "f", 20))
	last := lead.raft.LastIndex()
	eventually(t, 10*time.Second, func() error {
		fs := lead.Followers()
		if len(fs) != 2 {
			return fmt.Errorf("followers %+v", fs)
		}
		for _, f := range fs {
			if f.MatchIndex < last || f.Lag != 0 || f.AnsweredAgoMs < 0 || f.ID == lead.ID() {
				return fmt.Errorf("follower %+v, leader's last index %d", f, last)
			}
		}
		return nil
	})
	if fs := c.follower().Followers(); fs != nil {
		t.Fatalf("a follower reports followers: %+v", fs)
	}
	stopped := c.follower().ID()
	c.stop(stopped)
	applyN(t, lead, "g", 5)
	for _, f := range lead.Followers() {
		if f.ID == stopped && f.Lag < 5 {
			t.Fatalf("the stopped follower %+v lags less than the 5 entries applied since", f)
		}
	}
}
