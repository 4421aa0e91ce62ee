package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"rocketraft/acl"
	"rocketraft/remoting"
)

// Validate checks every key and returns all problems joined (each a *KeyError naming its key),
// or nil. It does not modify b; run Normalize first.
func (b *Broker) Validate() error {
	var errs []error
	add := func(key, format string, args ...any) { errs = append(errs, keyErr(key, format, args...)) }

	nonEmpty := map[string]string{
		"brokerClusterName": b.BrokerClusterName,
		"brokerName":        b.BrokerName,
		"storePathRootDir":  b.StorePathRootDir,
		"regionId":          b.RegionID,
	}
	for _, k := range []string{"brokerClusterName", "brokerName", "storePathRootDir", "regionId"} {
		if strings.TrimSpace(nonEmpty[k]) == "" {
			add(k, "must not be empty")
		}
	}
	if b.BrokerID < 0 {
		add("brokerId", "must be >= 0, got %d", b.BrokerID)
	}
	if !b.EnableDLegerCommitLog {
		switch b.BrokerRole {
		case RoleAsyncMaster, RoleSyncMaster:
		case RoleSlave:
			if b.BrokerID <= 0 {
				add("brokerId", "a SLAVE needs brokerId > 0, got %d", b.BrokerID)
			}
		default:
			add("brokerRole", "must be one of %s, %s, %s, got %q", RoleAsyncMaster, RoleSyncMaster, RoleSlave, b.BrokerRole)
		}
	}
	if b.BrokerPermission&^0xF != 0 || b.BrokerPermission < 0 {
		add("brokerPermission", "must combine READ 4, WRITE 2, INHERIT 1 (PRIORITY 8), got %d", b.BrokerPermission)
	}

	for _, a := range b.NamesrvAddrs() {
		if err := checkHostPort(a); err != nil {
			add("namesrvAddr", "bad address %q: %v", a, err)
		}
	}
	checkPort(add, "listenPort", b.ListenPort)
	checkPort(add, "haListenPort", b.HAListenPort)
	checkPort(add, "httpPort", b.HTTPPort)
	if err := checkBindAddress(b.HTTPBindAddress); err != nil {
		add("httpBindAddress", "%v", err)
	}
	checkPort(add, "grpcServerPort", b.GrpcServerPort)
	if b.EnableProxy {
		if len(b.NamesrvAddrs()) == 0 {
			add("namesrvAddr", "enableProxy needs the name servers: the proxy finds the brokers through them")
		}
		for k, p := range map[string]int{"listenPort": b.ListenPort, "haListenPort": b.HAListenPort, "httpPort": b.HTTPPort} {
			if p != 0 && p == b.GrpcServerPort {
				add("grpcServerPort", "must differ from %s %d", k, p)
			}
		}
	}
	if b.ListenPort != 0 && b.HAListenPort == b.ListenPort {
		add("haListenPort", "must differ from listenPort %d", b.ListenPort)
	}
	if ip := net.ParseIP(b.BrokerIP1); ip == nil || ip.To4() == nil {
		add("brokerIP1", "must be an IPv4 address (offset msgIds are 32 hex chars), got %q", b.BrokerIP1)
	}
	if b.BrokerIP2 != "" {
		if ip := net.ParseIP(b.BrokerIP2); ip == nil || ip.To4() == nil {
			add("brokerIP2", "must be an IPv4 address, got %q", b.BrokerIP2)
		}
	}

	if b.MappedFileSizeCommitLog < 4096 {
		add("mappedFileSizeCommitLog", "must be >= 4096 bytes, got %d", b.MappedFileSizeCommitLog)
	}
	if b.MapedFileSizeConsumeQueue < 20 || b.MapedFileSizeConsumeQueue%20 != 0 {
		add("mapedFileSizeConsumeQueue", "must be a positive multiple of 20 bytes, got %d", b.MapedFileSizeConsumeQueue)
	}
	switch b.FlushDiskType {
	case AsyncFlush, SyncFlush:
	default:
		add("flushDiskType", "must be %s or %s, got %q", AsyncFlush, SyncFlush, b.FlushDiskType)
	}

	positive := []struct {
		key string
		v   int64
	}{
		{"flushIntervalCommitLog", int64(b.FlushIntervalCommitLog)},
		{"syncFlushTimeout", b.SyncFlushTimeout},
		{"defaultTopicQueueNums", int64(b.DefaultTopicQueueNums)},
		{"maxMessageSize", int64(b.MaxMessageSize)},
		{"fileReservedTime", int64(b.FileReservedTime)},
		{"maxHashSlotNum", int64(b.MaxHashSlotNum)},
		{"maxIndexNum", int64(b.MaxIndexNum)},
		{"shortPollingTimeMills", b.ShortPollingTimeMills},
		{"longPollingMaxMillis", b.LongPollingMaxMillis},
		{"clientChannelExpiredTimeout", b.ClientChannelExpiredTimeout},
		{"flushConsumerOffsetInterval", int64(b.FlushConsumerOffsetInterval)},
		{"registerNameServerPeriod", int64(b.RegisterNameServerPeriod)},
		{"transactionTimeOut", b.TransactionTimeOut},
		{"transactionCheckInterval", b.TransactionCheckInterval},
		{"transactionCheckMax", int64(b.TransactionCheckMax)},
		{"haSendHeartbeatInterval", b.HASendHeartbeatInterval},
		{"haHousekeepingInterval", b.HAHousekeepingInterval},
		{"haTransferBatchSize", int64(b.HATransferBatchSize)},
		{"haMaxGapNotInSync", b.HAMaxGapNotInSync},
	}
	for _, p := range positive {
		if p.v <= 0 {
			add(p.key, "must be > 0, got %d", p.v)
		}
	}
	if b.MetadataFlushIntervalMs < 0 || b.MetadataFlushIntervalMs > 60000 {
		add("metadataFlushIntervalMs", "must be within 0..60000, got %d", b.MetadataFlushIntervalMs)
	}
	if b.HASendHeartbeatInterval > 0 && b.HASendHeartbeatInterval >= b.HAHousekeepingInterval {
		add("haSendHeartbeatInterval", "%d ms must be below haHousekeepingInterval %d ms (an idle connection would be closed between heartbeats)", b.HASendHeartbeatInterval, b.HAHousekeepingInterval)
	}
	if b.HATransferBatchSize > 16<<20 {
		add("haTransferBatchSize", "must be <= 16 MiB (what a slave accepts in one frame), got %d", b.HATransferBatchSize)
	}
	if b.HAMasterAddress != "" {
		if err := checkHostPort(b.HAMasterAddress); err != nil {
			add("haMasterAddress", "bad address %q: %v", b.HAMasterAddress, err)
		}
	}
	if b.DefaultTopicQueueNums > 1024 {
		add("defaultTopicQueueNums", "must be <= 1024, got %d", b.DefaultTopicQueueNums)
	}
	if b.AccessMessageInMemoryMaxRatio < 0 || b.AccessMessageInMemoryMaxRatio > 100 {
		add("accessMessageInMemoryMaxRatio", "must be within 0..100, got %d", b.AccessMessageInMemoryMaxRatio)
	}
	if b.DiskMaxUsedSpaceRatio < 10 || b.DiskMaxUsedSpaceRatio > 95 {
		add("diskMaxUsedSpaceRatio", "must be within 10..95, got %d", b.DiskMaxUsedSpaceRatio)
	}
	if _, err := parseDelayLevels(b.MessageDelayLevel); err != nil {
		errs = append(errs, err)
	}
	if _, err := parseDeleteWhen(b.DeleteWhen); err != nil {
		errs = append(errs, err)
	}
	b.validateACL(add)
	if _, err := b.PeerKey(); err != nil {
		add("peerSecret", "%v", err)
	}
	validateTLS(b.TLSServerMode, b.TLSServerCertPath, b.TLSServerKeyPath, b.TLSClientAuthServer, b.TLSClientTrustCertPath, add)
	if m, _ := remoting.ParseTLSMode(b.TLSServerMode); m == remoting.TLSEnforcing && b.EnableDLegerCommitLog && !b.TLSEnable {
		add("tls.enable", "tls.server.mode=enforcing in DLedger mode needs tls.enable=true: members forward writes to their leader's remoting port")
	}
	if b.MaxConnections == 0 || b.MaxConnections < -1 {
		add("maxConnections", "must be > 0 (or -1 for unbounded), got %d", b.MaxConnections)
	}
	if !validLogLevel(b.LogLevel) {
		add("logLevel", "must be debug, info, warn or error, got %q", b.LogLevel)
	}
	if !validLogFormat(b.LogFormat) {
		add("logFormat", "must be text or json, got %q", b.LogFormat)
	}
	errs = append(errs, b.validateRaftTuning()...)
	if b.MaxProcs < 0 || b.MaxProcs > 4096 {
		errs = append(errs, keyErr("maxProcs", "must be 0 (automatic) to 4096, got %d", b.MaxProcs))
	}
	if b.EnableDLegerCommitLog {
		errs = append(errs, b.validateDLeger()...)
	}
	return joinKeyErrors(errs)
}

