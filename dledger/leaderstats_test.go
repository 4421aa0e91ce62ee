package dledger

import (
	"fmt"
	"testing"
	"time"
)

// TestLeaderStatsCountFailover: every node counts the first leader; after the leader stops,
// the new leader counts a second change and reports a failover duration that is positive and
// no longer than the time the test waited for it.
func TestLeaderStatsCountFailover(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	lead := c.leader(electionBound)
	for id, n := range c.nodes {
		eventually(t, electionBound, func() error {
			if s := n.LeaderStats(); s.Changes != 1 || s.LastFailover != 0 || !s.LeaderlessSince.IsZero() {
				return fmt.Errorf("%s: stats %+v before any failover, want 1 change and no failover", id, s)
			}
			return nil
		})
	}
	old := lead.ID()
	start := time.Now()
	c.stop(old)
	lead = c.leader(electionBound)
	took := time.Since(start)
	eventually(t, electionBound, func() error {
		s := lead.LeaderStats()
		if s.Changes != 2 {
			return fmt.Errorf("new leader %s: %d changes, want 2", lead.ID(), s.Changes)
		}
		if s.LastFailover <= 0 || s.LastFailover > took+time.Second {
			return fmt.Errorf("new leader %s: last failover %v, want in (0, %v]", lead.ID(), s.LastFailover, took+time.Second)
		}
		if !s.LeaderlessSince.IsZero() {
			return fmt.Errorf("new leader %s: leaderless since %v with a leader", lead.ID(), s.LeaderlessSince)
		}
		return nil
	})
	t.Logf("failover took %v as the test saw it, %v as the new leader measured it", took, lead.LeaderStats().LastFailover)
}
