package protocol

// RaftStatus is the body of GET_RAFT_STATUS (32001, ours): one DLedger-mode broker's view of its
// Raft group. Indexes are Raft log indexes; CommitLogMaxOffset is the replicated store's.
type RaftStatus struct {
	Group      string `json:"group"`      // dLegerGroup
	Cluster    string `json:"cluster"`    // brokerClusterName
	BrokerName string `json:"brokerName"` // brokerName
	NodeID     string `json:"nodeId"`     // dLegerSelfId
	PeerAddr   string `json:"peerAddr"`   // this node's Raft address (from dLegerPeers)
	BrokerAddr string `json:"brokerAddr"` // this node's remoting address
	BrokerID   int64  `json:"brokerId"`   // the id it registers under (0 = master)
	BrokerRole string `json:"brokerRole"` // SYNC_MASTER or SLAVE, as registered
	// Role is the Raft state: leader, follower, candidate or shutdown. LeaderReady: leader and
	// everything committed before its term applied (it registers as master only then).
	Role               string `json:"role"`
	LeaderReady        bool   `json:"leaderReady"`
	Term               uint64 `json:"term"`
	LastLogIndex       uint64 `json:"lastLogIndex"`
	CommitIndex        uint64 `json:"commitIndex"`
	AppliedIndex       uint64 `json:"appliedIndex"`
	CommitLogMinOffset int64  `json:"commitLogMinOffset"`
	CommitLogMaxOffset int64  `json:"commitLogMaxOffset"`
	// LastContact is when a follower last heard from the leader, ms since the epoch (0 = never;
	// a leader reports now); LastContactAgoMs is the same as an age on the node's own clock
	// (-1 = never), so readers need not trust their clock against the node's.
	LastContact      int64  `json:"lastContact"`
	LastContactAgoMs int64  `json:"lastContactAgoMs"`
	LeaderID         string `json:"leaderId"`   // "" when no leader is known
	LeaderAddr       string `json:"leaderAddr"` // the leader's Raft address
	// Peers is the latest Raft configuration (possibly not yet committed).
	Peers []RaftPeer `json:"peers"`
	// Timestamp is when the node took this status, ms since the epoch.
	Timestamp int64 `json:"timestamp"`
}

// RaftPeer is one member of a Raft configuration.
type RaftPeer struct {
	ID       string `json:"id"`
	Addr     string `json:"addr"`
	Suffrage string `json:"suffrage"` // Voter, Nonvoter, Staging
}

// Raft roles as RaftStatus.Role reports them.
const (
	RaftLeader    = "leader"
	RaftFollower  = "follower"
	RaftCandidate = "candidate"
	RaftShutdown  = "shutdown"
)
