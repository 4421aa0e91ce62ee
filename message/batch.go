package message

import (
	"encoding/binary"
	"fmt"
)

// batchEntryHeader is the fixed part of a batch entry: TOTALSIZE, MAGIC, BODYCRC, FLAG,
// BODYLENGTH, and the PROPERTIESLENGTH short after the body.
const batchEntryHeader = 22

// BatchEntry is one message of a SEND_BATCH_MESSAGE body (§5.6). Body aliases the decoded input.
type BatchEntry struct {
	Flag       int32
	Body       []byte
	Properties string
}

// DecodeBatch splits a batch body into its entries. It is strict: every entry's TOTALSIZE must
// equal 22 + BODYLENGTH + PROPERTIESLENGTH and fit in what is left; an empty body is an error.
// It never panics.
func DecodeBatch(body []byte) ([]BatchEntry, error) {
	if len(body) == 0 {
		return nil, fmt.Errorf("batch body is empty: %w", ErrMalformed)
	}
	be := binary.BigEndian
	var out []BatchEntry
	for pos := 0; pos < len(body); {
		rest := body[pos:]
		if len(rest) < batchEntryHeader {
			return nil, fmt.Errorf("batch entry %d at %d: %d bytes left, header needs %d: %w", len(out), pos, len(rest), batchEntryHeader, ErrMalformed)
		}
		total := int64(int32(be.Uint32(rest)))
		if total < batchEntryHeader || total > int64(len(rest)) {
			return nil, fmt.Errorf("batch entry %d at %d: TOTALSIZE %d with %d bytes left: %w", len(out), pos, total, len(rest), ErrMalformed)
		}
		e := rest[:total]
		n := int64(int32(be.Uint32(e[16:])))
		if n < 0 || 20+n+2 > total {
			return nil, fmt.Errorf("batch entry %d at %d: BODYLENGTH %d exceeds TOTALSIZE %d: %w", len(out), pos, n, total, ErrMalformed)
		}
		p := int64(int16(be.Uint16(e[20+n:])))
		if p < 0 || batchEntryHeader+n+p != total {
			return nil, fmt.Errorf("batch entry %d at %d: PROPERTIESLENGTH %d inconsistent with TOTALSIZE %d: %w", len(out), pos, p, total, ErrMalformed)
		}
		out = append(out, BatchEntry{
			Flag:       int32(be.Uint32(e[12:])),
			Body:       e[20 : 20+n : 20+n],
			Properties: string(e[22+n:]),
		})
		pos += int(total)
	}
	return out, nil
}

// EncodeBatch builds a batch body the way clients do (MAGICCODE and BODYCRC 0). Tools and tests
// use it; the broker only decodes.
func EncodeBatch(entries []BatchEntry) ([]byte, error) {
	var out []byte
	be := binary.BigEndian
	for i, e := range entries {
		if len(e.Properties) > MaxPropertiesLength {
			return nil, fmt.Errorf("batch entry %d: properties are %d bytes: %w", i, len(e.Properties), ErrMalformed)
		}
		total := batchEntryHeader + len(e.Body) + len(e.Properties)
		out = be.AppendUint32(out, uint32(total))
		out = be.AppendUint32(out, 0)
		out = be.AppendUint32(out, 0)
		out = be.AppendUint32(out, uint32(e.Flag))
		out = be.AppendUint32(out, uint32(len(e.Body)))
		out = append(out, e.Body...)
		out = be.AppendUint16(out, uint16(len(e.Properties)))
		out = append(out, e.Properties...)
	}
	return out, nil
}
