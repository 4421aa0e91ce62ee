package message

import (
	"bytes"
	"net/netip"
	"reflect"
	"testing"
)

// FuzzDecodeRecord: never panic; a decoded record re-encodes to the same bytes (offsets and
// CRC included), and decoding a valid prefix followed by junk gives the same result.
func FuzzDecodeRecord(f *testing.F) {
	m := sampleMessage()
	b, _ := EncodeRecord(m)
	f.Add(b)
	m.BornHost = netip.MustParseAddrPort("[::1]:1")
	b6, _ := EncodeRecord(m)
	f.Add(b6)
	f.Add(b[:50])
	f.Add([]byte{0, 0, 0, 91, 0xDA, 0xA3, 0x20, 0xA7})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, n, err := DecodeRecord(data)
		if err != nil {
			return
		}
		if n > len(data) || n < MinRecordSize {
			t.Fatalf("consumed %d of %d", n, len(data))
		}
		if m.Topic == "" || len(m.Topic) > MaxTopicLength {
			return // decodable, but the encoder refuses to produce it
		}
		again, err := EncodeRecord(m)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, _, err := DecodeRecord(again)
		if err != nil {
			t.Fatalf("decode re-encoded: %v", err)
		}
		if !reflect.DeepEqual(normalize(back), normalize(m)) {
			t.Fatalf("encode/decode round trip differs:\n%+v\n%+v", back, m)
		}
		m2, n2, err := DecodeRecord(append(bytes.Clone(data[:n]), 1, 2, 3))
		if err != nil || n2 != n || m2.Topic != m.Topic || !bytes.Equal(m2.Body, m.Body) {
			t.Fatalf("prefix decode differs: %v", err)
		}
	})
}

// normalize removes the encoding choices a decoded record may carry but the encoder makes
// itself: IPv4-mapped addresses in IPv6 fields and the matching sysFlag bits.
func normalize(m *Message) *Message {
	c := *m
	c.SysFlag &^= SysFlagBornHostV6 | SysFlagStoreHostV6
	c.BornHost = netip.AddrPortFrom(c.BornHost.Addr().Unmap(), c.BornHost.Port())
	c.StoreHost = netip.AddrPortFrom(c.StoreHost.Addr().Unmap(), c.StoreHost.Port())
	return &c
}

// FuzzDecodeBatch: never panic; entries re-encode to the same bytes apart from MAGIC and CRC.
func FuzzDecodeBatch(f *testing.F) {
	b, _ := EncodeBatch([]BatchEntry{{Flag: 1, Body: []byte("x"), Properties: "a\x01b\x02"}, {Body: []byte("yz")}})
	f.Add(b)
	f.Add(b[:10])
	f.Add([]byte{0, 0, 0, 22, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := DecodeBatch(data)
		if err != nil {
			return
		}
		again, err := EncodeBatch(es)
		if err != nil || len(again) != len(data) {
			t.Fatalf("re-encode: %v, %d vs %d bytes", err, len(again), len(data))
		}
		back, err := DecodeBatch(again)
		if err != nil || len(back) != len(es) {
			t.Fatalf("re-decode: %v", err)
		}
	})
}

// FuzzParseProperties: never panic; parsing a formatted map gives the map back; PropertyValue
// and PropertyString agree with ParseProperties.
func FuzzParseProperties(f *testing.F) {
	f.Add("TAGS\x01TagA\x02KEYS\x01k1 k2\x02")
	f.Add("\x01\x02\x01")
	f.Add("a\x01b\x01c\x02")
	f.Fuzz(func(t *testing.T, s string) {
		m := ParseProperties(s)
		for k, v := range m {
			got, ok := PropertyValue([]byte(s), k)
			if !ok || string(got) != v {
				t.Fatalf("PropertyValue(%q) = %q, map says %q", k, got, v)
			}
			if got, ok := PropertyString(s, k); !ok || got != v {
				t.Fatalf("PropertyString(%q) = %q, map says %q", k, got, v)
			}
		}
		clean := map[string]string{}
		for k, v := range m {
			if validPropertyPart(k) && validPropertyPart(v) {
				clean[k] = v
			}
		}
		back := ParseProperties(FormatProperties(clean))
		if len(back) != len(clean) {
			t.Fatalf("format/parse lost pairs: %v vs %v", back, clean)
		}
		for k, v := range clean {
			if back[k] != v {
				t.Fatalf("pair %q: %q vs %q", k, back[k], v)
			}
		}
	})
}
