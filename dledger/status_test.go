package dledger

import (
	"testing"
	"time"
)

func TestReportedIndexes(t *testing.T) {
	for _, c := range []struct {
		name                        string
		raftCommit, raftApp, fsmApp uint64
		wantCommit, wantApplied     uint64
	}{
		{"running node: Raft's own", 120, 118, 118, 120, 118},
		{"just restarted, no snapshot", 0, 0, 7976, 7976, 7976},
		{"restarted from a snapshot", 0, 5000, 7976, 7976, 7976},
		{"no state machine index", 10, 9, 0, 10, 9},
		{"commit known, replay behind", 8000, 5000, 7976, 8000, 7976},
	} {
		commit, applied := reportedIndexes(c.raftCommit, c.raftApp, c.fsmApp)
		if commit != c.wantCommit || applied != c.wantApplied {
			t.Errorf("%s: got commit %d applied %d, want %d %d", c.name, commit, applied, c.wantCommit, c.wantApplied)
		}
	}
}

// persistentFSM is a testFSM that, like fsm.FSM, knows its applied index from its own storage when
// it starts.
type persistentFSM struct {
	testFSM
	restored uint64
}

func (f *persistentFSM) AppliedIndex() uint64 { return f.restored }

// A node restarted alone (no leader to tell it the commit index, no snapshot) reports the state
// machine's applied index, and a commit index not below it, from its first status on.
func TestStatusAfterRestartReportsAppliedIndex(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	lead := c.leader(10 * time.Second)
	applyN(t, lead, "x", 20)
	want := lead.Status().AppliedIndex
	if want < 20 {
		t.Fatalf("leader applied %d, want at least 20", want)
	}
	// Every node holds and has applied the entries before they stop (a follower outside the
	// majority can be an entry behind), so n0's log reaches the applied index it restores.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		behind := ""
		for _, id := range []string{"n0", "n1", "n2"} {
			if st := c.nodes[id].Status(); st.AppliedIndex < want || st.LastLogIndex < want {
				behind = id
			}
		}
		if behind == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not apply index %d within 10 s", behind, want)
		}
	}
	for _, id := range []string{"n0", "n1", "n2"} {
		c.stop(id)
	}
	cfg := c.cfgs["n0"]
	cfg.Listener = nil
	n := openRetry(t, cfg, &persistentFSM{restored: want})
	c.nodes["n0"] = n
	st := n.Status()
	if st.AppliedIndex != want || st.CommitIndex < want {
		t.Fatalf("restarted node reports commit %d applied %d, want applied %d and commit >= it (Raft's own: commit %d applied %d)",
			st.CommitIndex, st.AppliedIndex, want, n.raft.CommitIndex(), n.raft.AppliedIndex())
	}
	if st.LastLogIndex < st.AppliedIndex {
		t.Errorf("last log index %d below applied %d", st.LastLogIndex, st.AppliedIndex)
	}
	t.Logf("Raft's own indexes after the restart: commit %d applied %d; reported: commit %d applied %d",
		n.raft.CommitIndex(), n.raft.AppliedIndex(), st.CommitIndex, st.AppliedIndex)
}