func (b *Broker) validateDLeger() []error {
	var errs []error
	if strings.TrimSpace(b.DLegerGroup) == "" {
		errs = append(errs, keyErr("dLegerGroup", "must be set when enableDLegerCommitLog=true"))
	}
	peers, err := parsePeers(b.DLegerPeers)
	if err != nil {
		return append(errs, err)
	}
	if len(peers) == 0 {
		return append(errs, keyErr("dLegerPeers", "must list at least one peer when enableDLegerCommitLog=true"))
	}
	ids := map[string]bool{}
	for _, p := range peers {
		ids[p.ID] = true
	}
	if !ids[b.DLegerSelfID] {
		errs = append(errs, keyErr("dLegerSelfId", "%q is not an id in dLegerPeers", b.DLegerSelfID))
	}
	// Each node checks only its own list: a node added later (dLegerJoin) lists itself after the
	// original members, whose lists need not name it (dLegerPeers seeds a new group only; a
	// running group's membership lives in the Raft log).
	if b.PreferredLeaderID != "" && !ids[b.PreferredLeaderID] {
		errs = append(errs, keyErr("preferredLeaderId", "%q is not an id in dLegerPeers", b.PreferredLeaderID))
	}
	return errs
}

// DefaultDLegerTimeoutMs is what a 0 heartbeat, election or lease timeout stands for (the
// dledger package's defaults; a test there keeps the two in step). Validate needs it to check
// a key set against one left at 0.
const DefaultDLegerTimeoutMs = 500

