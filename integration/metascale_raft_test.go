package integration

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

// scaleRaftTopics is how many topics TestMetadataAtScaleRaft creates (RR_SCALE_RAFT_TOPICS
// overrides it).
const scaleRaftTopics = 3000

// TestMetadataAtScaleRaft: in DLedger mode every topic config is a Raft entry (applied on every
// node, which writes topics.json through the same coalescing saver). Topics created over
// pipelined connections to the leader must all reach the name server's topic list; the rate is
// logged (the test keeps N small to stay short; RR_SCALE_RAFT_TOPICS=20000 measures the issue's
// figure).
func TestMetadataAtScaleRaft(t *testing.T) {
	t.Parallel()
	n := scaleRaftTopics
	if s := os.Getenv("RR_SCALE_RAFT_TOPICS"); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			n = v
		}
	}
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3)
	leader := g.waitMaster(t, 20*time.Second, nil)
	prefix := fmt.Sprintf("RScale%d_", os.Getpid()%100000)
	start := time.Now()
	err := pipelined(leader.addr, n, func(i int) (int, map[string]string, []byte) {
		return namesCodeUpdateTopic, map[string]string{"topic": prefix + "T" + strconv.Itoa(i), "readQueueNums": "1",
			"writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG"}, nil
	})
	if err != nil {
		t.Fatalf("create topics: %v", err)
	}
	created := time.Since(start)
	var listed time.Duration
	eventually(t, 2*scaleBound, "the name server lists every topic", func() error {
		got, err := namesrvTopicCount(ns.addr, prefix)
		if err != nil {
			return err
		}
		if got != n {
			return fmt.Errorf("%d of %d topics listed", got, n)
		}
		listed = time.Since(start)
		return nil
	})
	t.Logf("DLedger, 3 nodes: %d topics created (all answered) in %v (%.0f/s), all in the name server's list after %v",
		n, created.Round(time.Millisecond), float64(n)/created.Seconds(), listed.Round(time.Millisecond))
	if per := listed / time.Duration(n); per > scaleBound/20000 {
		t.Errorf("%v per topic: 20,000 would take over %v", per, scaleBound)
	}
}
