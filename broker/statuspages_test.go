package broker

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/clients"
	"rocketraft/config"
	"rocketraft/protocol"
	"rocketraft/storage"
)

// testStatusPages serves the status of a node in place p with a topic T (2 queues), the
// cluster's own topic C1 and group G's committed offset 0 on T's queue 0; the batched commits
// say 7 for it.
func testStatusPages(t *testing.T, p place) *statusPages {
	t.Helper()
	cfg := config.NewBroker()
	cfg.BrokerClusterName, cfg.BrokerName = "C1", "broker-a"
	topics, _, offsets := emptyMetaTables(t)
	tc := protocol.NewTopicConfig("T")
	tc.ReadQueueNums, tc.WriteQueueNums = 2, 2
	if _, err := topics.EnsureTopics([]*protocol.TopicConfig{tc, protocol.NewTopicConfig("C1")}, time.Now()); err != nil {
		t.Fatal(err)
	}
	offsets.Commit("G", "T", 0, 0)
	return &statusPages{cfg: cfg, logger: hclog.NewNullLogger(), place: p, topics: topics, offsets: offsets,
		clients: clients.NewManager(clients.Config{}), stats: newStats(), metrics: http.NotFoundHandler(),
		addr:       func() string { return "10.0.0.1:10911" },
		storeStats: func() (storage.Stats, error) { return storage.Stats{}, nil },
		committedOffset: func(group, topic string, qid int32) (int64, bool) {
			return 7, group == "G" && topic == "T" && qid == 0
		}}
}

// statusOf reads /status from s's handler.
func statusOf(t *testing.T, s *statusPages) map[string]json.RawMessage {
	t.Helper()
	w := httpDo(s.handler(), "GET", "/status", "127.0.0.1:40000", "")
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /status = %d %s", w.Code, w.Header().Get("Content-Type"))
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// /status names the node as its place says and lists the topics, with the cluster's own topic
// marked as a system one, and the groups with the offsets a consumer would be told.
func TestStatusPagesStatus(t *testing.T) {
	s := testStatusPages(t, &placeFake{store: memStore(t), id: 0, role: "ASYNC_MASTER"})
	s.warnings = []string{"peer port open"}
	s.stats.recordGet("T", "G", 2, 300)
	st := statusOf(t, s)
	for k, want := range map[string]string{"cluster": `"C1"`, "brokerName": `"broker-a"`, "brokerId": `0`,
		"role": `"ASYNC_MASTER"`, "addr": `"10.0.0.1:10911"`, "getTotal": `2`, "security_warnings": `["peer port open"]`} {
		if got := string(st[k]); got != want {
			t.Errorf("%s = %s, want %s", k, got, want)
		}
	}
	for _, k := range []string{"storeError", "raft", "raftStatus", "rates", "listsTruncated"} {
		if _, ok := st[k]; ok {
			t.Errorf("classic status without rates has %s", k)
		}
	}
	var ts []StatusTopic
	if err := json.Unmarshal(st["topics"], &ts); err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Topic != "C1" || !ts[0].System || ts[1].Topic != "T" || ts[1].System || len(ts[1].Queues) != 2 {
		t.Fatalf("topics %+v", ts)
	}
	var gs []StatusGroup
	if err := json.Unmarshal(st["consumerGroups"], &gs); err != nil {
		t.Fatal(err)
	}
	if len(gs) != 1 || gs[0].Group != "G" || gs[0].Topic != "T" || len(gs[0].Queues) != 1 || gs[0].Queues[0].ConsumerOffset != 7 {
		t.Fatalf("groups %+v", gs)
	}
}

// Without a store /status still answers, with the store error and no lists.
func TestStatusPagesStoreUnavailable(t *testing.T) {
	s := testStatusPages(t, &placeFake{storeErr: errors.New("closing")})
	s.storeStats = func() (storage.Stats, error) { return storage.Stats{}, errors.New("closing") }
	st := statusOf(t, s)
	if string(st["storeError"]) != `"closing"` {
		t.Fatalf("storeError %s", st["storeError"])
	}
	if _, ok := st["topics"]; ok {
		t.Fatal("lists without a store")
	}
	if string(st["security_warnings"]) != `[]` || string(st["clients"]) != `[]` {
		t.Fatalf("security_warnings %s clients %s, want empty lists", st["security_warnings"], st["clients"])
	}
}

// The topics the page hides by default.
func TestStatusPagesSystemTopic(t *testing.T) {
	s := testStatusPages(t, &placeFake{})
	for topic, want := range map[string]bool{"T": false, "C1": true, "broker-a": true, "%RETRY%G": true, "%DLQ%G": true,
		"C1_REPLY_TOPIC": true, "RMQ_SYS_TRANS_HALF_TOPIC": true, "TBW102": true, "orders": false} {
		if got := s.systemTopic(topic); got != want {
			t.Errorf("systemTopic(%q) = %v, want %v", topic, got, want)
		}
	}
}

// The rate sampler reads the traffic totals and each topic@group's committed offsets summed
// (negative offsets left out).
func TestStatusPagesRateCounters(t *testing.T) {
	s := testStatusPages(t, &placeFake{})
	s.stats.recordGet("T", "G", 3, 30)
	s.offsets.Commit("G", "T", 1, 5)
	s.offsets.Commit("G2", "T", 0, -1)
	c := s.rateCounters()
	if c.Get != 3 || c.Put != 0 {
		t.Fatalf("totals put %d get %d, want 0 and 3", c.Put, c.Get)
	}
	if c.Topics["T"] != [2]int64{0, 3} {
		t.Fatalf("topic T %v, want [0 3]", c.Topics["T"])
	}
	if c.Groups["T@G"] != 5 || c.Groups["T@G2"] != 0 {
		t.Fatalf("groups %v", c.Groups)
	}
}

// start without an HTTP port starts only the rate sampler (VIEW_BROKER_STATS_DATA reads it) and
// advertises no address; the sampler stops with stop.
func TestStatusPagesStartWithoutPort(t *testing.T) {
	s := testStatusPages(t, &placeFake{})
	s.cfg.HTTPPort = 0
	stop := make(chan struct{})
	defer close(stop)
	if err := s.start(stop, []string{"w"}); err != nil {
		t.Fatal(err)
	}
	if s.rates.Load() == nil || s.httpAddr.Load() != nil || len(s.warnings) != 1 {
		t.Fatalf("rates %v, httpAddr %v, warnings %v", s.rates.Load() != nil, s.httpAddr.Load(), s.warnings)
	}
}

// Readiness: a node without a store is not ready (503 with the reason); a classic node with
// one is.
func TestReadinessByPlace(t *testing.T) {
	now := time.Now()
	if ok, why := readiness(&placeFake{storeErr: errors.New("restoring")}, now); ok || why != "store unavailable" {
		t.Fatalf("without a store: %v %q", ok, why)
	}
	if ok, why := readiness(&placeFake{}, now); !ok || why != "" {
		t.Fatalf("classic with a store: %v %q", ok, why)
	}
	s := testStatusPages(t, &placeFake{storeErr: errors.New("restoring")})
	w := httpDo(s.handler(), "GET", ReadyPath, "10.0.0.9:1", "")
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "not ready: store unavailable") {
		t.Fatalf("GET %s = %d %q", ReadyPath, w.Code, w.Body.String())
	}
	if w.Header().Get("Cache-Control") != "no-store" {
		t.Fatal("a readiness answer may be cached")
	}
}
