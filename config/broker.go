package config

import (
	"os"
	"path/filepath"
	"time"

	"rocketraft/peerauth"
)

// Broker roles (brokerRole).
const (
	RoleAsyncMaster = "ASYNC_MASTER"
	RoleSyncMaster  = "SYNC_MASTER"
	RoleSlave       = "SLAVE"
)

// Flush modes (flushDiskType).
const (
	AsyncFlush = "ASYNC_FLUSH"
	SyncFlush  = "SYNC_FLUSH"
)

// DefaultMessageDelayLevel is RocketMQ's messageDelayLevel: level n (1-based) is the n-th entry.
const DefaultMessageDelayLevel = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

// Broker is the configuration of one mqbroker process. Tags are RocketMQ's BrokerConfig /
// MessageStoreConfig / NettyServerConfig key names; keys marked "ours" have no RocketMQ
// counterpart. Durations are milliseconds unless the comment says otherwise.
type Broker struct {
	// Identity and role.
	BrokerClusterName string `prop:"brokerClusterName" group:"identity" help:"cluster this broker registers under"`                   // default DefaultCluster
	BrokerName        string `prop:"brokerName" help:"broker (group) name shared by a master and its slaves; the host name if unset"` // default: host name (DEFAULT_BROKER if unknown)
	BrokerID          int64  `prop:"brokerId" help:"0 = master, > 0 = slave (classic mode; DLedger mode derives it from the role)"`   // 0 = master; forced to 0 for masters, > 0 for SLAVE
	BrokerRole        string `prop:"brokerRole" help:"ASYNC_MASTER | SYNC_MASTER | SLAVE (classic mode; ignored in DLedger mode)"`    // ASYNC_MASTER | SYNC_MASTER | SLAVE (ignored in DLedger mode)
	RegionID          string `prop:"regionId" help:"region reported to producers in send responses"`                                  // MSG_REGION in send responses; default DefaultRegion
	TraceOn           bool   `prop:"traceOn" help:"tell clients message tracing is on in send responses"`                             // TRACE_ON in send responses; default true
	BrokerPermission  int    `prop:"brokerPermission" help:"permission bits: READ 4 | WRITE 2 | INHERIT 1 (6 = read and write)"`      // PermName bits: READ 4 | WRITE 2 | INHERIT 1; default 6

	// Network.
	NamesrvAddr  string `prop:"namesrvAddr" group:"network" help:"name servers, host:port;host:port (default $NAMESRV_ADDR)"`     // "host:port;host:port"; default $NAMESRV_ADDR
	ListenPort   int    `prop:"listenPort" help:"remoting port clients connect to (0 = any free port)"`                           // remoting port; default 10911 (0 = any free port)
	BrokerIP1    string `prop:"brokerIP1" help:"IPv4 address advertised to name servers and clients"`                             // IPv4 advertised to name servers and stored as store host; default 127.0.0.1
	BrokerIP2    string `prop:"brokerIP2" help:"IPv4 address advertised for HA (default brokerIP1)"`                              // IPv4 advertised for HA; default brokerIP1
	HAListenPort int    `prop:"haListenPort" group:"ha" help:"classic HA port slaves connect to (0 = listenPort+1)"`              // classic HA port; 0 = listenPort+1
	HTTPPort     int    `prop:"httpPort" group:"operations" help:"HTTP port for /status, /metrics and the status page (0 = off)"` // ours: metrics/status HTTP port, 0 = off
	// The HTTP port's protection (ours; package internal/opshttp). httpBindAddress is the IP it
	// binds: loopback by default, 0.0.0.0 (or a private address) for a remote Prometheus.
	// httpAuthToken, when set, is required as "Authorization: Bearer <token>" on /status,
	// /metrics and pprof (not on the page's static files). enablePprof serves Go's
	// /debug/pprof, to loopback clients only, profiles and traces capped at 60 s.
	HTTPBindAddress string `prop:"httpBindAddress" help:"IP the HTTP port binds"`                                           // default 127.0.0.1
	HTTPAuthToken   string `prop:"httpAuthToken" help:"bearer token required on /status, /metrics and pprof (\"\" = none)"` // default "" = no token
	EnablePprof     bool   `prop:"enablePprof" help:"serve /debug/pprof on the HTTP port, to loopback clients only"`        // default false

	// Local proxy (Apache's "local mode", mqbroker --enable-proxy): the RocketMQ 5 gRPC proxy
	// (package proxy) runs inside the broker process on grpcServerPort, with the broker's name
	// servers, cluster name, ACL file and account. Default off; port 8081. proxyConfigPath
	// (ours) names an rmq-proxy.json whose keys override those (metrics, TLS, ...).
	EnableProxy     bool   `prop:"enableProxy" alias:"enable-proxy" group:"proxy" help:"also run the RocketMQ 5 gRPC proxy in this process (local mode)"`
	GrpcServerPort  int    `prop:"grpcServerPort" help:"gRPC port of the local proxy"`
	ProxyConfigPath string `prop:"proxyConfigPath" help:"rmq-proxy.json whose keys override the local proxy's settings"`

	// MaxProcs (ours): how many CPUs the broker's Go scheduler runs on at once (GOMAXPROCS).
	// 0 = automatic (see Procs): a node of a group whose peers all live on this host gets its
	// share of the CPUs, anything else all of them.
	MaxProcs int `prop:"maxProcs" group:"operations" help:"CPUs the Go scheduler uses (GOMAXPROCS); 0 = automatic"`
	// IoUringEnable (ours): fsyncs of the Raft log and flushes of the store go through an io_uring,
	// so the goroutine waiting for the disk leaves its Go processor to the rest of the broker
	// (internal/uring); false fsyncs directly. Default true; io_uring missing means directly too.
	IoUringEnable bool `prop:"ioUringEnable" group:"store" help:"fsync the leader's Raft log and flush the store through io_uring when available (a follower with nothing left to apply fsyncs its Raft write on its own thread)"`
	// SysmonBackoff (ours): the Go runtime's system monitor backs off while it has nothing to do
	// instead of sleeping until the next system call wakes it (internal/sysmon). mqbroker
	// re-executes itself once at start with GODEBUG=schedtrace=2147483647 for it, unless
	// GODEBUG already sets schedtrace. Default true.
	SysmonBackoff bool `prop:"sysmonBackoff" group:"operations" help:"keep the Go runtime's system monitor out of deep sleep (re-executes once at start with a GODEBUG setting)"`

	// Classic master/slave replication (package ha). A slave follows haMasterAddress, or the
	// master's HA address from the name servers' REGISTER_BROKER answer when it is empty.
	HAMasterAddress         string `prop:"haMasterAddress" group:"ha" help:"master HA address host:port a slave follows (\"\" = learn from name servers)"`                // host:port of the master's HA port; default: learned
	HASendHeartbeatInterval int64  `prop:"haSendHeartbeatInterval" unit:"milliseconds" help:"slave reports and master heartbeats at least this often, ms"`                // slave reports / master heartbeats at least this often, ms; default 5000
	HAHousekeepingInterval  int64  `prop:"haHousekeepingInterval" unit:"milliseconds" help:"close an HA connection silent this long, ms"`                                 // an HA connection silent this long is closed, ms; default 20000
	HATransferBatchSize     int    `prop:"haTransferBatchSize" unit:"bytes" help:"bytes per master-to-slave frame"`                                                       // bytes per master-to-slave frame; default 32768
	HAMaxGapNotInSync       int64  `prop:"haMaxGapNotInSync" alias:"haSlaveFallbehindMax" unit:"bytes" help:"a slave further behind than this many bytes is out of sync"` // a slave further behind (bytes) is not in sync; default 256 MiB

	// Store layout.
	StorePathRootDir          string `prop:"storePathRootDir" group:"store" help:"root directory of the store (commitlog, queues, metadata)"`                                               // default $HOME/store
	StorePathCommitLog        string `prop:"storePathCommitLog" help:"commitlog directory (default <storePathRootDir>/commitlog)"`                                                          // default <storePathRootDir>/commitlog
	MappedFileSizeCommitLog   int64  `prop:"mappedFileSizeCommitLog" alias:"mapedFileSizeCommitLog" unit:"bytes" help:"bytes per commitlog segment file"`                                   // bytes per commitlog segment; default 1 GiB
	MapedFileSizeConsumeQueue int64  `prop:"mapedFileSizeConsumeQueue" alias:"mappedFileSizeConsumeQueue" unit:"bytes" help:"bytes per consume-queue file (rounded up to 20-byte entries)"` // bytes per consume-queue file, rounded up to 20; default 6000000

	// Flushing.
	FlushDiskType          string `prop:"flushDiskType" help:"ASYNC_FLUSH | SYNC_FLUSH: acknowledge sends before or after fsync"`    // ASYNC_FLUSH | SYNC_FLUSH
	FlushIntervalCommitLog int    `prop:"flushIntervalCommitLog" unit:"milliseconds" help:"asynchronous flush period, ms"`           // async flush period, ms; default 500
	SyncFlushTimeout       int64  `prop:"syncFlushTimeout" unit:"milliseconds" help:"SYNC_FLUSH wait before FLUSH_DISK_TIMEOUT, ms"` // SYNC_FLUSH wait before FLUSH_DISK_TIMEOUT, ms; default 5000

	// Topics, groups, messages.
	AutoCreateTopicEnable       bool   `prop:"autoCreateTopicEnable" group:"messages" help:"create topics on first send (and the TBW102 template topic)"` // create TBW102 and topics on first send; default true
	AutoCreateSubscriptionGroup bool   `prop:"autoCreateSubscriptionGroup" help:"create consumer groups on first use"`                                    // default true
	DefaultTopicQueueNums       int    `prop:"defaultTopicQueueNums" help:"queues of an auto-created topic"`                                              // queues of TBW102; default 8
	MaxMessageSize              int    `prop:"maxMessageSize" unit:"bytes" help:"largest message body (or whole batch), bytes"`                           // body (or whole batch) limit, bytes; default 4 MiB
	MessageDelayLevel           string `prop:"messageDelayLevel" help:"delay of each delay level, space-separated (1s 5s ... 2h)"`                        // space-separated durations (s, m, h, d)

	// Transactions (RocketMQ's keys): a half message unresolved for transactionTimeOut ms is
	// checked back with its producer group every transactionCheckInterval ms, at most
	// transactionCheckMax times, then discarded.
	TransactionTimeOut       int64 `prop:"transactionTimeOut" unit:"milliseconds" help:"age of an unresolved half message before its first check-back, ms"` // ms; default 6000
	TransactionCheckInterval int64 `prop:"transactionCheckInterval" unit:"milliseconds" help:"period of transaction check-backs, ms"`                       // ms; default 60000
	TransactionCheckMax      int   `prop:"transactionCheckMax" help:"check-backs before an unresolved half message is discarded"`                           // default 15

	// Retention.
	DeleteWhen            string `prop:"deleteWhen" group:"store" help:"hour(s) of day expired files are deleted, \"04\" or \"04;16\""`                   // hours of day to delete expired files, "04" or "04;16"
	FileReservedTime      int    `prop:"fileReservedTime" unit:"hours" help:"hours a commitlog file is kept after its last write"`                        // hours; default 72
	DiskMaxUsedSpaceRatio int    `prop:"diskMaxUsedSpaceRatio" unit:"percent" help:"disk usage percent above which old files are deleted early (10..95)"` // percent, 10..95; default 75

	// Index.
	MessageIndexEnable bool `prop:"messageIndexEnable" help:"index messages by key for queryMsgByKey"` // default true
	MaxHashSlotNum     int  `prop:"maxHashSlotNum" help:"hash slots per index file"`                   // default 5000000
	MaxIndexNum        int  `prop:"maxIndexNum" help:"entries per index file"`                         // default 20000000

	// Consumers and clients.
	LongPollingEnable     bool  `prop:"longPollingEnable" group:"messages" help:"hold pulls with no new message until one arrives"`    // default true
	ShortPollingTimeMills int64 `prop:"shortPollingTimeMills" unit:"milliseconds" help:"pull suspension when long polling is off, ms"` // pull suspend when long polling is off, ms; default 1000
	SlaveReadEnable       bool  `prop:"slaveReadEnable" help:"let consumers read from slaves when the master is far behind in memory"` // default false
	// LongPollingMaxMillis (ours) caps how long a pull (the client's suspendTimeoutMillis) or a
	// POP (pollTime) is held, whatever the client asks (clients ask 15-30 s). Default 60000.
	LongPollingMaxMillis int64 `prop:"longPollingMaxMillis" unit:"milliseconds" help:"longest hold of a pull or POP, whatever the client asks, ms"`
	// EnablePropertyFilter lets consumers subscribe with SQL92 expressions over message
	// properties (RocketMQ's key); default false, as RocketMQ.
	EnablePropertyFilter bool `prop:"enablePropertyFilter" help:"allow SQL92 subscriptions over message properties"`
	// AccessMessageInMemoryMaxRatio: with slaveReadEnable, a pull reading further behind the
	// commitlog end than this percentage of physical RAM is told to read from a slave; default 40.
	AccessMessageInMemoryMaxRatio int   `prop:"accessMessageInMemoryMaxRatio" unit:"percent" help:"RAM percent behind the end past which pulls are sent to a slave"`
	ClientChannelExpiredTimeout   int64 `prop:"clientChannelExpiredTimeout" alias:"channelExpiredTimeout" unit:"milliseconds" help:"drop client connections silent this long, ms"` // drop silent client channels, ms; default 120000
	FlushConsumerOffsetInterval   int   `prop:"flushConsumerOffsetInterval" unit:"milliseconds" help:"how often consumer offsets are persisted, ms"`                               // persist consumer offsets, ms; default 5000

	// Name server registration.
	RegisterNameServerPeriod int `prop:"registerNameServerPeriod" group:"network" unit:"milliseconds" help:"period of registrations with the name servers, ms"` // ms; default 30000
	// CompressedRegister (RocketMQ's key): REGISTER_BROKER bodies are sent zlib-compressed
	// (header compressed=true). Default false; a body over 1 MiB of JSON is compressed anyway.
	CompressedRegister bool `prop:"compressedRegister" help:"zlib-compress REGISTER_BROKER bodies"`

	// Metadata at scale and the control plane without ACL (ours).
	// MetadataFlushIntervalMs: changes to topics.json and subscriptionGroup.json within this
	// many ms of the table's last write are coalesced into one write at most this much later
	// (written at shutdown too), and a name-server registration triggered by a topic change
	// waits at least this long after the previous one, so creating N topics costs O(N) in all.
	// An isolated change is still written and registered at once. 0 = every change at once.
	MetadataFlushIntervalMs int64 `prop:"metadataFlushIntervalMs" group:"store" unit:"milliseconds" help:"coalesce topic/group table writes and registrations within this many ms"` // default 200
	// AllowUnauthenticatedRaftAdmin: with aclEnable=false, the Raft membership and leadership
	// requests (TRANSFER_RAFT_LEADER, ADD_RAFT_PEER, REMOVE_RAFT_PEER; mqadmin transferLeader,
	// addPeer, removePeer) are refused unless this is true: anyone reaching the port could
	// otherwise add a voter of their own, which then receives the whole log. With ACL on they
	// need an admin account whatever this says.
	AllowUnauthenticatedRaftAdmin bool `prop:"allowUnauthenticatedRaftAdmin" group:"security" help:"allow Raft membership/leadership requests without ACL"` // default false

	// DLedger (Raft) mode.
	EnableDLegerCommitLog bool   `prop:"enableDLegerCommitLog" group:"dledger" help:"replicate the commitlog with Raft (DLedger mode)"` // default false
	DLegerGroup           string `prop:"dLegerGroup" help:"Raft group name, usually = brokerName"`                                      // Raft group name, usually = brokerName
	DLegerPeers           string `prop:"dLegerPeers" help:"group members, id-host:port;... (n0-127.0.0.1:40911;n1-...)"`                // "n0-127.0.0.1:40911;n1-127.0.0.1:40912"
	DLegerSelfID          string `prop:"dLegerSelfId" help:"this node's id in dLegerPeers"`                                             // this node's id in dLegerPeers
	PreferredLeaderID     string `prop:"preferredLeaderId" help:"peer id to hand leadership to once it is healthy and caught up"`       // optional peer id the leader hands leadership to once it is healthy and caught up
	// DLegerJoin (ours): a node added to a running group. With no Raft state yet it does not
	// bootstrap from dLegerPeers but waits for the leader's AddVoter (mqadmin addPeer). Its own
	// dLegerPeers must list itself (its position gives its slave brokerId); the other members'
	// lists need not change, since dLegerPeers only seeds a brand-new group.
	DLegerJoin bool `prop:"dLegerJoin" help:"join a running group through mqadmin addPeer instead of bootstrapping"`

	// Raft tuning (ours; DLedger has its own, differently named knobs). 0 = the dledger
	// package's default (dledger.Default*): 500 ms heartbeat/election/lease, 50 ms commit,
	// snapshot every 120 s or 8192 entries, 10240 trailing entries, raft-wal segments of 64 MiB;
	// an empty dLegerLogStore is the broker's choice (broker.raftLogStore: the store the data
	// directory holds, else commitlog).
	DLegerHeartbeatTimeoutMs   int64  `prop:"dLegerHeartbeatTimeoutMs" unit:"milliseconds" help:"follower campaigns after [t, 2t) without a heartbeat, ms (0 = 500)"`          // follower starts an election after [t, 2t) without a heartbeat
	DLegerElectionTimeoutMs    int64  `prop:"dLegerElectionTimeoutMs" unit:"milliseconds" help:"candidate waits [t, 2t) for votes, ms (0 = 500)"`                              // candidate waits [t, 2t) for votes; >= heartbeat
	DLegerLeaderLeaseTimeoutMs int64  `prop:"dLegerLeaderLeaseTimeoutMs" unit:"milliseconds" help:"leader steps down after this long without quorum contact, ms (0 = 500)"`    // leader steps down without quorum contact for t; <= heartbeat
	DLegerCommitTimeoutMs      int64  `prop:"dLegerCommitTimeoutMs" unit:"milliseconds" help:"idle followers learn the commit index within this, ms (0 = 50)"`                 // idle followers learn the commit index within t
	DLegerSnapshotIntervalSec  int64  `prop:"dLegerSnapshotIntervalSec" unit:"seconds" help:"how often to check whether to snapshot, seconds (0 = 120)"`                       // how often to check whether to snapshot, seconds
	DLegerSnapshotThreshold    int64  `prop:"dLegerSnapshotThreshold" unit:"entries" help:"snapshot once this many entries follow the last one (0 = 8192)"`                    // snapshot once this many entries are past the last one
	DLegerLogStore             string `prop:"dLegerLogStore" help:"Raft log store: commitlog | wal | bolt (\"\" = the store the node's data directory holds, else commitlog)"` // commitlog | wal | bolt; "" = what the data directory holds, else commitlog
	// SendTraceEnable: DLedger mode records where each send's time goes (the batcher, Raft, the
	// followers' writes, the apply) and serves the breakdown at /debug/sendtrace on the HTTP port.
	SendTraceEnable bool `prop:"sendTraceEnable" help:"DLedger mode: break each send's latency into its steps, served at /debug/sendtrace"` // default false
	// DLegerFastFailover: followers probe the leader's Raft port and campaign at once when its
	// process is gone (connection closed, dial refused) instead of after the heartbeat timeout.
	DLegerFastFailover     bool  `prop:"dLegerFastFailover" help:"followers campaign at once when the leader's process is gone"` // default true
	DLegerTrailingLogs     int64 `prop:"dLegerTrailingLogs" unit:"entries" help:"entries kept after a snapshot (0 = 10240)"`     // entries kept in the log after a snapshot; a node further behind gets the snapshot
	DLegerWalSegmentSizeMB int64 `prop:"dLegerWalSegmentSizeMB" unit:"MiB" help:"raft-wal segment size, MiB (0 = 64)"`           // raft-wal segment size, MiB (the log is truncated in whole segments)
	DLegerLogCacheMB       int64 `prop:"dLegerLogCacheMB" unit:"MiB" help:"newest Raft entries kept in memory, MiB"`             // newest Raft entries kept in memory, MiB (the newest 8 whatever their size)
	// DLegerSerialLeaderWrite: the leader fsyncs its copy of new entries before replicating them
	// (hashicorp/raft's own order) instead of in parallel with the followers; default false.
	DLegerSerialLeaderWrite bool `prop:"dLegerSerialLeaderWrite" help:"leader fsyncs new entries before replicating them"`
	// Group commit on the leader (dledger.Batcher): concurrent sends coalesce into one Raft
	// entry of at most dLegerBatchMaxBytes / dLegerBatchMaxItems; up to dLegerBatchMaxInFlight
	// entries are in Raft at once; with dLegerBatchLingerMs > 0 a new entry waits up to that
	// long for more sends, but only while another entry is in flight. 0 = dledger's default
	// (4 MiB, 4096, 4, no linger).
	DLegerBatchMaxBytes    int64 `prop:"dLegerBatchMaxBytes" unit:"bytes" help:"largest group-commit entry, bytes (0 = 4 MiB)"`
	DLegerBatchMaxItems    int64 `prop:"dLegerBatchMaxItems" help:"most sends per group-commit entry (0 = 4096)"`
	DLegerBatchMaxInFlight int64 `prop:"dLegerBatchMaxInFlight" help:"group-commit entries in Raft at once (0 = 4)"`
	DLegerBatchLingerMs    int64 `prop:"dLegerBatchLingerMs" unit:"milliseconds" help:"wait this long for more sends while an entry is in flight, ms (0 = none)"`

	// Access control (acl/; docs/operations.md "ACL"). aclEnable is RocketMQ's key; RocketMQ reads the
	// accounts from conf/plain_acl.yml, here aclConfigFile names the file (required with
	// aclEnable). accessKey/secretKey (ours) are the broker's own account, which signs its
	// requests to name servers (REGISTER_BROKER) and to its Raft leader (forwarded writes): an
	// admin account of the ACL files there. No credentials are built in.
	AclEnable     bool   `prop:"aclEnable" group:"security" help:"check every request's signature against aclConfigFile"` // default false
	AclConfigFile string `prop:"aclConfigFile" help:"accounts file (plain_acl.yml format), reloaded when it changes"`     // plain_acl.yml-compatible file, reloaded when it changes
	AccessKey     string `prop:"accessKey" help:"this broker's own access key, signs its requests (\"\" = unsigned)"`     // the broker's own access key; "" = sign nothing
	SecretKey     string `prop:"secretKey" help:"secret key of accessKey"`                                                // its secret key

	// Peer authentication (ours; docs/security.md "Peer links"): a group secret every Raft
	// connection proves (peerauth handshake) before any RPC, and the classic HA link's key
	// when ACL is off (with aclEnable and accessKey the HA link proves the broker account
	// instead). Hex (e.g. `openssl rand -hex 32`) or a raw string of at least 16 bytes;
	// peerSecretFile (preferred) names a file holding it, trimmed. Both empty: off.
	PeerSecret     string `prop:"peerSecret" help:"group secret every Raft/HA peer connection proves (hex or >= 16 bytes)"`
	PeerSecretFile string `prop:"peerSecretFile" help:"file holding peerSecret (preferred over the flag)"`
	// TLS on the remoting port, under RocketMQ's TlsSystemConfig names (there JVM properties):
	// tls.server.mode is disabled (default here; RocketMQ's is permissive), permissive (TLS and
	// plaintext on the one port, told apart by the first byte) or enforcing (TLS only). A mode
	// other than disabled needs the PEM certificate chain and key; the broker refuses to start
	// without them. tls.enable makes the broker's own connections (to name servers, its Raft
	// leader, its master) TLS; tls.client.authServer verifies their certificates against
	// tls.client.trustCertPath (system roots when empty), off by default as in RocketMQ.
	TLSServerMode          string `prop:"tls.server.mode" help:"TLS on the remoting port: disabled | permissive | enforcing"`          // disabled | permissive | enforcing; default disabled
	TLSServerCertPath      string `prop:"tls.server.certPath" help:"PEM certificate (chain) the remoting port presents"`               // PEM certificate (chain) the port presents
	TLSServerKeyPath       string `prop:"tls.server.keyPath" help:"PEM private key of tls.server.certPath"`                            // its PEM private key
	TLSEnable              bool   `prop:"tls.enable" help:"outgoing remoting connections (name servers, leader, master) use TLS"`      // outgoing remoting connections use TLS; default false
	TLSClientAuthServer    bool   `prop:"tls.client.authServer" help:"verify the certificates of outgoing TLS connections"`            // verify the peer's certificate; default false
	TLSClientTrustCertPath string `prop:"tls.client.trustCertPath" help:"PEM CA file for tls.client.authServer (\"\" = system roots)"` // PEM CA(s) for that check; "" = system roots
	// MaxConnections (ours) bounds the remoting port's open connections; one more is closed at
	// accept with a (rate-limited) log line. Default 10000; -1 = unbounded.
	MaxConnections int `prop:"maxConnections" help:"most open remoting connections (-1 = unbounded)"`

	// Ours.
	LogLevel string `prop:"logLevel" group:"operations" help:"debug | info | warn | error"` // debug | info | warn | error; default info
	// LogFormat (ours) picks the log encoding: text (hclog's line format) or json (one object
	// per line, for log shippers).
	LogFormat string `prop:"logFormat" help:"text | json (one object per line)"` // text | json; default text
	// ShutdownDrainMaxMillis (ours, DLedger mode) bounds how long a stopping node keeps serving
	// (forwarding) the producers that still send to it after it handed leadership off and
	// unregistered: they learn the new route only at their next refresh, every 30 s. It stops
	// as soon as no send arrived for a second. 0 = no drain.
	ShutdownDrainMaxMillis int64 `prop:"shutdownDrainMaxMillis" unit:"milliseconds" help:"DLedger: keep forwarding late sends after stepping down for at most this, ms"` // default 35000
	// StrictConfig (ours): an unknown key in the properties file stops start-up (exit status 2)
	// instead of being logged as a warning. Default false, as RocketMQ ignores such keys.
	StrictConfig bool `prop:"strictConfig" help:"an unknown key in the configuration file stops start-up (exit status 2)"`
}

