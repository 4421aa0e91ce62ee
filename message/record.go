package message

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"
)

// Magic codes (§5.4, §6.2).
const (
	// MagicCodeV1 marks a record with a 1-byte topic length.
	MagicCodeV1 uint32 = 0xDAA320A7
	// MagicCodeV2 marks a record with a 2-byte topic length (topics longer than 127 bytes).
	MagicCodeV2 uint32 = 0xDAA320AB
	// BlankMagicCode marks the 8-byte end-of-file filler of a commitlog segment.
	BlankMagicCode uint32 = 0xCBD43194
)

// Fixed field positions that do not depend on the host widths (§5.4).
const (
	OffsetTotalSize      = 0
	OffsetMagic          = 4
	OffsetBodyCRC        = 8
	OffsetQueueID        = 12
	OffsetFlag           = 16
	OffsetQueueOffset    = 20
	OffsetPhysicalOffset = 28
	OffsetSysFlag        = 36
	OffsetBornTimestamp  = 40
	OffsetBornHost       = 48
)

// RaftEntryTopic is the reserved topic of the entry-header records that the commitlog log store
// (dLegerLogStore=commitlog) writes in front of every Raft entry's records, so that the commitlog
// is also the Raft log. Those records carry the rolled-back transaction type, which keeps them
// out of consume queues and the key index on every reader; no client may produce to the topic.
const RaftEntryTopic = "rmq_sys_RAFT_ENTRY"

// Size limits (§5.5).
const (
	// MinRecordSize is the smallest valid record: V1, IPv4 hosts, empty body, topic, properties.
	MinRecordSize = 91
	// MaxTopicLength is the longest topic a record can carry (%RETRY%/%DLQ% names).
	MaxTopicLength = 255
	// MaxV1TopicLength is the longest topic stored with the V1 magic that Go clients can read.
	MaxV1TopicLength = 127
	// BlankMarkerSize is the size of the commitlog end-of-file marker.
	BlankMarkerSize = 8
)

// ErrMalformed is wrapped by every decoding error, so callers can map any of them to
// MESSAGE_ILLEGAL with errors.Is.
var ErrMalformed = errors.New("malformed message")

// Message is one stored record (§5.4) in decoded form. The broker builds one per send and
// encodes it; pulls and tools decode them.
type Message struct {
	Topic                     string
	QueueID                   int32
	Flag                      int32
	QueueOffset               int64
	PhysicalOffset            int64
	SysFlag                   int32
	BornTimestamp             int64
	BornHost                  netip.AddrPort
	StoreTimestamp            int64
	StoreHost                 netip.AddrPort
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
	Body                      []byte
	// Properties is the raw properties string (§5.1); see ParseProperties/FormatProperties.
	Properties string
}

func hostLen(a netip.AddrPort) int {
	if a.Addr().Unmap().Is4() || !a.Addr().IsValid() {
		return 8
	}
	return 20
}

// RecordSize returns the encoded size of m, the length EncodeRecord will produce.
func RecordSize(m *Message) int { return recordSize(m, len(m.Properties)) }

// recordSize is RecordSize with the properties propsLen bytes long.
func recordSize(m *Message, propsLen int) int {
	tl := 1
	if len(m.Topic) > MaxV1TopicLength {
		tl = 2
	}
	return 72 + hostLen(m.BornHost) + hostLen(m.StoreHost) + len(m.Body) + tl + len(m.Topic) + 2 + propsLen
}

// EncodeRecord encodes m in stored layout: it computes TOTALSIZE and BODYCRC, sets the IPv6
// sysFlag bits from the host addresses, and uses the V2 magic only for topics over 127 bytes.
func EncodeRecord(m *Message) ([]byte, error) {
	return AppendRecord(make([]byte, 0, RecordSize(m)), m)
}

// EncodeRecordAdding is EncodeRecord with the property name=value added after m's (with a
// separator between where m's do not end with one): a broker stamping a property on every
// message it stores (CLUSTER) copies the properties once, into the record, rather than into a
// longer string first.
func EncodeRecordAdding(m *Message, name, value string) ([]byte, error) {
	add := addedProperty{name: name, value: value, sep: m.Properties != "" && m.Properties[len(m.Properties)-1] != PropertySeparator}
	return appendRecord(make([]byte, 0, recordSize(m, len(m.Properties)+add.size())), m, add)
}

// addedProperty is a property EncodeRecordAdding writes after a message's own.
type addedProperty struct {
	name, value string
	sep         bool // a separator first: the message's properties do not end with one
}

func (a addedProperty) size() int {
	if a.name == "" {
		return 0
	}
	n := len(a.name) + 1 + len(a.value) + 1
	if a.sep {
		n++
	}
	return n
}

// AppendRecord is EncodeRecord appending to dst, so a batch can be encoded into one buffer.
func AppendRecord(dst []byte, m *Message) ([]byte, error) {
	return appendRecord(dst, m, addedProperty{})
}

