package message

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
)

// OffsetMsgID renders the offset message id (§5.9) of the record stored at physOffset by
// storeHost: IP, port (4 bytes) and offset (8 bytes) as upper-case hex, 32 characters for IPv4
// and 56 for IPv6. Clients decode it to reach the storing broker (VIEW_MESSAGE_BY_ID).
func OffsetMsgID(storeHost netip.AddrPort, physOffset int64) string {
	b := make([]byte, 0, 28)
	b = appendHost(b, storeHost)
	b = binary.BigEndian.AppendUint64(b, uint64(physOffset))
	return strings.ToUpper(hex.EncodeToString(b))
}

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
