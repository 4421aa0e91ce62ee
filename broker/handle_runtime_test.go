package broker

import (
	"sync/atomic"
	"testing"
	"time"

	"rocketraft/config"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// runtimeFixture is a runtimeHandlers over real counters and a topic table, with the role and
// HA parts as fixed func values.
type runtimeFixture struct {
	h        *runtimeHandlers
	tb       adminTables
	httpAddr atomic.Pointer[string]
	rates    atomic.Pointer[statusRates]
}

func newRuntimeFixture(t *testing.T) *runtimeFixture {
	f := &runtimeFixture{tb: openAdminTables(t)}
	f.h = &runtimeHandlers{cfg: &config.Broker{BrokerName: "b1", FlushDiskType: "ASYNC_FLUSH"},
		topics: f.tb.topics, stats: newStats(), acquire: acquireFails,
		roleName: func() string { return "SLAVE" }, addr: func() string { return "127.0.0.1:10911" },
		addHARuntimeInfo: func(table map[string]string) { table["brokerId"] = "1" },
		httpAddr:         &f.httpAddr, rates: &f.rates}
	return f
}

func runtimeTable(t *testing.T, resp *remoting.Command) map[string]string {
	t.Helper()
	var kv protocol.KVTable
	decode(t, resp, &kv)
	return kv.Table
}

// GET_BROKER_RUNTIME_INFO: RocketMQ's keys from the counters, the store and the role, the HA
// part's keys, and the status page's address once it listens.
func TestRuntimeHandlersRuntimeInfo(t *testing.T) {
	f := newRuntimeFixture(t)
	req := remoting.NewRequest(remoting.GetBrokerRuntimeInfo, nil, nil)
	wantCode(t, "no store", f.h.handleRuntimeInfo(nil, req), remoting.ServiceNotAvailable, errStoreGone.Error())
	if _, err := f.h.storeStats(); err != errStoreGone {
		t.Fatalf("storeStats without a store: %v", err)
	}

	st := memStore(t)
	storeAt(t, st, "T1", 0, time.Now(), time.Now())
	f.h.acquire = acquireOf(st)
	f.tb.putTopic(t, "T1", 1)
	f.h.stats.putTotal.Store(5)
	f.h.stats.getTotal.Store(2)
	table := runtimeTable(t, f.h.handleRuntimeInfo(nil, req))
	want := map[string]string{"brokerRole": "SLAVE", "brokerName": "b1", "brokerAddr": "127.0.0.1:10911", "flushDiskType": "ASYNC_FLUSH",
		"msgPutTotalTodayNow": "5", "msgGetTotalTodayNow": "2", "topicCount": "1", "brokerId": "1", "consumeQueueCount": "1",
		"brokerVersionDesc": brokerVersionDesc, "diskFull": "false"}
	for k, v := range want {
		if table[k] != v {
			t.Errorf("%s = %q, want %q", k, table[k], v)
		}
	}
	if table["commitLogMaxOffset"] == "0" || table["commitLogMaxOffset"] == "" {
		t.Errorf("commitLogMaxOffset %q after two messages", table["commitLogMaxOffset"])
	}
	if _, ok := table["httpAddr"]; ok {
		t.Error("httpAddr reported with the HTTP port off")
	}
	addr := "127.0.0.1:8080"
	f.httpAddr.Store(&addr)
	if got := runtimeTable(t, f.h.handleRuntimeInfo(nil, req))["httpAddr"]; got != addr {
		t.Errorf("httpAddr %q, want %q", got, addr)
	}
}

// VIEW_BROKER_STATS_DATA: the two stats names it keeps, a group key must be topic@group, and
// the figures come from the sampler once it has sampled the key.
func TestRuntimeHandlersViewStatsData(t *testing.T) {
	f := newRuntimeFixture(t)
	view := func(name, key string) *remoting.Command {
		return f.h.handleViewStatsData(nil, remoting.NewRequest(remoting.ViewBrokerStatsData, map[string]string{"statsName": name, "statsKey": key}, nil))
	}
	wantCode(t, "unknown stats", view("SNDBCK_PUT_NUMS", "T1"), remoting.SystemError, "this broker keeps "+protocol.StatsTopicPutNums)
	wantCode(t, "group key", view(protocol.StatsGroupGetNums, "T1"), remoting.SystemError, "is not topic@group")
	wantCode(t, "not sampled", view(protocol.StatsTopicPutNums, "T1"), remoting.SystemError, "not sampled yet")

	var c rateCounters
	r := newStatusRates(func() rateCounters { return c })
	t0 := time.Now().Add(-10 * time.Second)
	for i := range 6 {
		c = rateCounters{Topics: map[string][2]int64{"T1": {int64(i) * 20, 0}}, Groups: map[string]int64{"T1@G1": int64(i) * 10}}
		r.sample(t0.Add(time.Duration(i) * rateInterval))
	}
	f.rates.Store(r)
	wantCode(t, "unknown key", view(protocol.StatsTopicPutNums, "T9"), remoting.SystemError, "not exist")
	var d protocol.BrokerStatsData
	decode(t, view(protocol.StatsTopicPutNums, "T1"), &d)
	if d.StatsMinute.Sum != 100 || d.StatsHour.Sum != 100 || d.StatsDay.Sum != 100 || d.StatsMinute.Tps != 10 {
		t.Fatalf("topic figures %+v", d)
	}
	decode(t, view(protocol.StatsGroupGetNums, "T1@G1"), &d)
	if d.StatsMinute.Sum != 50 {
		t.Fatalf("group figures %+v", d)
	}
}
