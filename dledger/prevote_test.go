package dledger

import (
	"testing"

	"github.com/hashicorp/raft"
)

// TestTransportKeepsPreVote: hashicorp/raft turns pre-vote off, with only a warning in the log,
// when its transport lacks RequestPreVote (raft.WithPreVote). Pre-vote is what keeps a node cut
// off from its group from raising its term while it campaigns alone, so that it cannot depose
// the leader with a higher term when the link heals (integration/stepdown_test.go cuts and heals
// followers in the lab and checks the leader's term never moves). A wrapper around our
// transport that drops the method would bring that disruption back.
func TestTransportKeepsPreVote(t *testing.T) {
	var tr raft.Transport = raftTransport{} // what raft.NewRaft is given (node.go)
	if _, ok := tr.(raft.WithPreVote); !ok {
		t.Fatal("raftTransport does not implement raft.WithPreVote: Raft would run without pre-vote")
	}
}
