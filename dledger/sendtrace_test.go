package dledger

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"rocketraft/internal/sendtrace"
)

// tracedItem is a test item that carries its own send trace, as the broker's proposals do.
type tracedItem struct {
	s  string
	tr *sendtrace.Trace
}

// TestSendTraceMarksEveryMilestone runs sends through a traced three-node group and checks that
// each send's trace holds every milestone the batcher and Raft pass, in order, and that the
// followers traced the AppendEntries they stored.
func TestSendTraceMarksEveryMilestone(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.SendTrace = true }, nil)
	lead := c.leader(electionBound)
	codec := BatchCodec[tracedItem, string]{
		Encode: func(items []tracedItem) []byte {
			s := make([]string, len(items))
			for i, it := range items {
				s[i] = it.s
			}
			return testCodec.Encode(s)
		},
		Split: testCodec.Split,
		Trace: func(it tracedItem) *sendtrace.Trace { return it.tr },
	}
	b := NewBatcher(lead, codec, BatchOptions{})
	defer b.Close()

	const n = 200
	sends := sendtrace.NewCollector(sendtrace.LeaderStages)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			it := tracedItem{s: fmt.Sprintf("m%d", i), tr: &sendtrace.Trace{}}
			it.tr.Mark(sendtrace.Received)
			if _, err := b.Submit(context.Background(), it); err != nil {
				errs <- err
				return
			}
			it.tr.Mark(sendtrace.Responded)
			for s := sendtrace.Received; s <= sendtrace.Responded; s++ {
				if it.tr.At[s] == 0 {
					errs <- fmt.Errorf("send %s: milestone %s not reached", it.s, sendtrace.LeaderStages[s])
					return
				}
			}
			// The milestones of one send on one goroutine's path come in order; the entry's
			// own (written ... applied) lie between handed and answered.
			at := it.tr.At
			if !(at[sendtrace.Received] <= at[sendtrace.Queued] && at[sendtrace.Queued] <= at[sendtrace.Proposed] &&
				at[sendtrace.Proposed] <= at[sendtrace.Handed] && at[sendtrace.Written] <= at[sendtrace.Sending] &&
				at[sendtrace.Sending] <= at[sendtrace.Replicated] && at[sendtrace.Applying] <= at[sendtrace.Applied] &&
				at[sendtrace.Replicated] <= at[sendtrace.Applied] && at[sendtrace.Synced] <= at[sendtrace.Applied] &&
				at[sendtrace.Applied] <= at[sendtrace.Answered] && at[sendtrace.Answered] <= at[sendtrace.Responded]) {
				errs <- fmt.Errorf("send %s: milestones out of order: %v", it.s, at)
				return
			}
			sends.Add(it.tr)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r := sends.Report()
	if r.Count != n {
		t.Fatalf("%d traces kept, want %d", r.Count, n)
	}
	for _, band := range r.Bands {
		sum := 0.0
		for _, v := range band.StepsUs {
			sum += v
		}
		if band.TotalUs <= 0 || sum < band.TotalUs*0.999 || sum > band.TotalUs*1.001 {
			t.Fatalf("band %s: steps add up to %.1f µs, total %.1f", band.Name, sum, band.TotalUs)
		}
	}
	f := c.follower()
	eventually(t, electionBound, func() error {
		fr := f.FollowerTrace()
		if fr.Count == 0 {
			return fmt.Errorf("follower %s traced no AppendEntries", f.ID())
		}
		if fr.Bands[0].StepsUs[sendtrace.FollowerSynced] <= 0 {
			return fmt.Errorf("follower %s: no time in the fsync step: %+v", f.ID(), fr.Bands[0])
		}
		return nil
	})
	f.ResetTrace()
	if fr := f.FollowerTrace(); fr.Count != 0 {
		t.Fatalf("follower kept %d traces after ResetTrace", fr.Count)
	}
	if !lead.SendTraced() {
		t.Fatal("the leader says it does not trace")
	}
}

// TestSendTraceOff: without Config.SendTrace nothing is recorded.
func TestSendTraceOff(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	lead := c.leader(electionBound)
	applyN(t, lead, "m", 20)
	if lead.SendTraced() {
		t.Fatal("tracing on without Config.SendTrace")
	}
	if r := c.follower().FollowerTrace(); r.Count != 0 {
		t.Fatalf("follower traced %d AppendEntries with tracing off", r.Count)
	}
}