// validateRaftTuning checks the Raft tuning keys (validated whatever enableDLegerCommitLog says,
// so a typo shows before the mode is switched on). hashicorp/raft refuses timeouts under 5 ms
// (commit 1 ms), a lease longer than the heartbeat timeout and an election timeout shorter than
// it; 0 means the default.
func (b *Broker) validateRaftTuning() []error {
	var errs []error
	add := func(key, format string, args ...any) { errs = append(errs, keyErr(key, format, args...)) }
	for _, k := range []struct {
		key string
		v   int64
		min int64
	}{
		{"dLegerHeartbeatTimeoutMs", b.DLegerHeartbeatTimeoutMs, 5},
		{"dLegerElectionTimeoutMs", b.DLegerElectionTimeoutMs, 5},
		{"dLegerLeaderLeaseTimeoutMs", b.DLegerLeaderLeaseTimeoutMs, 5},
		{"dLegerCommitTimeoutMs", b.DLegerCommitTimeoutMs, 1},
		{"dLegerSnapshotIntervalSec", b.DLegerSnapshotIntervalSec, 1},
		{"dLegerSnapshotThreshold", b.DLegerSnapshotThreshold, 1},
		{"dLegerTrailingLogs", b.DLegerTrailingLogs, 1},
		{"dLegerWalSegmentSizeMB", b.DLegerWalSegmentSizeMB, 1},
		{"dLegerLogCacheMB", b.DLegerLogCacheMB, 1},
		{"dLegerBatchMaxBytes", b.DLegerBatchMaxBytes, 4 << 10},
		{"dLegerBatchMaxItems", b.DLegerBatchMaxItems, 1},
		{"dLegerBatchMaxInFlight", b.DLegerBatchMaxInFlight, 1},
		{"dLegerBatchLingerMs", b.DLegerBatchLingerMs, 0},
	} {
		if k.v < 0 || (k.v != 0 && k.v < k.min) {
			add(k.key, "must be 0 (default) or >= %d, got %d", k.min, k.v)
		}
	}
	eff := func(v int64) int64 {
		if v <= 0 {
			return DefaultDLegerTimeoutMs
		}
		return v
	}
	hb, el, lease := eff(b.DLegerHeartbeatTimeoutMs), eff(b.DLegerElectionTimeoutMs), eff(b.DLegerLeaderLeaseTimeoutMs)
	if lease > hb {
		add("dLegerLeaderLeaseTimeoutMs", "%d ms exceeds the heartbeat timeout %d ms (dLegerHeartbeatTimeoutMs, 0 = %d)", lease, hb, DefaultDLegerTimeoutMs)
	}
	if el < hb {
		add("dLegerElectionTimeoutMs", "%d ms is below the heartbeat timeout %d ms (dLegerHeartbeatTimeoutMs, 0 = %d)", el, hb, DefaultDLegerTimeoutMs)
	}
	// Upper bounds: an entry is held in memory by the leader, its followers and the log cache,
	// and a linger beyond a few milliseconds only adds latency.
	for _, k := range []struct {
		key    string
		v, max int64
	}{
		{"dLegerBatchMaxBytes", b.DLegerBatchMaxBytes, 64 << 20},
		{"dLegerBatchMaxItems", b.DLegerBatchMaxItems, 65536},
		{"dLegerBatchMaxInFlight", b.DLegerBatchMaxInFlight, 64},
		{"dLegerBatchLingerMs", b.DLegerBatchLingerMs, 100},
		{"dLegerLogCacheMB", b.DLegerLogCacheMB, 4096},
	} {
		if k.v > k.max {
			add(k.key, "must be <= %d, got %d", k.max, k.v)
		}
	}
	if b.DLegerWalSegmentSizeMB > 1024 {
		add("dLegerWalSegmentSizeMB", "must be <= 1024, got %d", b.DLegerWalSegmentSizeMB)
	}
	if b.DLegerJoin && !b.EnableDLegerCommitLog {
		add("dLegerJoin", "only means something with enableDLegerCommitLog=true")
	}
	switch b.DLegerLogStore {
	case "", "wal", "bolt", "commitlog":
	default:
		add("dLegerLogStore", "must be commitlog, wal or bolt (empty: the store the data directory holds, else commitlog), got %q", b.DLegerLogStore)
	}
	return errs
}

