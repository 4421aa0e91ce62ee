package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/hashicorp/raft"

	"rocketraft/message"
)

// An entry header is the body of the record that precedes each Raft entry's records in the
// commitlog when the commitlog is the Raft log (EntryLog). It holds what Raft needs that the
// records do not: index, term, type, the time the leader appended it, the entry's extensions,
// how to rebuild the entry's Data from the records that follow, and, for an entry whose Data is
// not records (metadata, digest checks, Raft's own configuration and no-op entries), that Data.
//
// Layout (integers big-endian):
//
//	offset  size  field
//	0       4     magic 0x52524548 ("RREH")
//	4       1     version = 1
//	5       1     raft.LogType
//	6       1     form: 0 opaque (Data is the payload), 1 message entry, 2 delay-delivery step
//	7       1     zero
//	8       8     index
//	16      8     term
//	24      8     AppendedAt, Unix nanoseconds (0: not set)
//	32      4     R: records that follow the header record
//	36      4     their total length in bytes
//	40      4     CRC-32C of those records with each PHYSICALOFFSET field read as zeros
//	44      4     X: extensions length
//	48      4     P: payload length
//	52      X     extensions
//	52+X    P     payload: form 0 the entry's Data; form 1 the number of appends A (4) and each
//	              append's record count (4 each); form 2 the step's level (4), from (8), to (8)
//	end-4   4     CRC-32C of every byte before it
//
// The header record itself is a stored record of topic message.RaftEntryTopic, queue 0, queue
// offset = the entry's index, the rolled-back transaction type (so nothing dispatches or indexes
// it), born and store time = AppendedAt in milliseconds (1 when unset: a stored record needs a
// store time), hosts 0.0.0.0:0. Every field derives from the entry, so every replica writes the
// same bytes.

const (
	entryHeaderMagic   = 0x52524548
	entryHeaderVersion = 1
	entryHeaderFixed   = 52

	formOpaque   = 0
	formMessages = 1
	formSchedule = 2
)

var errBadEntryHeader = errors.New("fsm: malformed raft entry header")

// entryHeader is a decoded entry header.
type entryHeader struct {
	Type       raft.LogType
	Form       uint8
	Index      uint64
	Term       uint64
	AppendedAt int64
	Records    int
	RecordsLen int
	RecordsCRC uint32
	Extensions []byte
	Payload    []byte
}

// encodeEntryHeader returns h's body.
func encodeEntryHeader(h *entryHeader) []byte {
	b := make([]byte, 0, entryHeaderFixed+len(h.Extensions)+len(h.Payload)+4)
	be := binary.BigEndian
	b = be.AppendUint32(b, entryHeaderMagic)
	b = append(b, entryHeaderVersion, byte(h.Type), h.Form, 0)
	b = be.AppendUint64(b, h.Index)
	b = be.AppendUint64(b, h.Term)
	b = be.AppendUint64(b, uint64(h.AppendedAt))
	b = be.AppendUint32(b, uint32(h.Records))
	b = be.AppendUint32(b, uint32(h.RecordsLen))
	b = be.AppendUint32(b, h.RecordsCRC)
	b = be.AppendUint32(b, uint32(len(h.Extensions)))
	b = be.AppendUint32(b, uint32(len(h.Payload)))
	b = append(b, h.Extensions...)
	b = append(b, h.Payload...)
	return be.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeEntryHeader parses a header body; the slices it returns alias b.
func decodeEntryHeader(b []byte) (*entryHeader, error) {
	be := binary.BigEndian
	if len(b) < entryHeaderFixed+4 {
		return nil, fmt.Errorf("%w: %d bytes", errBadEntryHeader, len(b))
	}
	body, sum := b[:len(b)-4], be.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: CRC mismatch", errBadEntryHeader)
	}
	if be.Uint32(body) != entryHeaderMagic || body[4] != entryHeaderVersion {
		return nil, fmt.Errorf("%w: magic %#x version %d", errBadEntryHeader, be.Uint32(body), body[4])
	}
	h := &entryHeader{
		Type: raft.LogType(body[5]), Form: body[6],
		Index: be.Uint64(body[8:]), Term: be.Uint64(body[16:]), AppendedAt: int64(be.Uint64(body[24:])),
		Records: int(be.Uint32(body[32:])), RecordsLen: int(be.Uint32(body[36:])), RecordsCRC: be.Uint32(body[40:]),
	}
	x, p := int(be.Uint32(body[44:])), int(be.Uint32(body[48:]))
	if x < 0 || p < 0 || entryHeaderFixed+x+p != len(body) {
		return nil, fmt.Errorf("%w: extensions %d and payload %d do not fill %d bytes", errBadEntryHeader, x, p, len(body))
	}
	if h.Form > formSchedule || h.Records < 0 || h.RecordsLen < 0 || (h.Form == formOpaque && h.Records != 0) {
		return nil, fmt.Errorf("%w: form %d with %d records", errBadEntryHeader, h.Form, h.Records)
	}
	h.Extensions = body[entryHeaderFixed : entryHeaderFixed+x : entryHeaderFixed+x]
	h.Payload = body[entryHeaderFixed+x:]
	return h, nil
}

