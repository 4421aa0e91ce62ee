package protocol

// Name server request and response headers (§2.3). Field names are the Java ones.

// RegisterBrokerRequestHeader is the header of REGISTER_BROKER (103).
type RegisterBrokerRequestHeader struct {
	BrokerName   string
	BrokerAddr   string
	ClusterName  string
	HaServerAddr string
	BrokerID     int64
	// HeartbeatTimeoutMillis is the broker's expiry at the name server [5.x]; nil = default.
	HeartbeatTimeoutMillis *int64
	// EnableActingMaster [5.x]: its presence, not only its value, matters (§2.3).
	EnableActingMaster *bool
	Compressed         bool
	// BodyCrc32 is crc32(body)&0x7FFFFFFF, or 0 for "not checked".
	BodyCrc32 int32
	// ForwardsWrites (ext forwardsWrites, ours; absent when false) says that this broker, even as
	// a slave, relays every write it receives to its group's current master: a DLedger-mode
	// node. The name server may then publish it as the group's master while the group has none
	// (RouteTable.Route), so clients never read a route whose sends cannot succeed.
	ForwardsWrites bool
}

// ToExt implements Header.
func (h *RegisterBrokerRequestHeader) ToExt() map[string]string {
	w := extWriter{}
	w.str("brokerName", h.BrokerName)
	w.str("brokerAddr", h.BrokerAddr)
	w.str("clusterName", h.ClusterName)
	w.str("haServerAddr", h.HaServerAddr)
	w.int64("brokerId", h.BrokerID)
	w.optInt64("heartbeatTimeoutMillis", h.HeartbeatTimeoutMillis)
	w.optBool("enableActingMaster", h.EnableActingMaster)
	w.boolean("compressed", h.Compressed)
	w.int32("bodyCrc32", h.BodyCrc32)
	if h.ForwardsWrites {
		w.boolean("forwardsWrites", true)
	}
	return w
}

// FromExt implements Header.
func (h *RegisterBrokerRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{ext: ext}
	*h = RegisterBrokerRequestHeader{
		BrokerName:             r.str("brokerName", true),
		BrokerAddr:             r.str("brokerAddr", true),
		ClusterName:            r.str("clusterName", true),
		HaServerAddr:           r.str("haServerAddr", true),
		BrokerID:               r.int64("brokerId", true),
		HeartbeatTimeoutMillis: r.optInt64("heartbeatTimeoutMillis"),
		EnableActingMaster:     r.optBool("enableActingMaster"),
		Compressed:             r.boolean("compressed", false),
		BodyCrc32:              r.int32("bodyCrc32", false),
		ForwardsWrites:         r.boolean("forwardsWrites", false),
	}
	return r.err
}

// RegisterBrokerResponseHeader is the response header of REGISTER_BROKER. MasterAddr is set for
// slaves (the live master's address); empty values are omitted like Java nulls.
type RegisterBrokerResponseHeader struct {
	HaServerAddr string
	MasterAddr   string
}

// ToExt implements Header.
func (h *RegisterBrokerResponseHeader) ToExt() map[string]string {
	w := extWriter{}
	w.optStr("haServerAddr", h.HaServerAddr)
	w.optStr("masterAddr", h.MasterAddr)
	return w
}

// FromExt implements Header.
func (h *RegisterBrokerResponseHeader) FromExt(ext map[string]string) error {
	r := extReader{ext: ext}
	*h = RegisterBrokerResponseHeader{HaServerAddr: r.str("haServerAddr", false), MasterAddr: r.str("masterAddr", false)}
	return r.err
}

// BrokerIdentityHeader is the header shared by UNREGISTER_BROKER (104) and QUERY_DATA_VERSION
// (322): all four fields are required.
type BrokerIdentityHeader struct {
	BrokerName  string
	BrokerAddr  string
	ClusterName string
	BrokerID    int64
}

// UnregisterBrokerRequestHeader is the header of UNREGISTER_BROKER (104).
type UnregisterBrokerRequestHeader = BrokerIdentityHeader

// QueryDataVersionRequestHeader is the header of QUERY_DATA_VERSION (322).
type QueryDataVersionRequestHeader = BrokerIdentityHeader

// ToExt implements Header.
func (h *BrokerIdentityHeader) ToExt() map[string]string {
	w := extWriter{}
	w.str("brokerName", h.BrokerName)
	w.str("brokerAddr", h.BrokerAddr)
	w.str("clusterName", h.ClusterName)
	w.int64("brokerId", h.BrokerID)
	return w
}

// FromExt implements Header.
func (h *BrokerIdentityHeader) FromExt(ext map[string]string) error {
	r := extReader{ext: ext}
	*h = BrokerIdentityHeader{
		BrokerName:  r.str("brokerName", true),
		BrokerAddr:  r.str("brokerAddr", true),
		ClusterName: r.str("clusterName", true),
		BrokerID:    r.int64("brokerId", true),
	}
	return r.err
}

