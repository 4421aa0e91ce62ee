package config

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"rocketraft/dledger"
)

// rocketmqDLegerExample is Apache RocketMQ's own DLedger example (conf/dledger/broker-n0.conf),
// spaces around '=' and a key this broker does not know included: it must load unchanged.
const rocketmqDLegerExample = `brokerClusterName = RaftCluster
brokerName=RaftNode00
listenPort=30911
namesrvAddr=127.0.0.1:9876
storePathRootDir=/tmp/rmqstore/node00
storePathCommitLog=/tmp/rmqstore/node00/commitlog
enableDLegerCommitLog=true
dLegerGroup=RaftNode00
dLegerPeers=n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913
## must be unique
dLegerSelfId=n0
sendMessageThreadPoolNums=16
`

// TestExistingDLegerPropertiesLoad: RocketMQ's DLedger example loads with only the unknown key
// warned about; the Raft tuning keys stay 0 (dledger's defaults).
func TestExistingDLegerPropertiesLoad(t *testing.T) {
	b, w, err := LoadBroker([]string{"-c", writeFile(t, rocketmqDLegerExample)})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if len(w) != 1 || !strings.Contains(w[0], "sendMessageThreadPoolNums") {
		t.Errorf("warnings = %q, want one for sendMessageThreadPoolNums", w)
	}
	if !b.EnableDLegerCommitLog || b.DLegerGroup != "RaftNode00" || b.DLegerSelfID != "n0" ||
		b.BrokerClusterName != "RaftCluster" || b.ListenPort != 30911 {
		t.Errorf("values not applied: %+v", b)
	}
	self, err := b.SelfPeer()
	if err != nil || self != (Peer{"n0", "127.0.0.1:40911"}) {
		t.Errorf("SelfPeer = %v, %v", self, err)
	}
	if b.DLegerHeartbeatTimeout() != 0 || b.DLegerElectionTimeout() != 0 || b.DLegerLeaderLeaseTimeout() != 0 ||
		b.DLegerCommitTimeout() != 0 || b.DLegerSnapshotInterval() != 0 || b.DLegerSnapshotThreshold != 0 || b.DLegerLogStore != "" {
		t.Errorf("raft tuning not left at 0 (= dledger defaults): %+v", b)
	}
}

// TestDLegerHostNamesWithDash: host names containing '-' split at the first '-' only.
func TestDLegerHostNamesWithDash(t *testing.T) {
	b, _, err := LoadBroker([]string{"-c", writeFile(t, "enableDLegerCommitLog=true\ndLegerGroup=g\n"+
		"dLegerPeers=n0-broker-a-0.example:40911;n1-broker-a-1.example:40911;n2-10.0.0.3:40911\ndLegerSelfId=n1\n")})
	if err != nil {
		t.Fatal(err)
	}
	self, err := b.SelfPeer()
	if err != nil || self != (Peer{"n1", "broker-a-1.example:40911"}) {
		t.Errorf("SelfPeer = %v, %v", self, err)
	}
}

// TestDLegerTuningKeys: set keys reach the typed accessors, from a file or a flag.
func TestDLegerTuningKeys(t *testing.T) {
	p := writeFile(t, rocketmqDLegerExample+`dLegerHeartbeatTimeoutMs=1000
dLegerElectionTimeoutMs=1500
dLegerLeaderLeaseTimeoutMs=800
dLegerCommitTimeoutMs=20
dLegerSnapshotIntervalSec=30
dLegerSnapshotThreshold=4096
dLegerLogStore=bolt
`)
	b, _, err := LoadBroker([]string{"-c", p, "--dLegerCommitTimeoutMs=10"})
	if err != nil {
		t.Fatal(err)
	}
	got := []time.Duration{b.DLegerHeartbeatTimeout(), b.DLegerElectionTimeout(), b.DLegerLeaderLeaseTimeout(),
		b.DLegerCommitTimeout(), b.DLegerSnapshotInterval()}
	want := []time.Duration{time.Second, 1500 * time.Millisecond, 800 * time.Millisecond, 10 * time.Millisecond, 30 * time.Second}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("duration %d = %v, want %v", i, got[i], want[i])
		}
	}
	if b.DLegerSnapshotThreshold != 4096 || b.DLegerLogStore != "bolt" {
		t.Errorf("threshold %d, log store %q", b.DLegerSnapshotThreshold, b.DLegerLogStore)
	}
}

