package dledger

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	walTypes "github.com/hashicorp/raft-wal/types"

	"rocketraft/peerauth"
)

// Log store names accepted in Config.LogStore.
const (
	LogStoreWAL  = "wal"  // hashicorp/raft-wal segment files (the default, by measurement)
	LogStoreBolt = "bolt" // raft-boltdb/v2 (bbolt B+tree)
	// LogStoreCommitLog is the state machine's own commitlog (Config.EntryLog): each entry is
	// written once, where the state machine serves it from.
	LogStoreCommitLog = "commitlog"
)

// Sequencer stamps into a proposed entry what only the leader can decide when it proposes it,
// in the order entries enter Raft's log: with the commitlog log store, the queue offsets of the
// entry's records (fsm.Sequencer), which are part of the bytes every replica writes before the
// entry commits.
type Sequencer interface {
	// Stamp may modify data in place. It is called under the node's proposal lock, just before
	// raft.Apply, so entries reach the log in the order Stamp saw them. term is Raft's current
	// term and barrier waits until every entry already in the log is applied here; Stamp calls
	// it when its counters must be reloaded from the applied state (a new term, a refused
	// entry). An error fails the proposal, which then does not reach Raft.
	Stamp(data []byte, term uint64, barrier func() error) error
	// Lost tells the sequencer that an entry it stamped may not have reached the log (Raft
	// refused or timed out the hand-off): counters past it are not to be trusted.
	Lost()
}

// Defaults chosen for fast failover on loopback or a LAN (see the package doc for the reasoning and
// the measurements behind them).
const (
	DefaultHeartbeatTimeout   = 500 * time.Millisecond
	DefaultElectionTimeout    = 500 * time.Millisecond
	DefaultLeaderLeaseTimeout = 500 * time.Millisecond
	DefaultCommitTimeout      = 50 * time.Millisecond
	DefaultSnapshotInterval   = 120 * time.Second
	DefaultSnapshotThreshold  = 8192
	DefaultTrailingLogs       = 10240
	DefaultLogStore           = LogStoreWAL
	DefaultLogCacheSize       = 512
	DefaultLogCacheBytes      = 8 << 20
	DefaultSnapshotRetain     = 2
	DefaultWALSegmentSize     = 64 << 20
)

// Peer is one member of the Raft group: its id (dLegerSelfId) and the host:port of its Raft
// transport.
type Peer struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
}