func appendRecord(dst []byte, m *Message, add addedProperty) ([]byte, error) {
	propsLen := len(m.Properties) + add.size()
	switch {
	case m.Topic == "":
		return dst, fmt.Errorf("encode record: empty topic: %w", ErrMalformed)
	case len(m.Topic) > MaxTopicLength:
		return dst, fmt.Errorf("encode record: topic is %d bytes, limit %d: %w", len(m.Topic), MaxTopicLength, ErrMalformed)
	case propsLen > MaxPropertiesLength:
		return dst, fmt.Errorf("encode record: properties are %d bytes, limit %d: %w", propsLen, MaxPropertiesLength, ErrMalformed)
	}
	size := recordSize(m, propsLen)
	if int64(size) > 1<<31-1 {
		return dst, fmt.Errorf("encode record: %d bytes: %w", size, ErrMalformed)
	}
	sys := m.SysFlag &^ (SysFlagBornHostV6 | SysFlagStoreHostV6)
	if hostLen(m.BornHost) == 20 {
		sys |= SysFlagBornHostV6
	}
	if hostLen(m.StoreHost) == 20 {
		sys |= SysFlagStoreHostV6
	}
	be := binary.BigEndian
	magic := MagicCodeV1
	if len(m.Topic) > MaxV1TopicLength {
		magic = MagicCodeV2
	}
	dst = be.AppendUint32(dst, uint32(size))
	dst = be.AppendUint32(dst, magic)
	dst = be.AppendUint32(dst, BodyCRC(m.Body))
	dst = be.AppendUint32(dst, uint32(m.QueueID))
	dst = be.AppendUint32(dst, uint32(m.Flag))
	dst = be.AppendUint64(dst, uint64(m.QueueOffset))
	dst = be.AppendUint64(dst, uint64(m.PhysicalOffset))
	dst = be.AppendUint32(dst, uint32(sys))
	dst = be.AppendUint64(dst, uint64(m.BornTimestamp))
	dst = appendHost(dst, m.BornHost)
	dst = be.AppendUint64(dst, uint64(m.StoreTimestamp))
	dst = appendHost(dst, m.StoreHost)
	dst = be.AppendUint32(dst, uint32(m.ReconsumeTimes))
	dst = be.AppendUint64(dst, uint64(m.PreparedTransactionOffset))
	dst = be.AppendUint32(dst, uint32(len(m.Body)))
	dst = append(dst, m.Body...)
	if magic == MagicCodeV1 {
		dst = append(dst, byte(len(m.Topic)))
	} else {
		dst = be.AppendUint16(dst, uint16(len(m.Topic)))
	}
	dst = append(dst, m.Topic...)
	dst = be.AppendUint16(dst, uint16(propsLen))
	dst = append(dst, m.Properties...)
	if add.name != "" {
		if add.sep {
			dst = append(dst, PropertySeparator)
		}
		dst = append(dst, add.name...)
		dst = append(dst, NameValueSeparator)
		dst = append(dst, add.value...)
		dst = append(dst, PropertySeparator)
	}
	return dst, nil
}

func appendHost(dst []byte, a netip.AddrPort) []byte {
	ip := a.Addr().Unmap()
	switch {
	case !ip.IsValid():
		dst = append(dst, 0, 0, 0, 0)
	case ip.Is4():
		b := ip.As4()
		dst = append(dst, b[:]...)
	default:
		b := ip.As16()
		dst = append(dst, b[:]...)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(a.Port()))
}

// BodyCRC is RocketMQ's CRC (§5.7): CRC-32 IEEE masked to 31 bits.
func BodyCRC(body []byte) uint32 { return crc32.ChecksumIEEE(body) & 0x7FFFFFFF }

// DecodeRecord decodes the record at the start of b and returns it with the number of bytes it
// occupies. It validates the magic, that TOTALSIZE equals the size implied by the field lengths
// and fits in b, and the body CRC. It never panics; the returned slices do not alias b.
func DecodeRecord(b []byte) (*Message, int, error) {
	v, err := ParseView(b)
	if err != nil {
		return nil, 0, err
	}
	if err := v.CheckCRC(); err != nil {
		return nil, 0, err
	}
	bornHost, err := v.BornHost()
	if err != nil {
		return nil, 0, err
	}
	storeHost, err := v.StoreHost()
	if err != nil {
		return nil, 0, err
	}
	m := &Message{
		Topic:                     string(v.Topic()),
		QueueID:                   v.QueueID(),
		Flag:                      v.Flag(),
		QueueOffset:               v.QueueOffset(),
		PhysicalOffset:            v.PhysicalOffset(),
		SysFlag:                   v.SysFlag(),
		BornTimestamp:             v.BornTimestamp(),
		BornHost:                  bornHost,
		StoreTimestamp:            v.StoreTimestamp(),
		StoreHost:                 storeHost,
		ReconsumeTimes:            v.ReconsumeTimes(),
		PreparedTransactionOffset: v.PreparedTransactionOffset(),
		Body:                      bytes.Clone(v.Body()),
		Properties:                string(v.Properties()),
	}
	return m, v.Size(), nil
}

// DecodeRecords decodes records laid back to back (a pull or query body) until b is exhausted.
func DecodeRecords(b []byte) ([]*Message, error) {
	var out []*Message
	for len(b) > 0 {
		m, n, err := DecodeRecord(b)
		if err != nil {
			return out, fmt.Errorf("record %d: %w", len(out), err)
		}
		out = append(out, m)
		b = b[n:]
	}
	return out, nil
}