func parsePeers(s string) ([]Peer, error) {
	var out []Peer
	seen := map[string]bool{}
	for _, e := range splitList(s) {
		id, addr, ok := strings.Cut(e, "-")
		if !ok || id == "" {
			return nil, keyErr("dLegerPeers", "entry %q is not <id>-<host>:<port>", e)
		}
		if err := checkHostPort(addr); err != nil {
			return nil, keyErr("dLegerPeers", "entry %q: %v", e, err)
		}
		if seen[id] {
			return nil, keyErr("dLegerPeers", "duplicate id %q", id)
		}
		seen[id] = true
		out = append(out, Peer{ID: id, Addr: addr})
	}
	return out, nil
}

// parseDelayLevels parses "1s 5s 10s 30s 1m ... 2h" (units s, m, h, d as RocketMQ).
func parseDelayLevels(s string) ([]time.Duration, error) {
	units := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}
	var out []time.Duration
	for _, tok := range strings.Fields(s) {
		u, ok := units[tok[len(tok)-1]]
		n, err := strconv.Atoi(tok[:len(tok)-1])
		if !ok || err != nil || n <= 0 {
			return nil, keyErr("messageDelayLevel", "bad level %q (want <n>s|m|h|d)", tok)
		}
		out = append(out, time.Duration(n)*u)
	}
	if len(out) == 0 {
		return nil, keyErr("messageDelayLevel", "must list at least one level")
	}
	return out, nil
}