// Config configures one node of a Raft group. Zero durations and counts take the Default*
// constants. The json tags are our documented key names (the broker maps dLegerGroup, dLegerPeers
// and dLegerSelfId onto Group, Peers and SelfID).
type Config struct {
	Group   string `json:"dLegerGroup"`
	SelfID  string `json:"dLegerSelfId"`
	Peers   []Peer `json:"dLegerPeers"` // the initial configuration; ignored once the node has state
	DataDir string `json:"dLegerDataDir"`

	// Join starts a node that is not in Peers' bootstrap configuration with no configuration at
	// all: it waits to be added by AddVoter on the leader instead of bootstrapping.
	Join bool `json:"dLegerJoin"`

	// NoFastFailover turns off the follower's probe of the leader's Raft port (liveness.go): a
	// dead leader is then noticed only by the heartbeat timeout.
	NoFastFailover bool `json:"dLegerNoFastFailover"`

	HeartbeatTimeout   time.Duration `json:"dLegerHeartbeatTimeout"`
	ElectionTimeout    time.Duration `json:"dLegerElectionTimeout"`
	LeaderLeaseTimeout time.Duration `json:"dLegerLeaderLeaseTimeout"`
	CommitTimeout      time.Duration `json:"dLegerCommitTimeout"`

	SnapshotInterval  time.Duration `json:"dLegerSnapshotInterval"`
	SnapshotThreshold uint64        `json:"dLegerSnapshotThreshold"`
	TrailingLogs      uint64        `json:"dLegerTrailingLogs"`

	LogStore string `json:"dLegerLogStore"` // LogStoreWAL, LogStoreBolt or LogStoreCommitLog
	// EntryLog is the log store when LogStore is LogStoreCommitLog (the state machine's, fsm's
	// entry log); the node puts its log cache in front and does not close it. Sequencer must be
	// set with it.
	EntryLog raft.LogStore `json:"-"`
	// Sequencer, when set, stamps every proposed entry (see Sequencer).
	Sequencer    Sequencer `json:"-"`
	LogCacheSize int       `json:"dLegerLogCacheSize"` // newest entries kept in memory; <0 disables the cache
	// LogCacheBytes bounds the cache by size as well (the newest 8 entries stay whatever their
	// size); see logCache for why it is small.
	LogCacheBytes int `json:"dLegerLogCacheBytes"`
	// WALSegmentSize is raft-wal's segment file size (default 64 MiB). Log compaction frees whole
	// segments only, and a follower is sent a snapshot only for entries that are gone.
	WALSegmentSize int `json:"dLegerWalSegmentSize"`
	// SerialLeaderWrite makes the leader fsync its copy of new entries before replicating them,
	// as hashicorp/raft does on its own, instead of in parallel with the followers' writes
	// (leaderwrite.go). Only raft-wal writes in parallel; the bolt log store is always serial.
	SerialLeaderWrite bool `json:"dLegerSerialLeaderWrite"`

	// PeerSecret, when set (at least 16 bytes), is the group's shared secret: every Raft
	// connection, either way, starts with the peerauth handshake proving it, and an inbound RPC
	// must carry the node id its connection proved. nil: no peer authentication (the RPC gate's
	// term and TimeoutNow checks apply either way, rpcgate.go).
	PeerSecret []byte `json:"-"`

	// OnDiskFailure, when set, is called once per failed write to this node's Raft storage (the
	// log store, the stable store, a background fsync of the leader's log: diskfail.go), before
	// the error reaches Raft. A write that failed cannot be trusted to be anywhere (a failed fsync
	// is not retryable: the kernel may have marked the pages clean), so the caller is expected to
	// take the node out of service; it may not return (the broker exits). Unset: the errors reach
	// Raft as before.
	OnDiskFailure func(op string, err error) `json:"-"`

	// SendTrace records where each send's time goes (package sendtrace): the node marks its
	// entries' milestones and keeps its AppendEntries traces as follower (Node.FollowerTrace).
	SendTrace bool `json:"-"`

	walVFS walTypes.VFS // tests: raft-wal's file system under the deferred fsyncs (nil: the real one)
	// Benchmarks only: heartbeatFastPath installs hashicorp/raft's heartbeat fast path (what
	// raftTransport refuses), to measure against; onHeartbeat is told each heartbeat's round trip
	// as this node's leader loop sees it.
	heartbeatFastPath bool
	onHeartbeat       func(time.Duration)

	Logger hclog.Logger `json:"-"`

	// Listener, when set, is used for the Raft transport instead of listening on self's address
	// (tests pre-bind 127.0.0.1:0 to learn ports before building Peers). Open takes ownership.
	Listener net.Listener `json:"-"`
}

func (c *Config) setDefaults() {
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = DefaultElectionTimeout
	}
	if c.LeaderLeaseTimeout == 0 {
		c.LeaderLeaseTimeout = DefaultLeaderLeaseTimeout
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = DefaultCommitTimeout
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = DefaultSnapshotInterval
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = DefaultTrailingLogs
	}
	if c.LogStore == "" {
		c.LogStore = DefaultLogStore
	}
	if c.LogCacheSize == 0 {
		c.LogCacheSize = DefaultLogCacheSize
	}
	if c.LogCacheBytes == 0 {
		c.LogCacheBytes = DefaultLogCacheBytes
	}
	if c.WALSegmentSize == 0 {
		c.WALSegmentSize = DefaultWALSegmentSize
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
}

