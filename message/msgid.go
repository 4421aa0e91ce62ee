package message

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
)

// OffsetMsgID renders the offset message id (§5.9) of the record stored at physOffset by
// storeHost: IP, port (4 bytes) and offset (8 bytes) as upper-case hex, 32 characters for IPv4
// and 56 for IPv6. Clients decode it to reach the storing broker (VIEW_MESSAGE_BY_ID).
func OffsetMsgID(storeHost netip.AddrPort, physOffset int64) string {
	var text [56]byte
	return string(AppendOffsetMsgID(text[:0], storeHost, physOffset))
}

// AppendOffsetMsgID appends OffsetMsgID's text to dst, so that a send's answer builds its ids
// in one buffer: the id is written once per acknowledged message.
func AppendOffsetMsgID(dst []byte, storeHost netip.AddrPort, physOffset int64) []byte {
	var raw [28]byte
	b := appendHost(raw[:0], storeHost)
	b = binary.BigEndian.AppendUint64(b, uint64(physOffset))
	for _, c := range b {
		dst = append(dst, upperHex[c>>4], upperHex[c&0x0F])
	}
	return dst
}

const upperHex = "0123456789ABCDEF"

// ParseOffsetMsgID decodes an offset message id (either hex case) into the store host and the
// commitlog offset.
func ParseOffsetMsgID(s string) (netip.AddrPort, int64, error) {
	if len(s) != 32 && len(s) != 56 {
		return netip.AddrPort{}, 0, fmt.Errorf("offset msgId %q: length %d, want 32 or 56: %w", s, len(s), ErrMalformed)
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return netip.AddrPort{}, 0, fmt.Errorf("offset msgId %q: %v: %w", s, err, ErrMalformed)
	}
	host, err := decodeHost(b[:len(b)-8])
	if err != nil {
		return netip.AddrPort{}, 0, fmt.Errorf("offset msgId %q: %w", s, err)
	}
	return host, int64(binary.BigEndian.Uint64(b[len(b)-8:])), nil
}
