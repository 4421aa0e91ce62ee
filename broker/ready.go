package broker

import (
	"fmt"
	"net/http"
	"time"

	"rocketraft/dledger"
)

// ReadyPath is the HTTP port's readiness endpoint: 200 "ready" when the node serves, 503 with
// the reason otherwise. Kubernetes' readiness probe (deploy/k8s/broker-a.yaml) and the compose
// file's healthchecks (deploy/compose.yaml) read it; /status itself answers 200 whenever the
// process is up, so it cannot say whether the node is of use. It is public (no httpAuthToken):
// a probe carries no credentials, and the answer holds nothing beyond ready or not and why.
const ReadyPath = "/status/ready"

// Readiness bounds for a Raft follower: it must have heard from its leader within
// readyContactWindow and applied all but readyApplyLag of the entries it knows are committed,
// so that a rolling restart waits for a restarted node to catch up before it takes down the
// next one (and with it, possibly, the group's majority).
const (
	readyContactWindow = 5 * time.Second
	readyApplyLag      = 1000
)

// serveReady answers ReadyPath.
func (s *statusPages) serveReady(w http.ResponseWriter, _ *http.Request) {
	ok, why := readiness(s.place, time.Now())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: %s\n", why)
		return
	}
	fmt.Fprintln(w, "ready")
}

// readiness says whether the node in place p serves at now: its store is open and, in a Raft
// group, it is a leader that accepts writes or a follower in touch with its leader and caught up.
func readiness(p place, now time.Time) (bool, string) {
	_, release, err := p.acquire()
	if err != nil {
		return false, "store unavailable"
	}
	release()
	rp, err := p.raft()
	if err != nil {
		return true, "" // classic master or slave: the store is open and the port listens
	}
	return raftReadiness(rp.node.Status(), now)
}

// raftReadiness is readiness's rule for a Raft node in state st at now.
func raftReadiness(st dledger.Status, now time.Time) (bool, string) {
	if st.LogStoreMismatch != "" {
		return false, "refusing the leader's entries: " + st.LogStoreMismatch
	}
	switch st.State {
	case "Leader":
		if !st.LeaderReady {
			return false, "leader still applying the entries of earlier terms"
		}
		return true, ""
	case "Follower":
		if st.LeaderID == "" {
			return false, "no leader known"
		}
		if st.LastContact.IsZero() || now.Sub(st.LastContact) > readyContactWindow {
			return false, fmt.Sprintf("no contact with leader %s for more than %s", st.LeaderID, readyContactWindow)
		}
		if st.CommitIndex > st.AppliedIndex+readyApplyLag {
			return false, fmt.Sprintf("catching up: applied %d of %d committed entries", st.AppliedIndex, st.CommitIndex)
		}
		return true, ""
	default:
		return false, "no leader (" + st.State + ")"
	}
}
