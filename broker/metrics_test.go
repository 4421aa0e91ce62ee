package broker

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"rocketraft/config"
	"rocketraft/message"
	"rocketraft/metrics"
	"rocketraft/protocol"
)

func TestMessageTypeOf(t *testing.T) {
	cases := map[string]int{
		"":                                     msgNormal,
		"TAGS\x01a\x02KEYS\x01k\x02":           msgNormal,
		"TRAN_MSG\x01true\x02PGROUP\x01p":      msgTransaction,
		"TRAN_MSG\x01false\x02":                msgNormal,
		"__SHARDINGKEY\x01k1\x02":              msgFIFO,
		"DELAY\x013\x02":                       msgDelay,
		"TIMER_DELIVER_MS\x0199\x02":           msgDelay,
		"TIMER_DELAY_MS\x011000":               msgDelay,
		"XDELAY\x013\x02":                      msgNormal,      // a key that merely ends like one
		"TAGS\x01DELAY\x02":                    msgNormal,      // a value that looks like a key
		"TRAN_MSG\x01TRUE\x02DELAY\x013\x02":   msgTransaction, // also on a retry the broker delays
		"__SHARDINGKEY\x01k\x02DELAY\x012\x02": msgFIFO,
		"__STARTDELIVERTIME\x011\x02":          msgDelay, // counted, though nothing delays it
		"DELAY\x010\x02":                       msgDelay, // present, whatever its value
	}
	for props, want := range cases {
		if got := typeOfProps(props); got != want {
			t.Errorf("%q: type %s, want %s", props, messageTypeNames[got], messageTypeNames[want])
		}
	}
}

// The send and pull paths' metrics cost no allocation once topic and group are known.
func TestRecordDoesNotAllocate(t *testing.T) {
	m := newStats()
	recs := [][]byte{make([]byte, 100), make([]byte, 2000)}
	p := newSendPlan(&protocol.SendMessageRequestHeader{Topic: "T", Properties: "TAGS\x01a\x02"})
	m.recordSend("T", p, recs, time.Now().UnixMilli())
	m.recordGet("T", "G", 1, 100)
	if n := testing.AllocsPerRun(100, func() {
		m.recordSend("T", p, recs, time.Now().UnixMilli())
		m.recordGet("T", "G", 2, 2100)
	}); n != 0 {
		t.Fatalf("%v allocations per send+pull, want 0", n)
	}
}

// gathered is one scrape: "name{label=value,...}" (identity labels left out, others sorted;
// a histogram as its _count) → value.
type gathered map[string]float64

func gather(t *testing.T, b *Broker) gathered {
	t.Helper()
	return gatherMetrics(t, b.metrics)
}