// NewBroker returns a Broker holding RocketMQ's defaults (§12 of the protocol notes). Derived
// values (haListenPort, storePathCommitLog, brokerIP2) stay zero until Normalize.
//
// brokerIP1 defaults to 127.0.0.1, not (as in RocketMQ) the first non-loopback IPv4 address:
// this project runs on one host, and a deterministic address keeps msgIds stable in tests.
// Set brokerIP1 explicitly for multi-host deployments.
func NewBroker() *Broker {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "DEFAULT_BROKER"
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "."
	}
	return &Broker{
		BrokerClusterName: "DefaultCluster",
		BrokerName:        host,
		BrokerID:          0,
		BrokerRole:        RoleAsyncMaster,
		RegionID:          "DefaultRegion",
		TraceOn:           true,
		BrokerPermission:  6,

		NamesrvAddr: os.Getenv("NAMESRV_ADDR"),
		ListenPort:  10911,
		BrokerIP1:   "127.0.0.1",

		HTTPBindAddress: "127.0.0.1",

		HASendHeartbeatInterval: 5000,
		HAHousekeepingInterval:  20000,
		HATransferBatchSize:     32 << 10,
		HAMaxGapNotInSync:       256 << 20,

		StorePathRootDir:          filepath.Join(home, "store"),
		MappedFileSizeCommitLog:   1 << 30,
		MapedFileSizeConsumeQueue: 300000 * 20,

		FlushDiskType:          AsyncFlush,
		FlushIntervalCommitLog: 500,
		SyncFlushTimeout:       5000,

		AutoCreateTopicEnable:       true,
		AutoCreateSubscriptionGroup: true,
		DefaultTopicQueueNums:       8,
		MaxMessageSize:              4 << 20,
		MessageDelayLevel:           DefaultMessageDelayLevel,

		TransactionTimeOut:       6000,
		TransactionCheckInterval: 60000,
		TransactionCheckMax:      15,

		DeleteWhen:            "04",
		FileReservedTime:      72,
		DiskMaxUsedSpaceRatio: 75,

		MessageIndexEnable: true,
		MaxHashSlotNum:     5000000,
		MaxIndexNum:        20000000,

		LongPollingEnable:             true,
		DLegerFastFailover:            true,
		IoUringEnable:                 true,
		SysmonBackoff:                 true,
		AccessMessageInMemoryMaxRatio: 40,
		ShortPollingTimeMills:         1000,
		LongPollingMaxMillis:          60000,
		ClientChannelExpiredTimeout:   120000,
		FlushConsumerOffsetInterval:   5000,

		RegisterNameServerPeriod: 30000,
		MetadataFlushIntervalMs:  200,

		GrpcServerPort: 8081,

		LogLevel:               "info",
		LogFormat:              "text",
		ShutdownDrainMaxMillis: 35000,
		TLSServerMode:          "disabled",
		MaxConnections:         10000,
	}
}

