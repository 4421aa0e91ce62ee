package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"rocketraft/broker/meta"
	"rocketraft/config"
	"rocketraft/metrics"
	"rocketraft/protocol"
	"rocketraft/storage"
)

// emptyMetaTables opens empty topic, subscription-group and offset tables in a temporary
// directory.
func emptyMetaTables(t *testing.T) (*meta.Topics, *meta.Groups, *meta.Offsets) {
	t.Helper()
	tb := &tables{}
	openTestMeta(t, t.TempDir(), tb)
	return tb.topics, tb.groups, tb.offsets
}

// testMetrics is the metrics of a node in place p over fresh tables: topic T, group G.
func testMetrics(t *testing.T, p place) (*brokerMetrics, metricsSources) {
	t.Helper()
	cfg := config.NewBroker()
	cfg.BrokerClusterName, cfg.BrokerName = "C1", "broker-a"
	cfg.StorePathRootDir = t.TempDir()
	cfg.BrokerPermission = 4
	cfg.DiskMaxUsedSpaceRatio = 80
	src := metricsSources{cfg: cfg, stats: newStats(), place: p}
	src.topics, src.groups, src.offsets = emptyMetaTables(t)
	if _, err := src.topics.EnsureTopics([]*protocol.TopicConfig{protocol.NewTopicConfig("T")}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := src.groups.Put(protocol.NewSubscriptionGroupConfig("G")); err != nil {
		t.Fatal(err)
	}
	return newBrokerMetrics(src), src
}

// A scrape reads the counters, the configuration and the tables it was given; without a store
// it leaves the store's figures out instead of failing, and a classic place reports no Raft.
func TestCollectorFromSources(t *testing.T) {
	m, src := testMetrics(t, &placeFake{storeErr: errors.New("restoring")})
	src.stats.recordGet("T", "G", 4, 400)
	src.stats.recordDLQ("T", "G", 2)
	src.offsets.Commit("G", "T", 0, 3)
	g := gatherMetrics(t, m)
	g.want(t, `rocketmq_broker_permission{}`, eq(4), "4")
	g.want(t, `rocketmq_topic_number{}`, eq(float64(len(src.topics.Names()))), "the table's topics")
	g.want(t, `rocketmq_consumer_group_number{}`, eq(float64(len(src.groups.Names()))), "the table's groups")
	g.want(t, `rocketmq_storage_disk_max_used_ratio{}`, eq(80), "80")
	g.want(t, `rocketmq_messages_out_total{consumer_group=G,is_system=false,topic=T}`, eq(4), "4")
	g.want(t, `rocketmq_throughput_out_total{consumer_group=G,is_system=false,topic=T}`, eq(400), "400")
	g.want(t, `rocketmq_send_to_dlq_messages_total{consumer_group=G,is_system=false,topic=T}`, eq(2), "2")
	for k := range g {
		if strings.HasPrefix(k, "rocketmq_raft_") || strings.HasPrefix(k, "rocketmq_consumer_lag") || strings.HasPrefix(k, "rocketmq_storage_disk_full") {
			t.Errorf("scrape without a store or Raft reports %s", k)
		}
	}
}

// With a store, the scrape adds its figures and the lag of each committed pair (none on an
// empty queue).
func TestCollectorWithStore(t *testing.T) {
	m, src := testMetrics(t, &placeFake{store: memStore(t)})
	src.offsets.Commit("G", "T", 0, 0)
	g := gatherMetrics(t, m)
	g.want(t, `rocketmq_storage_disk_full{}`, eq(0), "0")
	g.want(t, `rocketmq_storage_flush_behind_bytes{storage_medium=disk,storage_type=local}`, eq(0), "0 on an empty store")
	g.want(t, `rocketmq_storage_dispatch_behind_bytes{storage_medium=disk,storage_type=local}`, eq(0), "0")
	g.want(t, `rocketmq_consumer_lag_messages{consumer_group=G,is_retry=false,is_system=false,topic=T}`, eq(0), "0")
	g.want(t, `rocketmq_consumer_lag_latency{consumer_group=G,is_retry=false,is_system=false,topic=T}`, eq(0), "0")
}

// appendLog is a CommitLog answering every append with err after a moment.
type appendLog struct{ err error }

// Append implements CommitLog.
func (a appendLog) Append(context.Context, [][]byte) ([]storage.AppendResult, error) {
	time.Sleep(time.Millisecond)
	return nil, a.err
}

// timed leaves the commitlog alone when the place replicates nothing, and otherwise times the
// successful appends, synchronous and asynchronous, into the apply histogram.
func TestMetricsTimedCommitLog(t *testing.T) {
	classic, _ := testMetrics(t, &placeFake{})
	cl := appendLog{}
	if got := classic.timed(cl); got != CommitLog(cl) {
		t.Fatalf("classic mode wrapped the commitlog: %T", got)
	}
	h := metrics.NewHistogram([]float64{1, 10, 100})
	raft, _ := testMetrics(t, &placeFake{apply: h})
	timed := raft.timed(cl)
	if _, err := timed.Append(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := raft.timed(appendLog{err: errors.New("lost leadership")}).Append(context.Background(), nil); err == nil {
		t.Fatal("the error was lost")
	}
	appendCallOf := func(log CommitLog) error {
		done := make(chan error, 1)
		log.(asyncCommitLog).AppendCall(&appendCall{deadline: time.Now().Add(time.Second),
			done: appendDoneFunc(func(_ []storage.AppendResult, err error) { done <- err })})
		return <-done
	}
	if err := appendCallOf(timed); err != nil { // over a synchronous log
		t.Fatal(err)
	}
	if err := appendCallOf(raft.timed(asyncAppendLog{})); err != nil {
		t.Fatal(err)
	}
	if err := appendCallOf(raft.timed(asyncAppendLog{appendLog{err: errors.New("lost leadership")}})); err == nil {
		t.Fatal("the asynchronous error was lost")
	}
	if n := h.Count(); n != 3 {
		t.Fatalf("%d appends timed, want 3 (the failed ones left out)", n)
	}
}

// asyncAppendLog answers AppendCall through the call, as the Raft group does.
type asyncAppendLog struct{ appendLog }

func (a asyncAppendLog) AppendCall(c *appendCall) {
	c.finish(a.Append(context.Background(), c.records))
}

// appendDoneFunc lets a test's function hear an appendCall.
type appendDoneFunc func([]storage.AppendResult, error)

func (f appendDoneFunc) appended(res []storage.AppendResult, err error) { f(res, err) }
