package message

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// View gives access to the fields of an encoded record in place, without copying or decoding it
// all. The store uses it on the append path to read the topic, queue id, tags and keys and to
// patch the offsets. A View is valid only as long as the bytes it wraps.
type View struct {
	b         []byte // exactly the record
	storeTS   int    // position of STORETIMESTAMP
	storeHost int    // position of STOREHOSTADDRESS
	reconsume int    // position of RECONSUMETIMES
	bodyOff   int
	bodyLen   int
	topicOff  int
	topicLen  int
	propsOff  int
	propsLen  int
}

// ParseView checks the structure of the record at the start of b (magic, TOTALSIZE consistent
// with the field lengths and within b) and returns a view of exactly that record. It does not
// check the body CRC; see CheckCRC. It never panics.
func ParseView(b []byte) (View, error) {
	var v View
	if len(b) < 8 {
		return v, fmt.Errorf("record header: %d bytes: %w", len(b), ErrMalformed)
	}
	be := binary.BigEndian
	total := int64(int32(be.Uint32(b)))
	magic := be.Uint32(b[OffsetMagic:])
	if magic != MagicCodeV1 && magic != MagicCodeV2 {
		return v, fmt.Errorf("record magic %#x: %w", magic, ErrMalformed)
	}
	if total < MinRecordSize || total > int64(len(b)) {
		return v, fmt.Errorf("record TOTALSIZE %d with %d bytes available: %w", total, len(b), ErrMalformed)
	}
	r := b[:total]
	sys := int32(be.Uint32(r[OffsetSysFlag:]))
	bh, sh := 8, 8
	if sys&SysFlagBornHostV6 != 0 {
		bh = 20
	}
	if sys&SysFlagStoreHostV6 != 0 {
		sh = 20
	}
	v.storeTS = OffsetBornHost + bh
	v.storeHost = v.storeTS + 8
	v.reconsume = v.storeHost + sh
	bodyLenPos := v.reconsume + 12
	v.bodyOff = bodyLenPos + 4
	if int64(v.bodyOff) > total {
		return v, fmt.Errorf("record of %d bytes too short for its hosts: %w", total, ErrMalformed)
	}
	bodyLen := int64(int32(be.Uint32(r[bodyLenPos:])))
	if bodyLen < 0 || int64(v.bodyOff)+bodyLen > total {
		return v, fmt.Errorf("record BODYLENGTH %d exceeds TOTALSIZE %d: %w", bodyLen, total, ErrMalformed)
	}
	v.bodyLen = int(bodyLen)
	p := v.bodyOff + v.bodyLen
	if magic == MagicCodeV1 {
		if p+1 > len(r) {
			return v, fmt.Errorf("record truncated at topic length: %w", ErrMalformed)
		}
		v.topicLen = int(r[p])
		p++
	} else {
		if p+2 > len(r) {
			return v, fmt.Errorf("record truncated at topic length: %w", ErrMalformed)
		}
		v.topicLen = int(be.Uint16(r[p:]))
		p += 2
	}
	v.topicOff = p
	p += v.topicLen
	if p+2 > len(r) {
		return v, fmt.Errorf("record topic of %d bytes exceeds TOTALSIZE %d: %w", v.topicLen, total, ErrMalformed)
	}
	pl := int(int16(be.Uint16(r[p:])))
	if pl < 0 {
		return v, fmt.Errorf("record PROPERTIESLENGTH %d: %w", pl, ErrMalformed)
	}
	v.propsLen = pl
	v.propsOff = p + 2
	if int64(v.propsOff+v.propsLen) != total {
		return v, fmt.Errorf("record fields sum to %d bytes, TOTALSIZE says %d: %w", v.propsOff+v.propsLen, total, ErrMalformed)
	}
	v.b = r
	return v, nil
}

// CheckCRC verifies BODYCRC against the body.
func (v View) CheckCRC() error {
	want := binary.BigEndian.Uint32(v.b[OffsetBodyCRC:])
	if got := BodyCRC(v.Body()); got != want {
		return fmt.Errorf("record body CRC %#x, stored %#x: %w", got, want, ErrMalformed)
	}
	return nil
}

// Bytes returns the record bytes the view covers.
func (v View) Bytes() []byte { return v.b }

// Size returns TOTALSIZE.
func (v View) Size() int { return len(v.b) }

// QueueID returns QUEUEID.
func (v View) QueueID() int32 { return v.i32(OffsetQueueID) }

// Flag returns the user FLAG.
func (v View) Flag() int32 { return v.i32(OffsetFlag) }

// QueueOffset returns QUEUEOFFSET.
func (v View) QueueOffset() int64 { return v.i64(OffsetQueueOffset) }

// PhysicalOffset returns PHYSICALOFFSET.
func (v View) PhysicalOffset() int64 { return v.i64(OffsetPhysicalOffset) }

// SysFlag returns SYSFLAG.
func (v View) SysFlag() int32 { return v.i32(OffsetSysFlag) }