// LoadBroker builds the broker configuration from defaults, the file named by -c/--config and
// the flags in args (without the program name; e.g. os.Args[1:]). Flags: -c/--config,
// -n/--namesrvAddr, and --<key> for every key. It returns warnings for the caller to log
// (unknown keys, values it adjusted) and an error naming the key for any bad value, or ErrHelp.
func LoadBroker(args []string) (*Broker, []string, error) {
	b := NewBroker()
	w, err := load("mqbroker", b, brokerShorthands, args)
	if err != nil {
		return nil, w, err
	}
	return b, w, nil
}

var brokerShorthands = map[string]string{"namesrvAddr": "n"}

// BrokerUsage is the flag help of mqbroker.
func BrokerUsage() string { return usage("mqbroker", NewBroker(), brokerShorthands) }

// Normalize fills the values derived from other keys: haListenPort (listenPort+1),
// storePathCommitLog (<storePathRootDir>/commitlog), brokerIP2 (brokerIP1), the consume-queue
// file size rounded up to whole 20-byte units, and brokerId 0 for masters (RocketMQ forces it).
// It returns a warning for each value it changed against the user's wish. LoadBroker calls it;
// call it yourself after building a Broker by hand.
func (b *Broker) Normalize() []string { return b.normalize() }

func (b *Broker) strict() bool { return b.StrictConfig }

