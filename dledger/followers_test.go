package dledger

import (
	"context"
	"fmt"
	"sync"
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

// TestRestartedFollowerCatchesUpWhileIdle: a follower that was down while many small entries were
// written catches up as soon as it is back, although nothing more is written. Raft's replication
// to it had begun waiting for it (the transport's awaitPeer) holding the log's end as it was
// then; without the transport's refusal to pipeline to a follower that trails
// (AppendEntriesPipeline) the rest went one batch of 64 per CommitTimeout, here 1-2 s each.
func TestRestartedFollowerCatchesUpWhileIdle(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.CommitTimeout = time.Second }, nil)
	lead := c.leader(20 * time.Second)
	applyN(t, lead, "before", 5)
	down := c.follower().ID()
	c.stop(down)
	const n = 2000 // 32 batches: a minute at one batch per CommitTimeout
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				if _, err := lead.Apply(ctx, []byte(fmt.Sprintf("idle-%d", i))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatalf("apply: %v", err)
	}
	want := c.fsms[lead.ID()].(*testFSM).log()
	began := time.Now()
	c.restart(down)
	c.sameLogs(15*time.Second, want)
	t.Logf("%d entries behind, caught up %v after the restart", n, time.Since(began).Round(time.Millisecond))
}