// TestDLegerTuningValidation: each bad value is an error naming its key; a value checked
// against a key left at 0 is checked against the default.
func TestDLegerTuningValidation(t *testing.T) {
	cases := []struct {
		props, key string
	}{
		{"dLegerHeartbeatTimeoutMs=-1", "dLegerHeartbeatTimeoutMs"},
		{"dLegerHeartbeatTimeoutMs=3", "dLegerHeartbeatTimeoutMs"},
		{"dLegerElectionTimeoutMs=2", "dLegerElectionTimeoutMs"},
		{"dLegerCommitTimeoutMs=-5", "dLegerCommitTimeoutMs"},
		{"dLegerSnapshotIntervalSec=-1", "dLegerSnapshotIntervalSec"},
		{"dLegerSnapshotThreshold=-1", "dLegerSnapshotThreshold"},
		{"dLegerLogStore=rocksdb", "dLegerLogStore"},
		// lease 600 > default heartbeat 500
		{"dLegerLeaderLeaseTimeoutMs=600", "dLegerLeaderLeaseTimeoutMs"},
		// heartbeat 1000 with default lease 500 is fine, but default election 500 < 1000
		{"dLegerHeartbeatTimeoutMs=1000", "dLegerElectionTimeoutMs"},
		{"dLegerHeartbeatTimeoutMs=1000\ndLegerElectionTimeoutMs=900", "dLegerElectionTimeoutMs"},
		{"dLegerHeartbeatTimeoutMs=200\ndLegerElectionTimeoutMs=200", "dLegerLeaderLeaseTimeoutMs"},
		{"dLegerLeaderLeaseTimeoutMs=x", "dLegerLeaderLeaseTimeoutMs"},
		{"dLegerTrailingLogs=-1", "dLegerTrailingLogs"},
		{"dLegerWalSegmentSizeMB=-1", "dLegerWalSegmentSizeMB"},
		{"dLegerWalSegmentSizeMB=2048", "dLegerWalSegmentSizeMB"},
		{"dLegerLogCacheMB=-1", "dLegerLogCacheMB"},
		{"dLegerLogCacheMB=5000", "dLegerLogCacheMB"},
		{"dLegerJoin=yes", "dLegerJoin"},
	}
	for _, c := range cases {
		_, _, err := LoadBroker([]string{"-c", writeFile(t, rocketmqDLegerExample+c.props+"\n")})
		if err == nil || !strings.Contains(err.Error(), c.key+":") {
			t.Errorf("%q: err = %v, want one naming %s", c.props, err, c.key)
		}
	}
	for _, ok := range []string{
		"dLegerHeartbeatTimeoutMs=1000\ndLegerElectionTimeoutMs=1000",
		"dLegerHeartbeatTimeoutMs=200\ndLegerElectionTimeoutMs=200\ndLegerLeaderLeaseTimeoutMs=200",
		"dLegerLeaderLeaseTimeoutMs=250\ndLegerCommitTimeoutMs=1",
		"dLegerLogStore=wal\ndLegerSnapshotIntervalSec=1\ndLegerSnapshotThreshold=1",
		"dLegerTrailingLogs=64\ndLegerWalSegmentSizeMB=2",
		"dLegerLogCacheMB=1",
	} {
		if _, _, err := LoadBroker([]string{"-c", writeFile(t, rocketmqDLegerExample+ok+"\n")}); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

// TestDLegerDefaultsInStep: the default Validate assumes for a 0 timeout is dledger's, and the
// log store names are dledger's.
func TestDLegerDefaultsInStep(t *testing.T) {
	for _, d := range []time.Duration{dledger.DefaultHeartbeatTimeout, dledger.DefaultElectionTimeout, dledger.DefaultLeaderLeaseTimeout} {
		if d != DefaultDLegerTimeoutMs*time.Millisecond {
			t.Errorf("dledger default %v, config assumes %d ms", d, DefaultDLegerTimeoutMs)
		}
	}
	if dledger.LogStoreWAL != "wal" || dledger.LogStoreBolt != "bolt" || dledger.DefaultLogStore != "wal" {
		t.Errorf("log store names changed")
	}
}

// TestShippedDLegerExamples: config/dledger/broker-n{0,1,2}.properties (used by make run) load
// without warnings, form one group and differ only in what must differ.
func TestShippedDLegerExamples(t *testing.T) {
	var peers string
	seen := map[string]bool{}
	for _, n := range []string{"n0", "n1", "n2"} {
		b, w, err := LoadBroker([]string{"-c", "dledger/broker-" + n + ".properties"})
		if err != nil || len(w) != 0 {
			t.Fatalf("%s: %v %q", n, err, w)
		}
		if !b.EnableDLegerCommitLog || b.DLegerSelfID != n || b.BrokerName != "broker-a" || b.DLegerGroup != "broker-a" {
			t.Errorf("%s: %+v", n, b)
		}
		if peers == "" {
			peers = b.DLegerPeers
		} else if b.DLegerPeers != peers {
			t.Errorf("%s: dLegerPeers %q differs from n0's %q", n, b.DLegerPeers, peers)
		}
		for _, k := range []string{b.ListenAddr(), b.StorePathRootDir} {
			if seen[k] {
				t.Errorf("%s: %s shared with another node", n, k)
			}
			seen[k] = true
		}
	}
	// Below Linux's ephemeral range (32768-60999): there, a node's outgoing connection to a peer
	// that is not listening yet can take the peer's port (make run once failed that way).
	list, err := parsePeers(peers)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list {
		_, port, err := net.SplitHostPort(p.Addr)
		if n, _ := strconv.Atoi(port); err != nil || n <= 0 || n >= 32768 {
			t.Errorf("Raft address %s of %s: port not below 32768", p.Addr, p.ID)
		}
	}
}

// TestDLegerJoin: a node joining a running group lists the members plus itself in its own
// dLegerPeers (longer than theirs, which each node's validation accepts) and sets dLegerJoin;
// dLegerJoin outside DLedger mode is an error naming the key.
func TestDLegerJoin(t *testing.T) {
	b, w, err := LoadBroker([]string{"-c", writeFile(t, "enableDLegerCommitLog=true\ndLegerGroup=g\ndLegerJoin=true\n"+
		"dLegerPeers=n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913;n3-127.0.0.1:40914\ndLegerSelfId=n3\n"+
		"dLegerTrailingLogs=256\ndLegerWalSegmentSizeMB=8\ndLegerLogCacheMB=32\n")})
	if err != nil || len(w) != 0 {
		t.Fatalf("load: %v %q", err, w)
	}
	if !b.DLegerJoin || b.DLegerTrailingLogs != 256 || b.DLegerWalSegmentSize() != 8<<20 || b.DLegerLogCacheBytes() != 32<<20 {
		t.Errorf("values not applied: join %v trailing %d segment %d cache %d", b.DLegerJoin, b.DLegerTrailingLogs, b.DLegerWalSegmentSize(), b.DLegerLogCacheBytes())
	}
	if self, err := b.SelfPeer(); err != nil || self != (Peer{"n3", "127.0.0.1:40914"}) {
		t.Errorf("SelfPeer = %v, %v", self, err)
	}
	if NewBroker().DLegerJoin {
		t.Errorf("dLegerJoin defaults to true")
	}
	_, _, err = LoadBroker([]string{"-c", writeFile(t, "dLegerJoin=true\n")})
	if err == nil || !strings.Contains(err.Error(), "dLegerJoin:") {
		t.Errorf("dLegerJoin without DLedger mode: %v", err)
	}
}

// The group-commit keys reach the config, 0 keeps dledger's defaults, and values outside their
// bounds are errors naming the key.
func TestDLegerBatchKeys(t *testing.T) {
	b, w, err := LoadBroker([]string{"-c", writeFile(t, "dLegerBatchMaxBytes=1048576\ndLegerBatchMaxItems=512\n"+
		"dLegerBatchMaxInFlight=2\ndLegerBatchLingerMs=1\n")})
	if err != nil || len(w) != 0 {
		t.Fatalf("load: %v %q", err, w)
	}
	if b.DLegerBatchMaxBytes != 1<<20 || b.DLegerBatchMaxItems != 512 || b.DLegerBatchMaxInFlight != 2 || b.DLegerBatchLinger() != time.Millisecond {
		t.Errorf("values not applied: %d %d %d %v", b.DLegerBatchMaxBytes, b.DLegerBatchMaxItems, b.DLegerBatchMaxInFlight, b.DLegerBatchLinger())
	}
	if d := NewBroker(); d.DLegerBatchMaxBytes != 0 || d.DLegerBatchMaxInFlight != 0 || d.DLegerBatchLinger() != 0 {
		t.Errorf("defaults are not 0 (dledger's own): %+v", d)
	}
	for _, bad := range []string{"dLegerBatchMaxBytes=100", "dLegerBatchMaxBytes=134217728", "dLegerBatchMaxItems=-1",
		"dLegerBatchMaxInFlight=65", "dLegerBatchLingerMs=101", "dLegerBatchLingerMs=-1"} {
		key := bad[:strings.IndexByte(bad, '=')]
		_, _, err := LoadBroker([]string{"-c", writeFile(t, bad+"\n")})
		if err == nil || !strings.Contains(err.Error(), key+":") {
			t.Errorf("%s: error %v does not name the key", bad, err)
		}
	}
}

func TestProcs(t *testing.T) {
	dl := func(peers string, maxProcs int) *Broker {
		return &Broker{EnableDLegerCommitLog: true, DLegerPeers: peers, MaxProcs: maxProcs}
	}
	loop3 := "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-localhost:40913"
	for _, c := range []struct {
		name   string
		b      *Broker
		cpus   int
		env    bool
		want   int
		leader int
		reason string
	}{
		{"group on one host shares its CPUs; the leader what the followers leave", dl(loop3, 0), 8, false, 2, 4, "dLegerPeers share one host"},
		{"two CPUs: one each, the leader too", dl(loop3, 0), 2, false, 1, 0, "dLegerPeers share one host"},
		{"one CPU: one each", dl(loop3, 0), 1, false, 1, 0, "dLegerPeers share one host"},
		{"four CPUs", dl(loop3, 0), 4, false, 1, 2, "dLegerPeers share one host"},
		{"nine CPUs: three each", dl(loop3, 0), 9, false, 3, 0, "dLegerPeers share one host"},
		{"same non-loopback host", dl("a-10.0.0.5:1;b-10.0.0.5:2", 0), 5, false, 2, 3, "dLegerPeers share one host"},
		{"same host name", dl("a-Broker-Host:1;b-broker-host:2;c-broker-host:3", 0), 7, false, 2, 3, "dLegerPeers share one host"},
		{"five nodes on two CPUs", dl("a-h:1;b-h:2;c-h:3;d-h:4;e-h:5", 0), 2, false, 1, 0, "dLegerPeers share one host"},
		{"hosts differ", dl("a-10.0.0.5:1;b-10.0.0.6:1;c-10.0.0.7:1", 0), 8, false, 0, 0, "default"},
		{"one loopback, one not", dl("a-127.0.0.1:1;b-10.0.0.6:1", 0), 8, false, 0, 0, "default"},
		{"single-node group", dl("n0-127.0.0.1:40911", 0), 8, false, 0, 0, "default"},
		{"environment wins over automatic", dl(loop3, 0), 8, true, 0, 0, "GOMAXPROCS"},
		{"key wins over everything", dl(loop3, 3), 8, true, 3, 0, "maxProcs"},
		{"classic mode", &Broker{DLegerPeers: loop3}, 8, false, 0, 0, "default"},
		{"classic mode with key", &Broker{MaxProcs: 2}, 8, false, 2, 0, "maxProcs"},
	} {
		n, leader, why := c.b.Procs(c.cpus, c.env)
		if n != c.want || leader != c.leader || why != c.reason {
			t.Errorf("%s: Procs = %d, %d, %q; want %d, %d, %q", c.name, n, leader, why, c.want, c.leader, c.reason)
		}
	}
}