func (b *Broker) normalize() []string {
	var w []string
	if b.HAListenPort == 0 && b.ListenPort != 0 {
		b.HAListenPort = b.ListenPort + 1
	}
	if b.StorePathCommitLog == "" {
		b.StorePathCommitLog = filepath.Join(b.StorePathRootDir, "commitlog")
	}
	if b.BrokerIP2 == "" {
		b.BrokerIP2 = b.BrokerIP1
	}
	if r := b.MapedFileSizeConsumeQueue % 20; r != 0 && b.MapedFileSizeConsumeQueue > 0 {
		b.MapedFileSizeConsumeQueue += 20 - r
	}
	if !b.EnableDLegerCommitLog && b.BrokerRole != RoleSlave && b.BrokerID != 0 {
		w = append(w, "brokerId: "+b.BrokerRole+" forces brokerId 0")
		b.BrokerID = 0
	}
	return w
}

// IsMaster reports whether the classic role is a master role.
func (b *Broker) IsMaster() bool { return b.BrokerRole != RoleSlave }

// NamesrvAddrs splits namesrvAddr at ';' (RocketMQ's separator), trimming blanks and dropping
// empty entries.
func (b *Broker) NamesrvAddrs() []string { return splitList(b.NamesrvAddr) }

// ListenAddr is the remoting address the broker binds: brokerIP1:listenPort.
func (b *Broker) ListenAddr() string { return joinHostPort(b.BrokerIP1, b.ListenPort) }

