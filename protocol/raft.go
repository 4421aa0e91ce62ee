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
	// DigestIndex and Digest: the running digest of the entries this node applied, through
	// DigestIndex (hex; "" while unknown); DigestCheckedIndex: the last index a digest check
	// confirmed equal to the leader's. Diverged is set once a check failed: the node has
	// stopped applying and serving, and Role is "diverged".
	DigestIndex        uint64          `json:"digestIndex"`
	Digest             string          `json:"digest"`
	DigestCheckedIndex uint64          `json:"digestCheckedIndex"`
	Diverged           *RaftDivergence `json:"diverged,omitempty"`
	// LogStoreMismatch says why this node refuses its leader's entries, while it does: their
	// dLegerLogStore differs. It stays behind until the group has one store.
	LogStoreMismatch string `json:"logStoreMismatch,omitempty"`
	// Timestamp is when the node took this status, ms since the epoch.
	Timestamp int64 `json:"timestamp"`
}

// RaftDivergence is a failed digest check: at Index this node's digest is LocalDigest, the
// leader's (carried by the check entry at CheckIndex, term CheckTerm) is LeaderDigest.
type RaftDivergence struct {
	Index        uint64 `json:"index"`
	CheckIndex   uint64 `json:"checkIndex"`
	CheckTerm    uint64 `json:"checkTerm"`
	LocalDigest  string `json:"localDigest"`
	LeaderDigest string `json:"leaderDigest"`
	Message      string `json:"message"`
	At           int64  `json:"at"` // ms since the epoch
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
	RaftDiverged  = "diverged" // a digest check failed: see RaftStatus.Diverged
)

// ExtLeaderAddr (ours) is set by a DLedger follower on the answer to a request it forwarded to
// its group's leader: the leader's broker (remoting) address. A caller that keeps its own idea of
// the group's master (the gRPC proxy) learns the new leader from it instead of waiting for a
// route refresh.
const ExtLeaderAddr = "__rrLeaderAddr"