// parseDeleteWhen parses "04" or "04;16" into hours 0..23.
func parseDeleteWhen(s string) ([]int, error) {
	var out []int
	for _, h := range splitList(s) {
		n, err := strconv.Atoi(h)
		if err != nil || n < 0 || n > 23 {
			return nil, keyErr("deleteWhen", "bad hour %q (want 00..23, ';'-separated)", h)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, keyErr("deleteWhen", "must list at least one hour")
	}
	return out, nil
}

func checkPort(add func(string, string, ...any), key string, p int) {
	if p < 0 || p > 65535 {
		add(key, "must be within 0..65535, got %d", p)
	}
}

func checkHostPort(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return err
	}
	if host == "" {
		return fmt.Errorf("missing host")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("bad port %q", port)
	}
	return nil
}

func validLogLevel(s string) bool {
	switch strings.ToLower(s) {
	case "debug", "info", "warn", "error":
		return true
	}
	return false
}

// validLogFormat accepts logFormat's values; empty means text (configs built in code).
func validLogFormat(s string) bool {
	switch strings.ToLower(s) {
	case "", "text", "json":
		return true
	}
	return false
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ";") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func joinHostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// validateACL checks the access-control keys: a file with aclEnable, both halves of the
// broker's own key pair and real (non-placeholder) keys, and an account for a DLedger node,
// which must sign the writes it forwards to its leader.
func (b *Broker) validateACL(add func(key, format string, args ...any)) {
	if b.AclEnable && strings.TrimSpace(b.AclConfigFile) == "" {
		add("aclConfigFile", "aclEnable=true needs the accounts file (plain_acl.yml format)")
	}
	switch {
	case b.AccessKey == "" && b.SecretKey == "":
		if b.AclEnable && b.EnableDLegerCommitLog {
			add("accessKey", "with aclEnable a DLedger node signs the writes it forwards to its leader: set accessKey and secretKey to an admin account of the ACL file")
		}
	case b.AccessKey == "" || b.SecretKey == "":
		add("accessKey", "accessKey and secretKey must be set together")
	default:
		if err := acl.CheckCredentials(b.AccessKey, b.SecretKey); err != nil {
			add("secretKey", "%v", err)
		}
	}
}

// checkBindAddress accepts "" (every interface) or an IP address: what an HTTP port binds.
func checkBindAddress(a string) error {
	if a == "" {
		return nil
	}
	if _, err := netip.ParseAddr(a); err != nil {
		return fmt.Errorf("must be an IP address (127.0.0.1, 0.0.0.0, ::), got %q", a)
	}
	return nil
}

// validateTLS checks the tls.* keys of a remoting port: a known mode, and a certificate and
// key whenever the mode is not disabled (whether they load is checked when the port opens).
func validateTLS(mode, cert, key string, authServer bool, trust string, add func(key, format string, args ...any)) {
	m, err := remoting.ParseTLSMode(mode)
	if err != nil {
		add("tls.server.mode", "%v", err)
		return
	}
	if m != remoting.TLSDisabled && (strings.TrimSpace(cert) == "" || strings.TrimSpace(key) == "") {
		add("tls.server.certPath", "tls.server.mode=%s needs tls.server.certPath and tls.server.keyPath", m)
	}
	if trust != "" && !authServer {
		add("tls.client.trustCertPath", "is only used with tls.client.authServer=true")
	}
}