// headerRecord encodes h as the record that precedes the entry's records.
func headerRecord(h *entryHeader) ([]byte, error) {
	ms := h.AppendedAt / int64(time.Millisecond)
	if ms <= 0 {
		ms = 1
	}
	return message.EncodeRecord(&message.Message{
		Topic:          message.RaftEntryTopic,
		QueueOffset:    int64(h.Index),
		SysFlag:        message.TransactionRollbackType,
		BornTimestamp:  ms,
		StoreTimestamp: ms,
		Body:           encodeEntryHeader(h),
	})
}

// recordsCRC is the CRC-32C of recs laid end to end, each record's PHYSICALOFFSET read as
// zeros: the store sets that field as it writes them, the header is encoded before.
func recordsCRC(recs [][]byte) uint32 {
	var zero [8]byte
	sum := uint32(0)
	for _, r := range recs {
		sum = crc32.Update(sum, castagnoli, r[:message.OffsetPhysicalOffset])
		sum = crc32.Update(sum, castagnoli, zero[:])
		sum = crc32.Update(sum, castagnoli, r[message.OffsetPhysicalOffset+8:])
	}
	return sum
}

// splitRecords walks n stored records laid end to end in b.
func splitRecords(b []byte, n int) ([][]byte, error) {
	recs := make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		if len(b) < 8 {
			return nil, fmt.Errorf("%w: record %d of %d: %d bytes left", errBadEntryHeader, i, n, len(b))
		}
		size := int(int32(binary.BigEndian.Uint32(b)))
		if size < message.MinRecordSize || size > len(b) {
			return nil, fmt.Errorf("%w: record %d of %d: size %d with %d bytes left", errBadEntryHeader, i, n, size, len(b))
		}
		recs = append(recs, b[:size:size])
		b = b[size:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after %d records", errBadEntryHeader, len(b), n)
	}
	return recs, nil
}

// entryParts is how an entry is laid out in the commitlog: its header and the records after it.
type entryParts struct {
	hdr  entryHeader
	recs [][]byte
}

