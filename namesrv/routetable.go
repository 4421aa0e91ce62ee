package namesrv

import (
	"errors"
	"slices"
	"sync"
	"time"

	"rocketraft/protocol"
)

// DefaultBrokerExpiry is how long a broker stays routable without re-registering.
const DefaultBrokerExpiry = 120 * time.Second

// ErrRegisterRefused is returned by Register for an incremental (single-topic) registration
// from a 5.x broker id the table does not know yet; the full registration must come first (§2.3).
var ErrRegisterRefused = errors.New("register broker failed")

// brokerKey identifies one broker process: its cluster and its client-facing address.
type brokerKey struct {
	cluster string
	addr    string
}

// brokerLive is the liveness record of one broker process.
type brokerLive struct {
	lastUpdate   time.Time
	timeout      time.Duration
	dataVersion  protocol.DataVersion
	connID       uint64 // connection that registered it; 0 = none (tests, in-process)
	haServerAddr string
	// forwardsWrites: the broker relays writes to its group's master (a DLedger node), so it
	// may stand in as master in routes while its group has none (Route).
	forwardsWrites bool
}

// RouteTable is the name server's soft state (§10.1), rebuilt from broker registrations. It is
// pure (no I/O) so it can be unit-tested with a fake clock. All tables are guarded by mu; see
// doc.go for the lock order.
type RouteTable struct {
	mu            sync.RWMutex
	now           func() time.Time
	defaultExpiry time.Duration

	topicQueueTable   map[string]map[string]*protocol.QueueData // topic → brokerName → queues
	brokerAddrTable   map[string]*protocol.BrokerData           // brokerName → members
	clusterAddrTable  map[string]map[string]struct{}            // cluster → brokerNames
	brokerLiveTable   map[brokerKey]*brokerLive
	filterServerTable map[brokerKey][]string

	guardTakeover bool // takeover.go
}

// NewRouteTable returns an empty table. now may be nil (time.Now); expiry ≤ 0 means
// DefaultBrokerExpiry and applies to brokers that do not announce their own timeout.
func NewRouteTable(now func() time.Time, expiry time.Duration) *RouteTable {
	if now == nil {
		now = time.Now
	}
	if expiry <= 0 {
		expiry = DefaultBrokerExpiry
	}
	return &RouteTable{
		now:               now,
		defaultExpiry:     expiry,
		topicQueueTable:   map[string]map[string]*protocol.QueueData{},
		brokerAddrTable:   map[string]*protocol.BrokerData{},
		clusterAddrTable:  map[string]map[string]struct{}{},
		brokerLiveTable:   map[brokerKey]*brokerLive{},
		filterServerTable: map[brokerKey][]string{},
	}
}

// Registration is one REGISTER_BROKER request, decoded.
type Registration struct {
	ClusterName  string
	BrokerName   string
	BrokerAddr   string
	HaServerAddr string
	BrokerID     int64
	// Timeout overrides the table's expiry for this broker when > 0 ([5.x] heartbeatTimeoutMillis).
	Timeout time.Duration
	// EnableActingMaster is nil for brokers that do not send the header (4.x, and ours unless
	// configured); a non-nil value lets the lowest-id slave contribute read-only topics while the
	// group has no master.
	EnableActingMaster *bool
	// Topics is the broker's topic table; nil when the request had no body.
	Topics           *protocol.TopicConfigSerializeWrapper
	FilterServerList []string
	// ConnID is the remoting connection the registration arrived on (0 = none); closing that
	// connection removes the broker (RemoveConn).
	ConnID uint64
	// ForwardsWrites is the register header's forwardsWrites (ours): see Route's stand-in.
	ForwardsWrites bool
}

// RegisterResult is what REGISTER_BROKER answers: for a slave, the live master's address and HA
// address; empty for masters or when the master is unknown.
type RegisterResult struct {
	MasterAddr   string
	HaServerAddr string
}