// self returns the Peer entry for SelfID.
func (c *Config) self() (Peer, bool) {
	for _, p := range c.Peers {
		if p.ID == c.SelfID {
			return p, true
		}
	}
	return Peer{}, false
}

func (c *Config) validate() error {
	if c.SelfID == "" {
		return keyErr("dLegerSelfId", "must be set")
	}
	if c.DataDir == "" {
		return keyErr("dLegerDataDir", "must be set")
	}
	if err := checkPeers(c.Peers); err != nil {
		return err
	}
	if _, ok := c.self(); !ok {
		return keyErr("dLegerSelfId", "%q is not in dLegerPeers", c.SelfID)
	}
	switch c.LogStore {
	case LogStoreWAL, LogStoreBolt:
	case LogStoreCommitLog:
		if c.EntryLog == nil {
			return keyErr("dLegerLogStore", "%q needs the state machine's entry log (Config.EntryLog)", c.LogStore)
		}
		if c.Sequencer == nil {
			return keyErr("dLegerLogStore", "%q needs a Sequencer (Config.Sequencer) to stamp queue offsets", c.LogStore)
		}
	default:
		return keyErr("dLegerLogStore", "%q is not %q, %q or %q", c.LogStore, LogStoreWAL, LogStoreBolt, LogStoreCommitLog)
	}
	if c.PeerSecret != nil && len(c.PeerSecret) < peerauth.MinSecret {
		return keyErr("peerSecret", "has %d bytes, at least %d are needed", len(c.PeerSecret), peerauth.MinSecret)
	}
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		return keyErr("dLegerLeaderLeaseTimeout", "%v exceeds the heartbeat timeout %v", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	}
	return nil
}

// ConfigError names the configuration key that is wrong.
type ConfigError struct {
	Key string
	Msg string
}

func (e *ConfigError) Error() string { return "dledger: " + e.Key + ": " + e.Msg }

func keyErr(key, format string, args ...any) error {
	return &ConfigError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// ParsePeers parses the dLegerPeers syntax "n0-host:port;n1-host:port;...": entries separated by
// ';' (blank entries and surrounding spaces ignored), each "<id>-<host>:<port>" where the id is the
// text before the first '-' (so host names may contain '-'). Duplicate ids or addresses are
// rejected.
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	for _, e := range strings.Split(s, ";") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		id, addr, ok := strings.Cut(e, "-")
		if !ok || id == "" {
			return nil, keyErr("dLegerPeers", "entry %q is not <id>-<host>:<port>", e)
		}
		out = append(out, Peer{ID: id, Addr: addr})
	}
	if len(out) == 0 {
		return nil, keyErr("dLegerPeers", "no peers in %q", s)
	}
	if err := checkPeers(out); err != nil {
		return nil, err
	}
	return out, nil
}

func checkPeers(peers []Peer) error {
	if len(peers) == 0 {
		return keyErr("dLegerPeers", "must list at least one peer")
	}
	ids, addrs := map[string]bool{}, map[string]bool{}
	for _, p := range peers {
		if p.ID == "" {
			return keyErr("dLegerPeers", "peer %q has no id", p.Addr)
		}
		if err := checkHostPort(p.Addr); err != nil {
			return keyErr("dLegerPeers", "peer %s: %v", p.ID, err)
		}
		if ids[p.ID] {
			return keyErr("dLegerPeers", "duplicate id %q", p.ID)
		}
		if addrs[p.Addr] {
			return keyErr("dLegerPeers", "duplicate address %q", p.Addr)
		}
		ids[p.ID], addrs[p.Addr] = true, true
	}
	return nil
}

func checkHostPort(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return err
	}
	if host == "" {
		return fmt.Errorf("address %q has no host", a)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n <= 0 || n > 65535 {
		return fmt.Errorf("address %q has a bad port", a)
	}
	return nil
}
