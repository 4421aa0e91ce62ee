package broker

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"rocketraft/protocol"
)

// fixedOffsets serves queue offsets from a table: "topic/queue" → {min, max}.
type fixedOffsets map[string][2]int64

func (f fixedOffsets) MinOffset(topic string, q int32) int64 {
	return f[topic+"/"+string(rune('0'+q))][0]
}
func (f fixedOffsets) MaxOffset(topic string, q int32) int64 {
	return f[topic+"/"+string(rune('0'+q))][1]
}

func TestTopicsAndGroups(t *testing.T) {
	topics := []*protocol.TopicConfig{
		{TopicName: "T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6},
		{TopicName: "SCHEDULE_TOPIC_XXXX", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6},
		{TopicName: "A", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6},
	}
	st := fixedOffsets{"T/0": {2, 10}, "T/1": {0, 5}, "A/0": {0, 3}}
	committed := map[string]map[int32]int64{
		protocol.OffsetKey("T", "G2"): {0: 4, 1: 5},
		protocol.OffsetKey("T", "G1"): {0: 12, 1: 1}, // ahead on queue 0 (after a reset): no lag there
		protocol.OffsetKey("A", "G2"): {0: 0},
		"no-separator":                {0: 1},
	}
	system := func(s string) bool { return s == "SCHEDULE_TOPIC_XXXX" }
	ts, gs, truncated := topicsAndGroups(topics, committed, st, system, 10, 10)
	if truncated {
		t.Error("truncated with room to spare")
	}
	if len(ts) != 3 || ts[0].Topic != "A" || !ts[1].System || ts[2].Topic != "T" || ts[2].Messages != 13 || len(ts[2].Queues) != 2 ||
		ts[2].Queues[0] != (StatusQueue{QueueID: 0, MinOffset: 2, MaxOffset: 10}) {
		t.Errorf("topics %+v", ts)
	}
	type gl struct {
		group, topic string
		lag          int64
	}
	want := []gl{{"G1", "T", 4}, {"G2", "A", 3}, {"G2", "T", 6}}
	if len(gs) != len(want) {
		t.Fatalf("groups %+v, want %v", gs, want)
	}
	for i, w := range want {
		if g := gs[i]; g.Group != w.group || g.Topic != w.topic || g.Lag != w.lag {
			t.Errorf("group %d: %+v, want %+v", i, g, w)
		}
	}
	if q := gs[2].Queues[0]; q != (StatusGroupQueue{QueueID: 0, BrokerOffset: 10, ConsumerOffset: 4, Lag: 6}) {
		t.Errorf("G2 on T queue 0: %+v", q)
	}

	ts, gs, truncated = topicsAndGroups(topics, committed, st, system, 1, 2)
	if !truncated || len(ts) != 1 || len(gs) != 2 {
		t.Errorf("bounded: %d topics, %d groups, truncated %v; want 1, 2, true", len(ts), len(gs), truncated)
	}
	// Empty lists encode as [], which the page relies on.
	ts, gs, _ = topicsAndGroups(nil, nil, st, system, 1, 1)
	if b, _ := json.Marshal(map[string]any{"t": ts, "g": gs}); string(b) != `{"g":[],"t":[]}` {
		t.Errorf("empty lists encode as %s", b)
	}
}

// GET / and /ui serve the page; anything else under / is still 404.
func TestStatusPageRoutes(t *testing.T) {
	mux := http.NewServeMux()
	registerStatusPage(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for path, code := range map[string]int{"/": 200, "/ui": 200, "/nope": 404} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != code {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, code)
		}
		if code == 200 && (!strings.Contains(string(body), `fetchJSON("/status"`) || strings.Contains(string(body), "innerHTML") ||
			strings.Contains(string(body), "http://") || strings.Contains(string(body), "https://")) {
			t.Errorf("GET %s is not the self-contained status page", path)
		}
	}
}