// HAAddr is the classic HA address advertised to name servers: brokerIP2:haListenPort.
func (b *Broker) HAAddr() string { return joinHostPort(b.BrokerIP2, b.HAListenPort) }

// FlushInterval is flushIntervalCommitLog as a duration.
func (b *Broker) FlushInterval() time.Duration { return ms(int64(b.FlushIntervalCommitLog)) }

// SyncFlushWait is syncFlushTimeout as a duration.
func (b *Broker) SyncFlushWait() time.Duration { return ms(b.SyncFlushTimeout) }

// RegisterPeriod is registerNameServerPeriod as a duration.
func (b *Broker) RegisterPeriod() time.Duration { return ms(int64(b.RegisterNameServerPeriod)) }

// ShortPollingWait is shortPollingTimeMills as a duration.
func (b *Broker) ShortPollingWait() time.Duration { return ms(b.ShortPollingTimeMills) }

// ClientChannelExpiry is clientChannelExpiredTimeout as a duration.
func (b *Broker) ClientChannelExpiry() time.Duration { return ms(b.ClientChannelExpiredTimeout) }

// ConsumerOffsetFlushInterval is flushConsumerOffsetInterval as a duration.
func (b *Broker) ConsumerOffsetFlushInterval() time.Duration {
	return ms(int64(b.FlushConsumerOffsetInterval))
}