// Register records a broker registration (Java RouteInfoManager.registerBroker semantics):
// cluster membership, the broker's address under its id (an address registered under another id
// of the same group is moved, which is how a slave→master switch looks), queue data from the
// master (or from the prime slave of a 5.x group without master), and liveness.
func (t *RouteTable) Register(r Registration) (RegisterResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var res RegisterResult
	if err := t.checkTakeoverLocked(r); err != nil {
		return res, err
	}
	topics := r.Topics
	if topics == nil {
		topics = &protocol.TopicConfigSerializeWrapper{}
	}

	names := t.clusterAddrTable[r.ClusterName]
	if names == nil {
		names = map[string]struct{}{}
		t.clusterAddrTable[r.ClusterName] = names
	}
	names[r.BrokerName] = struct{}{}

	registerFirst := false
	bd := t.brokerAddrTable[r.BrokerName]
	if bd == nil {
		registerFirst = true
		bd = &protocol.BrokerData{Cluster: r.ClusterName, BrokerName: r.BrokerName, BrokerAddrs: map[int64]string{}}
		t.brokerAddrTable[r.BrokerName] = bd
	}
	oldVersionBroker := r.EnableActingMaster == nil
	bd.EnableActingMaster = !oldVersionBroker && *r.EnableActingMaster

	// One address has one id: drop the address under any other id (slave → master switch).
	for id, addr := range bd.BrokerAddrs {
		if addr == r.BrokerAddr && id != r.BrokerID {
			delete(bd.BrokerAddrs, id)
		}
	}
	// A different process already holds this id with a newer state version: ignore this one.
	if old, ok := bd.BrokerAddrs[r.BrokerID]; ok && old != r.BrokerAddr {
		if live := t.brokerLiveTable[brokerKey{r.ClusterName, old}]; live != nil &&
			live.dataVersion.StateVersion > topics.DataVersion.StateVersion {
			delete(t.brokerLiveTable, brokerKey{r.ClusterName, r.BrokerAddr})
			return res, nil
		}
	}
	// 5.x brokers (which always send enableActingMaster) may register incrementally, one topic at
	// a time; such a registration from an unknown broker is refused until a full one arrives.
	// Older brokers and simple fakes always send their whole table, so the rule is not applied.
	if _, known := bd.BrokerAddrs[r.BrokerID]; !known && !oldVersionBroker && len(topics.TopicConfigTable) == 1 {
		if len(bd.BrokerAddrs) == 0 { // do not leave an empty group behind
			t.dropGroupLocked(r.ClusterName, r.BrokerName)
		}
		return res, ErrRegisterRefused
	}
	oldAddr := bd.BrokerAddrs[r.BrokerID]
	bd.BrokerAddrs[r.BrokerID] = r.BrokerAddr
	registerFirst = registerFirst || oldAddr == ""

	key := brokerKey{r.ClusterName, r.BrokerAddr}
	isMaster := r.BrokerID == protocol.MasterID
	isPrimeSlave := !oldVersionBroker && !isMaster && r.BrokerID == minID(bd.BrokerAddrs)
	if r.Topics != nil && (isMaster || isPrimeSlave) {
		versionChanged := t.versionChangedLocked(key, topics.DataVersion)
		for _, tc := range topics.TopicConfigTable {
			if tc == nil {
				continue
			}
			if registerFirst || versionChanged || t.topicQueueTable[tc.TopicName][r.BrokerName] == nil {
				perm := tc.Perm
				if isPrimeSlave {
					perm &^= protocol.PermWrite
				}
				t.putQueueDataLocked(tc.TopicName, &protocol.QueueData{BrokerName: r.BrokerName,
					ReadQueueNums: tc.ReadQueueNums, WriteQueueNums: tc.WriteQueueNums, Perm: perm, TopicSysFlag: tc.TopicSysFlag})
			}
		}
	}

	timeout := r.Timeout
	if timeout <= 0 {
		timeout = t.defaultExpiry
	}
	t.brokerLiveTable[key] = &brokerLive{lastUpdate: t.now(), timeout: timeout, dataVersion: topics.DataVersion,
		connID: r.ConnID, haServerAddr: r.HaServerAddr, forwardsWrites: r.ForwardsWrites}
	if r.FilterServerList != nil {
		if len(r.FilterServerList) == 0 {
			delete(t.filterServerTable, key)
		} else {
			t.filterServerTable[key] = slices.Clone(r.FilterServerList)
		}
	}

	if !isMaster {
		if masterAddr, ok := bd.BrokerAddrs[protocol.MasterID]; ok {
			if ml := t.brokerLiveTable[brokerKey{r.ClusterName, masterAddr}]; ml != nil {
				res = RegisterResult{MasterAddr: masterAddr, HaServerAddr: ml.haServerAddr}
			}
		}
	}
	return res, nil
}