// QueryDataVersionResponseHeader is the response header of QUERY_DATA_VERSION.
type QueryDataVersionResponseHeader struct {
	Changed bool
}

// ToExt implements Header.
func (h *QueryDataVersionResponseHeader) ToExt() map[string]string {
	w := extWriter{}
	w.boolean("changed", h.Changed)
	return w
}

// FromExt implements Header.
func (h *QueryDataVersionResponseHeader) FromExt(ext map[string]string) error {
	r := extReader{ext: ext}
	h.Changed = r.boolean("changed", true)
	return r.err
}

// GetRouteInfoRequestHeader is the header of GET_ROUTEINFO_BY_TOPIC (105).
type GetRouteInfoRequestHeader struct {
	Topic                  string
	AcceptStandardJSONOnly bool
	// RegisteredOnly (ext registeredOnly, ours) asks for the registrations as they are, without a
	// stand-in master: a DLedger follower looking for the real leader must not find itself or
	// another follower.
	RegisteredOnly bool
}

// ToExt implements Header.
func (h *GetRouteInfoRequestHeader) ToExt() map[string]string {
	w := extWriter{}
	w.str("topic", h.Topic)
	if h.AcceptStandardJSONOnly {
		w.boolean("acceptStandardJsonOnly", true)
	}
	if h.RegisteredOnly {
		w.boolean("registeredOnly", true)
	}
	return w
}

// FromExt implements Header.
func (h *GetRouteInfoRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{ext: ext}
	*h = GetRouteInfoRequestHeader{Topic: r.str("topic", true), AcceptStandardJSONOnly: r.boolean("acceptStandardJsonOnly", false),
		RegisteredOnly: r.boolean("registeredOnly", false)}
	return r.err
}

// TopicRequestHeader carries only a required topic: DELETE_TOPIC_IN_NAMESRV (216, plus optional
// clusterName [5.x]) and REGISTER_TOPIC_IN_NAMESRV (217).
type TopicRequestHeader struct {
	Topic       string
	ClusterName string
}

// DeleteTopicFromNamesrvRequestHeader is the header of DELETE_TOPIC_IN_NAMESRV (216).
type DeleteTopicFromNamesrvRequestHeader = TopicRequestHeader

// RegisterTopicRequestHeader is the header of REGISTER_TOPIC_IN_NAMESRV (217).
type RegisterTopicRequestHeader = TopicRequestHeader

// ToExt implements Header.
func (h *TopicRequestHeader) ToExt() map[string]string {
	w := extWriter{}
	w.str("topic", h.Topic)
	w.optStr("clusterName", h.ClusterName)
	return w
}

// FromExt implements Header.
func (h *TopicRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{ext: ext}
	*h = TopicRequestHeader{Topic: r.str("topic", true), ClusterName: r.str("clusterName", false)}
	return r.err
}

// PutKVConfigRequestHeader is the header of PUT_KV_CONFIG (100); all fields are required.
type PutKVConfigRequestHeader struct {
	Namespace string
	Key       string
	Value     string
}

// ToExt implements Header.
func (h *PutKVConfigRequestHeader) ToExt() map[string]string {
	return map[string]string{"namespace": h.Namespace, "key": h.Key, "value": h.Value}
}

// FromExt implements Header.
func (h *PutKVConfigRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{ext: ext}
	*h = PutKVConfigRequestHeader{Namespace: r.str("namespace", true), Key: r.str("key", true), Value: r.str("value", true)}
	return r.err
}

// KVConfigKeyHeader is the header of GET_KV_CONFIG (101) and DELETE_KV_CONFIG (102).
type KVConfigKeyHeader struct {
	Namespace string
	Key       string
}

// GetKVConfigRequestHeader is the header of GET_KV_CONFIG (101).
type GetKVConfigRequestHeader = KVConfigKeyHeader

// DeleteKVConfigRequestHeader is the header of DELETE_KV_CONFIG (102).
type DeleteKVConfigRequestHeader = KVConfigKeyHeader

// ToExt implements Header.
func (h *KVConfigKeyHeader) ToExt() map[string]string {
	return map[string]string{"namespace": h.Namespace, "key": h.Key}
}

// FromExt implements Header.
func (h *KVConfigKeyHeader) FromExt(ext map[string]string) error {
	r := extReader{ext: ext}
	*h = KVConfigKeyHeader{Namespace: r.str("namespace", true), Key: r.str("key", true)}
	return r.err
}

// GetKVListByNamespaceRequestHeader is the header of GET_KVLIST_BY_NAMESPACE (219).
type GetKVListByNamespaceRequestHeader struct {
	Namespace string
}

