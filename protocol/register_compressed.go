package protocol

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Compressed REGISTER_BROKER body (header compressed=true, broker option compressedRegister).
// The body is one zlib stream holding, all integers big-endian int32:
//
//	len  DataVersion JSON
//	n    topic count, then n × (len, TopicConfig text)
//	len  filterServerList JSON
//	[5.x] m mapping count, then m × (len, mapping JSON)   ignored
//
// TopicConfig text is space separated: "name readQueueNums writeQueueNums perm topicFilterType
// [attributesJSON]"; topicSysFlag and order are not carried.

// maxCompressedRegisterBody bounds the inflated size (a registration of 100k topics is ~10 MiB).
const maxCompressedRegisterBody = 64 << 20

// ErrBadCompressedBody reports a compressed registration that cannot be parsed.
var ErrBadCompressedBody = errors.New("protocol: bad compressed register body")

// DecodeCompressedRegisterBrokerBody parses the compressed form of RegisterBrokerBody.
func DecodeCompressedRegisterBrokerBody(data []byte) (*RegisterBrokerBody, error) {
	zr, err := zlib.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCompressedBody, err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxCompressedRegisterBody+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCompressedBody, err)
	}
	if len(raw) > maxCompressedRegisterBody {
		return nil, fmt.Errorf("%w: inflated body too large", ErrBadCompressedBody)
	}
	r := &chunkReader{b: raw}
	body := &RegisterBrokerBody{TopicConfigSerializeWrapper: TopicConfigSerializeWrapper{TopicConfigTable: map[string]*TopicConfig{}}}
	if err := Decode(r.chunk(), &body.TopicConfigSerializeWrapper.DataVersion); err != nil && r.err == nil {
		r.err = err
	}
	n := r.int()
	for i := int32(0); i < n && r.err == nil; i++ {
		tc, err := decodeTopicConfigText(string(r.chunk()))
		if err != nil && r.err == nil {
			r.err = err
		}
		if tc != nil {
			body.TopicConfigSerializeWrapper.TopicConfigTable[tc.TopicName] = tc
		}
	}
	if fs := r.chunk(); r.err == nil && len(fs) > 0 {
		r.err = Decode(fs, &body.FilterServerList)
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCompressedBody, r.err)
	}
	return body, nil
}

func decodeTopicConfigText(s string) (*TopicConfig, error) {
	f := strings.SplitN(s, " ", 6)
	if len(f) < 5 {
		return nil, fmt.Errorf("topic config %q: want at least 5 fields", s)
	}
	tc := NewTopicConfig(f[0])
	for i, dst := range []*int32{&tc.ReadQueueNums, &tc.WriteQueueNums, &tc.Perm} {
		n, err := strconv.ParseInt(f[i+1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("topic config %q: %w", s, err)
		}
		*dst = int32(n)
	}
	tc.TopicFilterType = f[4]
	if len(f) == 6 && f[5] != "" {
		if err := Decode([]byte(f[5]), &tc.Attributes); err != nil {
			return nil, fmt.Errorf("topic config %q attributes: %w", s, err)
		}
	}
	return tc, nil
}

// chunkReader reads big-endian length-prefixed chunks and keeps the first error.
type chunkReader struct {
	b   []byte
	err error
}

func (r *chunkReader) int() int32 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 4 {
		r.err = io.ErrUnexpectedEOF
		return 0
	}
	v := int32(binary.BigEndian.Uint32(r.b))
	r.b = r.b[4:]
	return v
}

func (r *chunkReader) chunk() []byte {
	n := r.int()
	if r.err != nil {
		return nil
	}
	if n < 0 || int(n) > len(r.b) {
		r.err = fmt.Errorf("chunk length %d exceeds remaining %d bytes", n, len(r.b))
		return nil
	}
	c := r.b[:n]
	r.b = r.b[n:]
	return c
}

// EncodeCompressedRegisterBrokerBody writes the compressed form (for brokers with
// compressedRegister=true, and for tests). Topics are written in map order.
func EncodeCompressedRegisterBrokerBody(body *RegisterBrokerBody) ([]byte, error) {
	var raw bytes.Buffer
	put := func(b []byte) {
		_ = binary.Write(&raw, binary.BigEndian, int32(len(b)))
		raw.Write(b)
	}
	w := &body.TopicConfigSerializeWrapper
	dv, err := Encode(w.DataVersion)
	if err != nil {
		return nil, err
	}
	put(dv)
	_ = binary.Write(&raw, binary.BigEndian, int32(len(w.TopicConfigTable)))
	for _, tc := range w.TopicConfigTable {
		text := fmt.Sprintf("%s %d %d %d %s", tc.TopicName, tc.ReadQueueNums, tc.WriteQueueNums, tc.Perm, tc.TopicFilterType)
		if len(tc.Attributes) > 0 {
			attrs, err := Encode(tc.Attributes)
			if err != nil {
				return nil, err
			}
			text += " " + string(attrs)
		}
		put([]byte(text))
	}
	fs := body.FilterServerList
	if fs == nil {
		fs = []string{}
	}
	fsJSON, err := Encode(fs)
	if err != nil {
		return nil, err
	}
	put(fsJSON)
	_ = binary.Write(&raw, binary.BigEndian, int32(0)) // no static-topic mappings
	var out bytes.Buffer
	zw, err := zlib.NewWriterLevel(&out, zlib.BestSpeed) // sent every registration period: speed over size
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
