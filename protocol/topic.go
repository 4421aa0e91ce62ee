package protocol

import (
	"encoding/json"
	"hash/crc32"
	"time"
)

// DataVersion versions a broker's topic (or group/offset) table. Two versions are equal iff
// counter, stateVersion and timestamp are all equal; the name server rebuilds a broker's queue data
// whenever the registered version differs from the stored one (§4.5).
type DataVersion struct {
	Counter      int64 `json:"counter"`
	StateVersion int64 `json:"stateVersion"`
	Timestamp    int64 `json:"timestamp"`
}

// Equal reports whether d and o denote the same version. A nil version equals only nil.
func (d *DataVersion) Equal(o *DataVersion) bool {
	if d == nil || o == nil {
		return d == o
	}
	return *d == *o
}

// Next returns the version following d: counter+1, timestamp now (ms).
func (d DataVersion) Next() DataVersion {
	return DataVersion{Counter: d.Counter + 1, StateVersion: d.StateVersion, Timestamp: time.Now().UnixMilli()}
}

// NewDataVersion returns a fresh version with counter 0 stamped now.
func NewDataVersion() DataVersion { return DataVersion{Timestamp: time.Now().UnixMilli()} }

// Permission bits (Java PermName) used in TopicConfig.Perm, QueueData.Perm and brokerPermission.
const (
	PermPriority int32 = 8
	PermRead     int32 = 4
	PermWrite    int32 = 2
	PermInherit  int32 = 1
	// PermReadWrite is the normal topic permission (6).
	PermReadWrite = PermRead | PermWrite
)

// IsReadable reports whether perm has the read bit.
func IsReadable(perm int32) bool { return perm&PermRead != 0 }

// IsWriteable reports whether perm has the write bit.
func IsWriteable(perm int32) bool { return perm&PermWrite != 0 }

// IsInherited reports whether perm has the inherit bit (template topics such as TBW102).
func IsInherited(perm int32) bool { return perm&PermInherit != 0 }

// PermString renders perm like Java's PermName.perm2String, e.g. "RW-" or "R--".
func PermString(perm int32) string {
	b := []byte("---")
	if IsReadable(perm) {
		b[0] = 'R'
	}
	if IsWriteable(perm) {
		b[1] = 'W'
	}
	if IsInherited(perm) {
		b[2] = 'X'
	}
	return string(b)
}

// Topic filter types (TopicConfig.TopicFilterType).
const (
	FilterSingleTag = "SINGLE_TAG"
	FilterMultiTag  = "MULTI_TAG"
)

// Well-known topic names.
const (
	// AutoCreateTopicKey is the template topic a broker with autoCreateTopicEnable registers and
	// a producer falls back to when its topic has no route (§10.5).
	AutoCreateTopicKey = "TBW102"
)

// TopicConfig is a broker's configuration of one topic (§4.5). Decoding starts from Java's
// defaults (16/16 queues, perm 6, SINGLE_TAG) so absent members keep them.
type TopicConfig struct {
	TopicName       string            `json:"topicName"`
	ReadQueueNums   int32             `json:"readQueueNums"`
	WriteQueueNums  int32             `json:"writeQueueNums"`
	Perm            int32             `json:"perm"`
	TopicFilterType string            `json:"topicFilterType"`
	TopicSysFlag    int32             `json:"topicSysFlag"`
	Order           bool              `json:"order"`
	Attributes      map[string]string `json:"attributes,omitempty"`
}

// NewTopicConfig returns a config for name with Java's defaults.
func NewTopicConfig(name string) *TopicConfig {
	return &TopicConfig{TopicName: name, ReadQueueNums: 16, WriteQueueNums: 16, Perm: PermReadWrite, TopicFilterType: FilterSingleTag}
}

// UnmarshalJSON decodes over Java's defaults.
func (t *TopicConfig) UnmarshalJSON(b []byte) error {
	type plain TopicConfig
	p := plain(*NewTopicConfig(""))
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*t = TopicConfig(p)
	return nil
}

// TopicConfigSerializeWrapper is a broker's whole topic table with its version; it is the content
// of topics.json and the core of REGISTER_BROKER's body.
type TopicConfigSerializeWrapper struct {
	TopicConfigTable map[string]*TopicConfig `json:"topicConfigTable"`
	DataVersion      DataVersion             `json:"dataVersion"`
}

// RegisterBrokerBody is the uncompressed body of REGISTER_BROKER (§2.3). 5.x-only members (topic
// queue mappings) are ignored on decode and not emitted.
type RegisterBrokerBody struct {
	TopicConfigSerializeWrapper TopicConfigSerializeWrapper `json:"topicConfigSerializeWrapper"`
	FilterServerList            []string                    `json:"filterServerList"`
}

// MarshalJSON always emits topicConfigTable and filterServerList (never null).
func (r RegisterBrokerBody) MarshalJSON() ([]byte, error) {
	type plain RegisterBrokerBody
	if r.TopicConfigSerializeWrapper.TopicConfigTable == nil {
		r.TopicConfigSerializeWrapper.TopicConfigTable = map[string]*TopicConfig{}
	}
	if r.FilterServerList == nil {
		r.FilterServerList = []string{}
	}
	return marshalCompact(plain(r))
}

// OrderTopicConfigNamespace is the KV namespace holding order-topic configs: key = topic, value =
// "brokerName1:queueNums;brokerName2:queueNums" (§2.3).
const OrderTopicConfigNamespace = "ORDER_TOPIC_CONFIG"

// CRC32 is RocketMQ's checksum: CRC-32 (IEEE) masked to 31 bits (§5.7). REGISTER_BROKER's
// bodyCrc32 and the stored message BODYCRC use it.
func CRC32(b []byte) int32 { return int32(crc32.ChecksumIEEE(b) & 0x7FFFFFFF) }