// gatherMetrics is one scrape of m's registry.
func gatherMetrics(t *testing.T, m *brokerMetrics) gathered {
	t.Helper()
	mfs, err := m.registry.Gatherer().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := gathered{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case metrics.LabelCluster, metrics.LabelNodeType, metrics.LabelNodeID:
					if lp.GetValue() == "" {
						t.Errorf("%s: empty identity label %s", mf.GetName(), lp.GetName())
					}
				default:
					ls = append(ls, lp.GetName()+"="+lp.GetValue())
				}
			}
			slices.Sort(ls)
			key := mf.GetName() + "{" + strings.Join(ls, ",") + "}"
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[key+"_count"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func (g gathered) want(t *testing.T, key string, ok func(float64) bool, what string) {
	t.Helper()
	v, found := g[key]
	if !found {
		var similar []string
		name := key[:strings.IndexByte(key, '{')]
		for k := range g {
			if strings.HasPrefix(k, name) {
				similar = append(similar, k)
			}
		}
		t.Errorf("no %s; have %v", key, similar)
		return
	}
	if !ok(v) {
		t.Errorf("%s = %v, want %s", key, v, what)
	}
}

func eq(x float64) func(float64) bool { return func(v float64) bool { return v == x } }

func recordAt(t *testing.T, topic string, qid int32, storeTime time.Time, props string) []byte {
	t.Helper()
	rec, err := message.EncodeRecord(&message.Message{
		Topic: topic, QueueID: qid, Body: []byte("body"), BornTimestamp: 1, StoreTimestamp: storeTime.UnixMilli(),
		BornHost: netip.MustParseAddrPort("127.0.0.1:1"), StoreHost: netip.MustParseAddrPort("127.0.0.1:2"), Properties: props,
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// A classic broker's scrape: traffic counters by topic, message type and group, the DLQ
// counter, consumer lag from stored messages and committed offsets, storage and disk figures.
func TestBrokerCollectorClassic(t *testing.T) {
	cfg := config.NewBroker()
	cfg.BrokerClusterName, cfg.BrokerName = "C1", "broker-m"
	cfg.StorePathRootDir = t.TempDir()
	cfg.MappedFileSizeCommitLog = 1 << 20
	cfg.MapedFileSizeConsumeQueue = 1000 * 20
	cfg.NamesrvAddr = ""
	cfg.Normalize()
	b, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	// Five messages in queue 0 of T, stored 5 s ago; the group committed 2 of them.
	old := time.Now().Add(-5 * time.Second)
	var recs [][]byte
	for range 5 {
		recs = append(recs, recordAt(t, "T", 0, old, ""))
	}
	if _, err := b.commitLog.Append(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	b.offsets.Commit("G", "T", 0, 2)
	b.offsets.Commit("G", "T", 1, 0) // a queue without messages: no lag
	b.stats.recordSend("T", sentPlan("T", ""), recs, time.Now().UnixMilli())
	b.stats.recordSend("T", sentPlan("T", "DELAY\x012\x02"), recs[:1], time.Now().UnixMilli())
	b.stats.recordGet("T", "G", 2, 300)
	b.stats.recordGet("%RETRY%G", "G", 1, 100) // not counted
	toDLQ := sentPlan("%RETRY%G", "RETRY_TOPIC\x01T\x02")
	toDLQ.toDLQTarget("%DLQ%G")
	b.stats.recordSend("%RETRY%G", toDLQ, recs[:1], time.Now().UnixMilli())
	b.stats.recordSendBack("T", "G", "%DLQ%G", recs[:2], true)

	g := gather(t, b)
	n := float64(len(recs[0]))
	g.want(t, `rocketmq_messages_in_total{is_system=false,message_type=Normal,topic=T}`, eq(5), "5")
	g.want(t, `rocketmq_throughput_in_total{is_system=false,message_type=Normal,topic=T}`, eq(5*n), fmt.Sprint(5*n))
	g.want(t, `rocketmq_message_size{is_system=false,message_type=Normal,topic=T}_count`, eq(5), "5")
	g.want(t, `rocketmq_messages_in_total{is_system=false,message_type=Delay,topic=T}`, eq(1), "1")
	g.want(t, `rocketmq_messages_out_total{consumer_group=G,is_system=false,topic=T}`, eq(2), "2")
	g.want(t, `rocketmq_throughput_out_total{consumer_group=G,is_system=false,topic=T}`, eq(300), "300")
	if _, ok := g[`rocketmq_messages_out_total{consumer_group=G,is_system=false,topic=%RETRY%G}`]; ok {
		t.Error("pulls of a retry topic are counted as messages out")
	}
	g.want(t, `rocketmq_send_to_dlq_messages_total{consumer_group=G,is_system=false,topic=T}`, eq(3), "3 (1 by send, 2 by send-back)")
	g.want(t, `rocketmq_consumer_lag_messages{consumer_group=G,is_retry=false,is_system=false,topic=T}`, eq(3), "3")
	g.want(t, `rocketmq_consumer_lag_latency{consumer_group=G,is_retry=false,is_system=false,topic=T}`,
		func(v float64) bool { return v >= 4900 && v < 60000 }, "about 5000 ms")
	g.want(t, `rocketmq_storage_flush_behind_bytes{storage_medium=disk,storage_type=local}`, func(v float64) bool { return v >= 0 }, ">= 0")
	g.want(t, `rocketmq_storage_size{storage_medium=disk,storage_type=local}`, func(v float64) bool { return v > 0 }, "> 0")
	g.want(t, `rocketmq_storage_message_reserve_time{storage_medium=disk,storage_type=local}`, func(v float64) bool { return v >= 4900 }, ">= 4900 ms")
	g.want(t, `rocketmq_storage_disk_used_ratio{}`, func(v float64) bool { return v > 0 && v <= 100 }, "a percentage")
	g.want(t, `rocketmq_storage_disk_max_used_ratio{}`, eq(75), "75")
	g.want(t, `rocketmq_storage_disk_full{}`, eq(0), "0")
	g.want(t, `rocketmq_broker_permission{}`, eq(6), "6")
	g.want(t, `rocketmq_topic_number{}`, func(v float64) bool { return v > 0 }, "> 0 (system topics)")
	for k := range g {
		if strings.HasPrefix(k, "rocketmq_raft_") {
			t.Errorf("classic broker reports %s", k)
		}
	}

	// Consuming the rest clears the lag.
	b.offsets.Commit("G", "T", 0, 5)
	g = gather(t, b)
	g.want(t, `rocketmq_consumer_lag_messages{consumer_group=G,is_retry=false,is_system=false,topic=T}`, eq(0), "0")
	g.want(t, `rocketmq_consumer_lag_latency{consumer_group=G,is_retry=false,is_system=false,topic=T}`, eq(0), "0")
}

// A one-node DLedger broker reports its Raft figures: a term, commit and applied indexes that
// moved with an append, the leader state, one leader change and the append latency.
func TestBrokerCollectorRaft(t *testing.T) {
	cfg := dlegerConfig(t, t.TempDir(), "n0", "n0-"+freeAddr(t))
	b := startDLeger(t, cfg)
	defer b.Close()
	waitRole(t, b, roleLeader)
	if _, err := b.commitLog.Append(context.Background(), [][]byte{testRecord(t, "T", "a")}); err != nil {
		t.Fatal(err)
	}
	g := gather(t, b)
	p := `{raft_group=raft-unit,raft_peer=n0}`
	g.want(t, "rocketmq_raft_term"+p, func(v float64) bool { return v >= 1 }, ">= 1")
	commit, applied := g["rocketmq_raft_commit_index"+p], g["rocketmq_raft_applied_index"+p]
	if applied < 2 || commit < applied {
		t.Errorf("commit index %v, applied %v: want applied >= 2 (configuration + append) and commit >= applied", commit, applied)
	}
	g.want(t, "rocketmq_raft_last_log_index"+p, func(v float64) bool { return v >= commit }, ">= commit index")
	g.want(t, `rocketmq_raft_state{raft_group=raft-unit,raft_peer=n0,state=Leader}`, eq(1), "1")
	g.want(t, `rocketmq_raft_state{raft_group=raft-unit,raft_peer=n0,state=Follower}`, eq(0), "0")
	g.want(t, "rocketmq_raft_leader_changes_total"+p, eq(1), "1")
	g.want(t, "rocketmq_raft_last_failover_duration"+p, eq(0), "0 (no failover yet)")
	g.want(t, "rocketmq_raft_leaderless_since_unixms"+p, eq(0), "0")
	g.want(t, "rocketmq_raft_apply_latency"+p+"_count", eq(1), "1")
}