func minID(addrs map[int64]string) int64 {
	first := true
	var m int64
	for id := range addrs {
		if first || id < m {
			m, first = id, false
		}
	}
	return m
}

func (t *RouteTable) versionChangedLocked(key brokerKey, v protocol.DataVersion) bool {
	live := t.brokerLiveTable[key]
	return live == nil || live.dataVersion != v
}

func (t *RouteTable) putQueueDataLocked(topic string, qd *protocol.QueueData) {
	m := t.topicQueueTable[topic]
	if m == nil {
		m = map[string]*protocol.QueueData{}
		t.topicQueueTable[topic] = m
	}
	m[qd.BrokerName] = qd
}

// BrokerID names one broker process for Unregister.
type BrokerID struct {
	ClusterName string
	BrokerName  string
	BrokerAddr  string
	ID          int64
}

// Unregister removes one broker process (UNREGISTER_BROKER, expiry, connection loss): its
// liveness, its address in the group, the group when it was the last member (with its queue data
// and its cluster membership), and the cluster when it becomes empty. While a group keeps members
// its queue data stays, so consumers can still read from slaves; a 5.x acting-master group loses
// the write bit when no master remains.
func (t *RouteTable) Unregister(b BrokerID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unregisterLocked(b)
}

func (t *RouteTable) unregisterLocked(b BrokerID) {
	key := brokerKey{b.ClusterName, b.BrokerAddr}
	delete(t.brokerLiveTable, key)
	delete(t.filterServerTable, key)

	bd := t.brokerAddrTable[b.BrokerName]
	if bd == nil {
		return
	}
	for id, addr := range bd.BrokerAddrs {
		if addr == b.BrokerAddr {
			delete(bd.BrokerAddrs, id)
		}
	}
	if len(bd.BrokerAddrs) > 0 {
		if bd.EnableActingMaster && minID(bd.BrokerAddrs) > protocol.MasterID {
			for _, qds := range t.topicQueueTable {
				if qd := qds[b.BrokerName]; qd != nil {
					qd.Perm &^= protocol.PermWrite
				}
			}
		}
		return
	}
	t.dropGroupLocked(b.ClusterName, b.BrokerName)
	for topic, qds := range t.topicQueueTable {
		delete(qds, b.BrokerName)
		if len(qds) == 0 {
			delete(t.topicQueueTable, topic)
		}
	}
}

// dropGroupLocked removes a broker name from the group table and from its cluster.
func (t *RouteTable) dropGroupLocked(cluster, brokerName string) {
	delete(t.brokerAddrTable, brokerName)
	if names := t.clusterAddrTable[cluster]; names != nil {
		delete(names, brokerName)
		if len(names) == 0 {
			delete(t.clusterAddrTable, cluster)
		}
	}
}

// Touch refreshes a registered broker's liveness (QUERY_DATA_VERSION, BROKER_HEARTBEAT). It
// reports whether the broker was known.
func (t *RouteTable) Touch(cluster, addr string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if live := t.brokerLiveTable[brokerKey{cluster, addr}]; live != nil {
		live.lastUpdate = t.now()
		return true
	}
	return false
}

// DataVersionOf returns the topic-table version a broker last registered, if it is live.
func (t *RouteTable) DataVersionOf(cluster, addr string) (protocol.DataVersion, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if live := t.brokerLiveTable[brokerKey{cluster, addr}]; live != nil {
		return live.dataVersion, true
	}
	return protocol.DataVersion{}, false
}