// FileReserved is fileReservedTime (hours) as a duration.
func (b *Broker) FileReserved() time.Duration { return time.Duration(b.FileReservedTime) * time.Hour }

// DelayLevels parses messageDelayLevel: element i is the delay of level i+1.
func (b *Broker) DelayLevels() ([]time.Duration, error) { return parseDelayLevels(b.MessageDelayLevel) }

// DeleteHours parses deleteWhen ("04" or "04;16") into hours of the day.
func (b *Broker) DeleteHours() ([]int, error) { return parseDeleteWhen(b.DeleteWhen) }

// Peer is one member of dLegerPeers.
type Peer struct {
	ID   string // e.g. "n0"
	Addr string // host:port of its Raft transport
}

// DLegerPeerList parses dLegerPeers ("n0-127.0.0.1:40911;n1-127.0.0.1:40912"): each entry is
// split at its first '-' into id and address, as DLedger does.
func (b *Broker) DLegerPeerList() ([]Peer, error) { return parsePeers(b.DLegerPeers) }

// SelfPeer returns the dLegerPeers entry whose id is dLegerSelfId.
func (b *Broker) SelfPeer() (Peer, error) {
	peers, err := b.DLegerPeerList()
	if err != nil {
		return Peer{}, err
	}
	for _, p := range peers {
		if p.ID == b.DLegerSelfID {
			return p, nil
		}
	}
	return Peer{}, keyErr("dLegerSelfId", "%q is not in dLegerPeers", b.DLegerSelfID)
}