// splitEntry decides how l is stored. A message entry or a delay-delivery step whose records
// are stored records in canonical form (each record's TOTALSIZE its length in the envelope,
// PHYSICALOFFSET 0, a store time set) is stored as its records, which the state machine then
// dispatches where they lie; anything else, and every other entry, is stored whole in the
// header (form 0): its records, if any, never reach a consume queue.
func splitEntry(l *raft.Log) entryParts {
	p := entryParts{hdr: entryHeader{Type: l.Type, Index: l.Index, Term: l.Term, Extensions: l.Extensions}}
	if !l.AppendedAt.IsZero() {
		p.hdr.AppendedAt = l.AppendedAt.UnixNano()
	}
	if l.Type == raft.LogCommand && len(l.Data) > 0 {
		switch l.Data[0] {
		case KindMessages:
			if appends, err := DecodeMessages(l.Data); err == nil && canonical(appends...) {
				pay := binary.BigEndian.AppendUint32(make([]byte, 0, 4+4*len(appends)), uint32(len(appends)))
				for _, recs := range appends {
					pay = binary.BigEndian.AppendUint32(pay, uint32(len(recs)))
					p.recs = append(p.recs, recs...)
				}
				p.hdr.Form, p.hdr.Payload = formMessages, pay
			}
		case KindScheduleDeliver:
			if d, err := DecodeScheduleDeliver(l.Data); err == nil && canonical(d.Records) {
				p.recs = d.Records
				p.hdr.Form, p.hdr.Payload = formSchedule, l.Data[1:scheduleHeader-4:scheduleHeader-4]
			}
		}
	}
	if p.hdr.Form == formOpaque {
		p.recs, p.hdr.Payload = nil, l.Data
	}
	p.hdr.Records = len(p.recs)
	for _, r := range p.recs {
		p.hdr.RecordsLen += len(r)
	}
	p.hdr.RecordsCRC = recordsCRC(p.recs)
	return p
}

// canonical reports whether every record is a stored record exactly as long as its slice, with
// PHYSICALOFFSET 0 and a store time: then the entry's Data can be rebuilt from the stored
// records, byte for byte, once PHYSICALOFFSET is zeroed again.
func canonical(appends ...[][]byte) bool {
	for _, recs := range appends {
		if len(recs) == 0 {
			return false
		}
		for _, r := range recs {
			v, err := message.ParseView(r)
			if err != nil || v.Size() != len(r) || v.PhysicalOffset() != 0 || v.StoreTimestamp() == 0 {
				return false
			}
		}
	}
	return true
}

// entryData rebuilds the Data of the entry described by h from its stored records (which it
// modifies: their PHYSICALOFFSET is zeroed).
func entryData(h *entryHeader, recs [][]byte) ([]byte, error) {
	be := binary.BigEndian
	for _, r := range recs {
		clear(r[message.OffsetPhysicalOffset : message.OffsetPhysicalOffset+8])
	}
	switch h.Form {
	case formOpaque:
		return h.Payload, nil
	case formMessages:
		pay := h.Payload
		if len(pay) < 4 {
			return nil, fmt.Errorf("%w: message entry payload of %d bytes", errBadEntryHeader, len(pay))
		}
		a := int(be.Uint32(pay))
		if len(pay) != 4+4*a {
			return nil, fmt.Errorf("%w: %d appends in a payload of %d bytes", errBadEntryHeader, a, len(pay))
		}
		appends := make([][][]byte, a)
		rest := recs
		for i := range appends {
			n := int(be.Uint32(pay[4+4*i:]))
			if n < 1 || n > len(rest) {
				return nil, fmt.Errorf("%w: append %d has %d records, %d left", errBadEntryHeader, i, n, len(rest))
			}
			appends[i], rest = rest[:n], rest[n:]
		}
		if len(rest) != 0 {
			return nil, fmt.Errorf("%w: %d records after the last append", errBadEntryHeader, len(rest))
		}
		return EncodeMessages(appends), nil
	case formSchedule:
		if len(h.Payload) != scheduleHeader-5 {
			return nil, fmt.Errorf("%w: delivery step payload of %d bytes", errBadEntryHeader, len(h.Payload))
		}
		n := scheduleHeader + 4
		for _, r := range recs {
			n += 4 + len(r)
		}
		b := make([]byte, 0, n)
		b = append(b, KindScheduleDeliver)
		b = append(b, h.Payload...)
		b = be.AppendUint32(b, uint32(len(recs)))
		for _, r := range recs {
			b = be.AppendUint32(b, uint32(len(r)))
			b = append(b, r...)
		}
		return be.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
	}
	return nil, fmt.Errorf("%w: form %d", errBadEntryHeader, h.Form)
}
