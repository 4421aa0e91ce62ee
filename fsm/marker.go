package fsm

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path/filepath"

	"rocketraft/storage/vfs"
)

// markerName is the applied-index marker file in the store root.
const markerName = "raftapplied"

const (
	markerFileSize = 4096
	markerSlotSize = 64
	markerMagic    = 0x52524d4b // "RRMK"
	markerVersion  = 1
)

// applied is what the marker records: the state of the store after the last applied entry.
type applied struct {
	Index     uint64 // Raft index of the last applied entry (0: none)
	Term      uint64 // its term
	End       int64  // commitlog end offset after it
	MetaIndex uint64 // Raft index of the last metadata entry applied
}

// marker is the mapped marker file: two checksummed slots written alternately, so a torn write
// of one leaves the other. Writes are not synced (see the package doc).
type marker struct {
	m   vfs.Mapping
	b   []byte
	seq uint64
}

// openMarker maps (creating) the marker in root and returns the newest valid slot, if any.
func openMarker(fsys vfs.FS, root string) (*marker, applied, bool, error) {
	m, err := fsys.Map(filepath.Join(root, markerName), markerFileSize)
	if err != nil {
		return nil, applied{}, false, fmt.Errorf("fsm marker: %w", err)
	}
	mk := &marker{m: m, b: m.Bytes()}
	var best applied
	found := false
	for i := 0; i < 2; i++ {
		a, seq, ok := decodeSlot(mk.b[i*markerSlotSize : (i+1)*markerSlotSize])
		if ok && (!found || seq > mk.seq) {
			best, mk.seq, found = a, seq, true
		}
	}
	return mk, best, found, nil
}

func decodeSlot(b []byte) (applied, uint64, bool) {
	be := binary.BigEndian
	if be.Uint32(b) != markerMagic || be.Uint16(b[4:]) != markerVersion {
		return applied{}, 0, false
	}
	if crc32.Checksum(b[:60], castagnoli) != be.Uint32(b[60:]) {
		return applied{}, 0, false
	}
	a := applied{Index: be.Uint64(b[16:]), Term: be.Uint64(b[24:]), End: int64(be.Uint64(b[32:])), MetaIndex: be.Uint64(b[40:])}
	return a, be.Uint64(b[8:]), true
}

func encodeSlot(b []byte, seq uint64, a applied) {
	be := binary.BigEndian
	clear(b[:markerSlotSize])
	be.PutUint32(b, markerMagic)
	be.PutUint16(b[4:], markerVersion)
	be.PutUint64(b[8:], seq)
	be.PutUint64(b[16:], a.Index)
	be.PutUint64(b[24:], a.Term)
	be.PutUint64(b[32:], uint64(a.End))
	be.PutUint64(b[40:], a.MetaIndex)
	be.PutUint32(b[60:], crc32.Checksum(b[:60], castagnoli))
}

// write records a in the slot the newest one is not in. It does not sync.
func (mk *marker) write(a applied) {
	mk.seq++
	i := int(mk.seq % 2)
	encodeSlot(mk.b[i*markerSlotSize:], mk.seq, a)
}

// sync makes the marker durable.
func (mk *marker) sync() error {
	if err := mk.m.Sync(0, 2*markerSlotSize); err != nil {
		return fmt.Errorf("fsm marker: %w", err)
	}
	return nil
}

func (mk *marker) close() error { return mk.m.Close() }
