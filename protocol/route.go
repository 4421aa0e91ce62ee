package protocol

import (
	"encoding/json"
	"slices"
	"strings"
)

// MasterID is the broker id of a replica group's master in BrokerData.BrokerAddrs.
const MasterID int64 = 0

// QueueData describes one broker name's queues of a topic (§4.2). It is emitted with the system
// flag under both names: topicSysFlag (Java ≥ 4.9) and topicSynFlag (Java ≤ 4.8, read by the Go
// client); decoding accepts either, preferring topicSysFlag.
type QueueData struct {
	BrokerName     string
	ReadQueueNums  int32
	WriteQueueNums int32
	Perm           int32
	TopicSysFlag   int32
}

type queueDataJSON struct {
	BrokerName     string `json:"brokerName"`
	Perm           int32  `json:"perm"`
	ReadQueueNums  int32  `json:"readQueueNums"`
	TopicSynFlag   *int32 `json:"topicSynFlag,omitempty"`
	TopicSysFlag   *int32 `json:"topicSysFlag,omitempty"`
	WriteQueueNums int32  `json:"writeQueueNums"`
}

// MarshalJSON emits both spellings of the system flag.
func (q QueueData) MarshalJSON() ([]byte, error) {
	f := q.TopicSysFlag
	return marshalCompact(queueDataJSON{BrokerName: q.BrokerName, Perm: q.Perm, ReadQueueNums: q.ReadQueueNums,
		TopicSynFlag: &f, TopicSysFlag: &f, WriteQueueNums: q.WriteQueueNums})
}

// UnmarshalJSON accepts topicSysFlag or the legacy topicSynFlag.
func (q *QueueData) UnmarshalJSON(b []byte) error {
	var j queueDataJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*q = QueueData{BrokerName: j.BrokerName, ReadQueueNums: j.ReadQueueNums, WriteQueueNums: j.WriteQueueNums, Perm: j.Perm}
	switch {
	case j.TopicSysFlag != nil:
		q.TopicSysFlag = *j.TopicSysFlag
	case j.TopicSynFlag != nil:
		q.TopicSysFlag = *j.TopicSynFlag
	}
	return nil
}

// BrokerData is one replica group: its cluster, name and the address of each member by broker id
// (0 = master). BrokerAddrs is always emitted, as {} when empty, because the Go client cannot parse
// a missing or null value.
type BrokerData struct {
	Cluster            string           `json:"cluster"`
	BrokerName         string           `json:"brokerName"`
	BrokerAddrs        map[int64]string `json:"brokerAddrs"`
	ZoneName           string           `json:"zoneName,omitempty"`
	EnableActingMaster bool             `json:"enableActingMaster"`
}

// MarshalJSON emits brokerAddrs as {} when nil.
func (b BrokerData) MarshalJSON() ([]byte, error) {
	type plain BrokerData
	if b.BrokerAddrs == nil {
		b.BrokerAddrs = map[int64]string{}
	}
	return marshalCompact(plain(b))
}

// MasterAddr returns the address registered under broker id 0, or "".
func (b *BrokerData) MasterAddr() string { return b.BrokerAddrs[MasterID] }

// Clone returns a deep copy of b.
func (b *BrokerData) Clone() *BrokerData {
	c := *b
	c.BrokerAddrs = make(map[int64]string, len(b.BrokerAddrs))
	for id, a := range b.BrokerAddrs {
		c.BrokerAddrs[id] = a
	}
	return &c
}

// TopicRouteData is the body of a successful GET_ROUTEINFO_BY_TOPIC (§4.2). Encoding is compact
// standard JSON with queueDatas, brokerDatas and filterServerTable always present.
type TopicRouteData struct {
	OrderTopicConf    string              `json:"orderTopicConf,omitempty"`
	QueueDatas        []*QueueData        `json:"queueDatas"`
	BrokerDatas       []*BrokerData       `json:"brokerDatas"`
	FilterServerTable map[string][]string `json:"filterServerTable"`
}

// MarshalJSON replaces nil collections by empty ones.
func (r TopicRouteData) MarshalJSON() ([]byte, error) {
	type plain TopicRouteData
	if r.QueueDatas == nil {
		r.QueueDatas = []*QueueData{}
	}
	if r.BrokerDatas == nil {
		r.BrokerDatas = []*BrokerData{}
	}
	if r.FilterServerTable == nil {
		r.FilterServerTable = map[string][]string{}
	}
	return marshalCompact(plain(r))
}

// Sort orders queue and broker data by broker name, which makes encodings deterministic.
func (r *TopicRouteData) Sort() {
	slices.SortFunc(r.QueueDatas, func(a, b *QueueData) int { return strings.Compare(a.BrokerName, b.BrokerName) })
	slices.SortFunc(r.BrokerDatas, func(a, b *BrokerData) int { return strings.Compare(a.BrokerName, b.BrokerName) })
}

// ClusterInfo is the body of GET_BROKER_CLUSTER_INFO (§4.3).
type ClusterInfo struct {
	BrokerAddrTable  map[string]*BrokerData `json:"brokerAddrTable"`
	ClusterAddrTable map[string][]string    `json:"clusterAddrTable"`
}

// MarshalJSON replaces nil maps by empty ones.
func (c ClusterInfo) MarshalJSON() ([]byte, error) {
	type plain ClusterInfo
	if c.BrokerAddrTable == nil {
		c.BrokerAddrTable = map[string]*BrokerData{}
	}
	if c.ClusterAddrTable == nil {
		c.ClusterAddrTable = map[string][]string{}
	}
	return marshalCompact(plain(c))
}

// TopicList is the body of GET_ALL_TOPIC_LIST_FROM_NAMESERVER, GET_TOPICS_BY_CLUSTER and
// GET_SYSTEM_TOPIC_LIST_FROM_NS (§4.4). topicList is always emitted.
type TopicList struct {
	TopicList  []string `json:"topicList"`
	BrokerAddr string   `json:"brokerAddr,omitempty"`
}

// MarshalJSON emits topicList as [] when nil.
func (t TopicList) MarshalJSON() ([]byte, error) {
	type plain TopicList
	if t.TopicList == nil {
		t.TopicList = []string{}
	}
	return marshalCompact(plain(t))
}

// KVTable is a string map body: KV config namespaces, broker runtime info, REGISTER_BROKER's
// order-topic reply (§4.4).
type KVTable struct {
	Table map[string]string `json:"table"`
}

// MarshalJSON emits table as {} when nil.
func (k KVTable) MarshalJSON() ([]byte, error) {
	type plain KVTable
	if k.Table == nil {
		k.Table = map[string]string{}
	}
	return marshalCompact(plain(k))
}

// ConsumerListBody is the body of a GET_CONSUMER_LIST_BY_GROUP response.
type ConsumerListBody struct {
	ConsumerIDList []string `json:"consumerIdList"`
}

// MarshalJSON emits consumerIdList as [] when nil.
func (c ConsumerListBody) MarshalJSON() ([]byte, error) {
	type plain ConsumerListBody
	if c.ConsumerIDList == nil {
		c.ConsumerIDList = []string{}
	}
	return marshalCompact(plain(c))
}