// BornTimestamp returns BORNTIMESTAMP.
func (v View) BornTimestamp() int64 { return v.i64(OffsetBornTimestamp) }

// StoreTimestamp returns STORETIMESTAMP (its position depends on the born host width).
func (v View) StoreTimestamp() int64 { return v.i64(v.storeTS) }

// ReconsumeTimes returns RECONSUMETIMES.
func (v View) ReconsumeTimes() int32 { return v.i32(v.reconsume) }

// PreparedTransactionOffset returns PREPAREDTRANSACTIONOFFSET.
func (v View) PreparedTransactionOffset() int64 { return v.i64(v.reconsume + 4) }

// Body returns BODY, aliasing the record.
func (v View) Body() []byte { return v.b[v.bodyOff : v.bodyOff+v.bodyLen] }

// Topic returns TOPIC, aliasing the record.
func (v View) Topic() []byte { return v.b[v.topicOff : v.topicOff+v.topicLen] }

// Properties returns PROPERTIES, aliasing the record.
func (v View) Properties() []byte { return v.b[v.propsOff : v.propsOff+v.propsLen] }

// Property returns the value of one property, aliasing the record.
func (v View) Property(key string) ([]byte, bool) { return PropertyValue(v.Properties(), key) }

// Tags returns the TAGS property (the tags code input), or nil.
func (v View) Tags() []byte { t, _ := v.Property(PropertyTags); return t }

// Keys returns the KEYS property (space-separated keys), or nil.
func (v View) Keys() []byte { k, _ := v.Property(PropertyKeys); return k }

// BornHost decodes BORNHOST.
func (v View) BornHost() (netip.AddrPort, error) {
	return decodeHost(v.b[OffsetBornHost:v.storeTS])
}

// StoreHost decodes STOREHOSTADDRESS.
func (v View) StoreHost() (netip.AddrPort, error) {
	return decodeHost(v.b[v.storeHost:v.reconsume])
}

// SetQueueOffset patches QUEUEOFFSET in place.
func (v View) SetQueueOffset(o int64) { binary.BigEndian.PutUint64(v.b[OffsetQueueOffset:], uint64(o)) }

// SetPhysicalOffset patches PHYSICALOFFSET in place.
func (v View) SetPhysicalOffset(o int64) {
	binary.BigEndian.PutUint64(v.b[OffsetPhysicalOffset:], uint64(o))
}

// SetStoreTimestamp patches STORETIMESTAMP in place.
func (v View) SetStoreTimestamp(ts int64) { binary.BigEndian.PutUint64(v.b[v.storeTS:], uint64(ts)) }

// SetSysFlag patches SYSFLAG in place. Changing the IPv6 bits would break the layout, so they
// are kept as they are.
func (v View) SetSysFlag(f int32) {
	keep := v.SysFlag() & (SysFlagBornHostV6 | SysFlagStoreHostV6)
	f = f&^(SysFlagBornHostV6|SysFlagStoreHostV6) | keep
	binary.BigEndian.PutUint32(v.b[OffsetSysFlag:], uint32(f))
}

func (v View) i32(off int) int32 { return int32(binary.BigEndian.Uint32(v.b[off:])) }
func (v View) i64(off int) int64 { return int64(binary.BigEndian.Uint64(v.b[off:])) }

func decodeHost(b []byte) (netip.AddrPort, error) {
	ipLen := len(b) - 4
	port := int32(binary.BigEndian.Uint32(b[ipLen:]))
	if port < 0 || port > 65535 {
		return netip.AddrPort{}, fmt.Errorf("host port %d: %w", port, ErrMalformed)
	}
	var ip netip.Addr
	if ipLen == 4 {
		ip = netip.AddrFrom4([4]byte(b[:4]))
	} else {
		ip = netip.AddrFrom16([16]byte(b[:16]))
	}
	return netip.AddrPortFrom(ip, uint16(port)), nil
}

// CheckStored is the integrity check the store applies to every record it appends and every
// record it accepts during crash recovery. BODYCRC covers only the body, so a write torn inside
// the topic or properties would pass it; CheckStored also requires a non-empty topic made of
// legal name characters, host ports within 0-65535, and a properties string that is empty or
// ends with U+0002. Zero fill never passes; random garbage passes with negligible odds.
func (v View) CheckStored() error {
	if err := v.CheckCRC(); err != nil {
		return err
	}
	topic := v.Topic()
	if len(topic) == 0 {
		return fmt.Errorf("record topic is empty: %w", ErrMalformed)
	}
	for i, c := range topic {
		if !validNameChar(c) {
			return fmt.Errorf("record topic has illegal byte %#x at %d: %w", c, i, ErrMalformed)
		}
	}
	if _, err := v.BornHost(); err != nil {
		return err
	}
	if _, err := v.StoreHost(); err != nil {
		return err
	}
	if p := v.Properties(); len(p) > 0 && p[len(p)-1] != PropertySeparator {
		return fmt.Errorf("record properties do not end with U+0002: %w", ErrMalformed)
	}
	return nil
}
