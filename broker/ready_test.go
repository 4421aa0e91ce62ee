package broker

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"rocketraft/config"
	"rocketraft/dledger"
)

// TestReadyEndpoint: a classic broker with its store open is ready, and probes need no token even
// when the port has one (while /status still does).
func TestReadyEndpoint(t *testing.T) {
	h := httpTestBroker(t, func(c *config.Broker) { c.HTTPAuthToken = "s3cret" }).status.handler()
	const remote = "10.0.0.9:40000"
	if w := httpDo(h, "GET", ReadyPath, remote, ""); w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != "ready" {
		t.Fatalf("GET %s = %d %q, want 200 ready", ReadyPath, w.Code, w.Body.String())
	}
	if w := httpDo(h, "GET", "/status", remote, ""); w.Code != http.StatusUnauthorized {
		t.Fatalf("GET /status without token = %d, want 401", w.Code)
	}
}

// TestRaftReadiness: the rule for Raft nodes, case by case.
func TestRaftReadiness(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	cases := []struct {
		name string
		st   dledger.Status
		want bool
		why  string
	}{
		{"leader ready", dledger.Status{State: "Leader", LeaderReady: true}, true, ""},
		{"leader applying", dledger.Status{State: "Leader"}, false, "leader still applying"},
		{"candidate", dledger.Status{State: "Candidate"}, false, "no leader (Candidate)"},
		{"follower without leader", dledger.Status{State: "Follower"}, false, "no leader known"},
		{"follower never contacted", dledger.Status{State: "Follower", LeaderID: "n1"}, false, "no contact with leader n1"},
		{"follower stale", dledger.Status{State: "Follower", LeaderID: "n1", LastContact: now.Add(-6 * time.Second)}, false, "no contact"},
		{"follower behind", dledger.Status{State: "Follower", LeaderID: "n1", LastContact: now, CommitIndex: 5000, AppliedIndex: 3000}, false, "catching up: applied 3000 of 5000"},
		{"follower caught up", dledger.Status{State: "Follower", LeaderID: "n1", LastContact: now.Add(-time.Second), CommitIndex: 5000, AppliedIndex: 4500}, true, ""},
		{"shutdown", dledger.Status{State: "Shutdown"}, false, "no leader (Shutdown)"},
		{"follower refusing the leader's log store", dledger.Status{State: "Follower", LeaderID: "n1", LastContact: now,
			LogStoreMismatch: "dLegerLogStore is wal, this node's is commitlog"}, false, "refusing the leader's entries: dLegerLogStore"},
	}
	for _, c := range cases {
		ok, why := raftReadiness(c.st, now)
		if ok != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s: got (%v, %q), want (%v, containing %q)", c.name, ok, why, c.want, c.why)
		}
	}
}