// ToExt implements Header.
func (h *GetKVListByNamespaceRequestHeader) ToExt() map[string]string {
	return map[string]string{"namespace": h.Namespace}
}

// FromExt implements Header.
func (h *GetKVListByNamespaceRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{ext: ext}
	h.Namespace = r.str("namespace", true)
	return r.err
}

// GetKVConfigResponseHeader is the response header of GET_KV_CONFIG.
type GetKVConfigResponseHeader struct {
	Value string
}

// ToExt implements Header.
func (h *GetKVConfigResponseHeader) ToExt() map[string]string {
	return map[string]string{"value": h.Value}
}

// FromExt implements Header.
func (h *GetKVConfigResponseHeader) FromExt(ext map[string]string) error {
	r := extReader{ext: ext}
	h.Value = r.str("value", false)
	return r.err
}

// BrokerNameHeader is the header of WIPE_WRITE_PERM_OF_BROKER (205) and ADD_WRITE_PERM_OF_BROKER
// (327).
type BrokerNameHeader struct {
	BrokerName string
}

// ToExt implements Header.
func (h *BrokerNameHeader) ToExt() map[string]string {
	return map[string]string{"brokerName": h.BrokerName}
}

// FromExt implements Header.
func (h *BrokerNameHeader) FromExt(ext map[string]string) error {
	r := extReader{ext: ext}
	h.BrokerName = r.str("brokerName", true)
	return r.err
}

// WritePermResponseHeader is the response of 205 (key wipeTopicCount) and 327 (addTopicCount).
type WritePermResponseHeader struct {
	// Key is "wipeTopicCount" or "addTopicCount".
	Key   string
	Count int32
}

// Names of the count in WritePermResponseHeader.
const (
	WipeTopicCountKey = "wipeTopicCount"
	AddTopicCountKey  = "addTopicCount"
)

// ToExt implements Header.
func (h *WritePermResponseHeader) ToExt() map[string]string {
	w := extWriter{}
	w.int32(h.Key, h.Count)
	return w
}

// FromExt implements Header; Key must be set before the call.
func (h *WritePermResponseHeader) FromExt(ext map[string]string) error {
	r := extReader{ext: ext}
	h.Count = r.int32(h.Key, true)
	return r.err
}

// GetTopicsByClusterRequestHeader is the header of GET_TOPICS_BY_CLUSTER (224).
type GetTopicsByClusterRequestHeader struct {
	Cluster string
}

// ToExt implements Header.
func (h *GetTopicsByClusterRequestHeader) ToExt() map[string]string {
	return map[string]string{"cluster": h.Cluster}
}

// FromExt implements Header.
func (h *GetTopicsByClusterRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{ext: ext}
	h.Cluster = r.str("cluster", true)
	return r.err
}

// BrokerHeartbeatRequestHeader is the header of BROKER_HEARTBEAT (904) [5.x].
type BrokerHeartbeatRequestHeader struct {
	ClusterName           string
	BrokerAddr            string
	BrokerName            string
	BrokerID              *int64
	Epoch                 *int32
	MaxOffset             *int64
	ConfirmOffset         *int64
	HeartbeatTimeoutMills *int64
	ElectionPriority      *int32
}

// ToExt implements Header.
func (h *BrokerHeartbeatRequestHeader) ToExt() map[string]string {
	w := extWriter{}
	w.str("clusterName", h.ClusterName)
	w.str("brokerAddr", h.BrokerAddr)
	w.str("brokerName", h.BrokerName)
	w.optInt64("brokerId", h.BrokerID)
	w.optInt32("epoch", h.Epoch)
	w.optInt64("maxOffset", h.MaxOffset)
	w.optInt64("confirmOffset", h.ConfirmOffset)
	w.optInt64("heartbeatTimeoutMills", h.HeartbeatTimeoutMills)
	w.optInt32("electionPriority", h.ElectionPriority)
	return w
}

// FromExt implements Header.
func (h *BrokerHeartbeatRequestHeader) FromExt(ext map[string]string) error {
	r := extReader{ext: ext}
	*h = BrokerHeartbeatRequestHeader{
		ClusterName:           r.str("clusterName", true),
		BrokerAddr:            r.str("brokerAddr", true),
		BrokerName:            r.str("brokerName", true),
		BrokerID:              r.optInt64("brokerId"),
		Epoch:                 r.optInt32("epoch"),
		MaxOffset:             r.optInt64("maxOffset"),
		ConfirmOffset:         r.optInt64("confirmOffset"),
		HeartbeatTimeoutMills: r.optInt64("heartbeatTimeoutMills"),
		ElectionPriority:      r.optInt32("electionPriority"),
	}
	return r.err
}
