package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"rocketraft/internal/sendtrace"
)

// TestSendTraceRaftGroup: with sendTraceEnable a DLedger group's leader breaks every send it
// answered into its steps, whose shares add up to the send's time, and its followers break down
// the AppendEntries they stored, at /debug/sendtrace on real processes.
func TestSendTraceRaftGroup(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	ports := map[string]int{} // dLegerSelfId → httpPort
	g := startRaftGroup(t, ns, 3, withHTTPPorts(t, ports), withProp("sendTraceEnable", "true"))
	type both struct{ Leader, Follower sendtrace.Report }
	get := func(b *broker) (both, error) {
		var r both
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/sendtrace", ports[b.props["dLegerSelfId"]]))
		if err != nil {
			return r, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return r, fmt.Errorf("GET /debug/sendtrace: %s", resp.Status)
		}
		return r, json.NewDecoder(resp.Body).Decode(&r)
	}
	leader := g.waitMaster(t, 30*time.Second, nil)
	topic := uniq("SendTrace")
	const sends = 30
	for i := range sends {
		sendRawOK(t, leader.addr, topic, fmt.Sprintf("t-%d", i))
	}
	r, err := get(leader)
	if err != nil {
		t.Fatal(err)
	}
	// Creating the topic went through Raft as a metadata entry, not the batcher: only sends count.
	if r.Leader.Count < sends {
		t.Fatalf("leader traced %d sends, want >= %d", r.Leader.Count, sends)
	}
	for _, b := range r.Leader.Bands {
		sum := 0.0
		for _, v := range b.StepsUs {
			sum += v
		}
		if b.TotalUs <= 0 || sum < b.TotalUs*0.999 || sum > b.TotalUs*1.001 {
			t.Fatalf("band %s: steps add up to %.1f µs, total %.1f: %+v", b.Name, sum, b.TotalUs, b)
		}
	}
	if s := r.Leader.StepP50Us[sendtrace.Replicated]; s <= 0 {
		t.Fatalf("no time between sending an entry and a follower's acknowledgement: %+v", r.Leader)
	}
	for _, b := range g.nodes {
		if b == leader {
			continue
		}
		eventually(t, 10*time.Second, "follower traces", func() error {
			f, err := get(b)
			if err != nil {
				return err
			}
			if f.Follower.Count == 0 || f.Follower.StepP50Us[sendtrace.FollowerSynced] <= 0 {
				return fmt.Errorf("%s: follower report %+v", b.props["dLegerSelfId"], f.Follower)
			}
			return nil
		})
	}
}
