package broker

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"rocketraft/internal/sendtrace"
)

// /debug/sendtrace is 404 without tracing, and with it serves the sends kept as JSON or text
// and forgets them on ?reset=1.
func TestSendTraceEndpoint(t *testing.T) {
	off := testStatusPages(t, &placeFake{store: memStore(t), id: 0, role: "ASYNC_MASTER"})
	if w := httpDo(off.handler(), "GET", SendTracePath, "127.0.0.1:40000", ""); w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "sendTraceEnable") {
		t.Fatalf("classic place: GET %s = %d %q, want 404 naming sendTraceEnable", SendTracePath, w.Code, w.Body.String())
	}

	rp := &raftPlace{raftGroup: &raftGroup{selfID: "n0", group: "g", sends: sendtrace.NewCollector(sendtrace.LeaderStages)}}
	s := testStatusPages(t, rp)
	tr := &sendtrace.Trace{}
	for st := sendtrace.Received; st <= sendtrace.Responded; st++ {
		tr.At[st] = int64(st+1) * 1000
	}
	rp.sends.Add(tr)

	w := httpDo(s.handler(), "GET", SendTracePath, "127.0.0.1:40000", "")
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s = %d %s", SendTracePath, w.Code, w.Header().Get("Content-Type"))
	}
	var got struct{ Leader, Follower sendtrace.Report }
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Leader.Count != 1 || got.Leader.Bands[0].TotalUs != float64(sendtrace.Responded) || got.Follower.Count != 0 {
		t.Fatalf("report %+v", got)
	}

	w = httpDo(s.handler(), "GET", SendTracePath+"?format=text", "127.0.0.1:40000", "")
	if body := w.Body.String(); w.Code != http.StatusOK || !strings.Contains(body, "sends led by n0: 1 traced") || !strings.Contains(body, "replicated") {
		t.Fatalf("text report %d:\n%s", w.Code, body)
	}

	if w = httpDo(s.handler(), "GET", SendTracePath+"?reset=1", "127.0.0.1:40000", ""); w.Code != http.StatusOK {
		t.Fatalf("reset: %d", w.Code)
	}
	if r := rp.sends.Report(); r.Count != 0 {
		t.Fatalf("%d sends kept after reset", r.Count)
	}
}