// DLegerHeartbeatTimeout is dLegerHeartbeatTimeoutMs as a duration (0 = dledger's default).
func (b *Broker) DLegerHeartbeatTimeout() time.Duration { return ms(b.DLegerHeartbeatTimeoutMs) }

// DLegerElectionTimeout is dLegerElectionTimeoutMs as a duration (0 = dledger's default).
func (b *Broker) DLegerElectionTimeout() time.Duration { return ms(b.DLegerElectionTimeoutMs) }

// DLegerLeaderLeaseTimeout is dLegerLeaderLeaseTimeoutMs as a duration (0 = dledger's default).
func (b *Broker) DLegerLeaderLeaseTimeout() time.Duration { return ms(b.DLegerLeaderLeaseTimeoutMs) }

// DLegerCommitTimeout is dLegerCommitTimeoutMs as a duration (0 = dledger's default).
func (b *Broker) DLegerCommitTimeout() time.Duration { return ms(b.DLegerCommitTimeoutMs) }

// DLegerBatchLinger is dLegerBatchLingerMs as a duration (0 = no linger).
func (b *Broker) DLegerBatchLinger() time.Duration { return ms(b.DLegerBatchLingerMs) }

// DLegerWalSegmentSize is dLegerWalSegmentSizeMB in bytes (0 = dledger's default).
func (b *Broker) DLegerWalSegmentSize() int { return int(b.DLegerWalSegmentSizeMB) << 20 }

// DLegerLogCacheBytes is dLegerLogCacheMB in bytes (0 = dledger's default).
func (b *Broker) DLegerLogCacheBytes() int { return int(b.DLegerLogCacheMB) << 20 }

// DLegerSnapshotInterval is dLegerSnapshotIntervalSec as a duration (0 = dledger's default).
func (b *Broker) DLegerSnapshotInterval() time.Duration {
	return time.Duration(b.DLegerSnapshotIntervalSec) * time.Second
}

// PeerKey is the group secret from peerSecret or peerSecretFile (nil: peer authentication off).
func (b *Broker) PeerKey() ([]byte, error) {
	return peerauth.LoadSecret(b.PeerSecret, b.PeerSecretFile)
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
