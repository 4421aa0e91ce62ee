package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"sync"

	"rocketraft/storage/vfs"
)

// markerName is the applied-index marker file in the store root.
const markerName = "raftapplied"

const (
	markerFileSize = 4096
	markerMagic    = 0x52524d4b // "RRMK"

	// Version 1 (before 2026-12): 64-byte slots at 0 and 64, no digest, no floor. Read, never
	// written: the first write after an upgrade goes to the version-2 slot at 128, which does
	// not overlap them, so a torn first write still leaves the version-1 slot.
	markerV1         = 1
	markerV1SlotSize = 64
	markerV2         = 2
	markerSlotSize   = 128
)

// applied is what the marker records: a state of the store and the digest of the entries that
// made it.
type applied struct {
	Index     uint64 // Raft index of the last applied entry (0: none)
	Term      uint64 // its term
	End       int64  // commitlog end offset after it
	MetaIndex uint64 // Raft index of the last metadata entry applied
	Digest    uint64 // running digest of every applied entry through Index (digest.go)
}

// markerState is one slot: the durable applied state, and the floor, the latest state that a
// full store flush made durable before a snapshot or a topic deletion named it (see the package
// doc: the floor is where a store that lost data it had synced restarts from).
type markerState struct {
	Cur, Floor  applied
	DigestKnown bool // false: written by a version without digests
}

// marker is the mapped marker file: two checksummed slots written alternately, so a torn write
// of one leaves the other. It is written only with states whose commitlog bytes are already
// durable, and synced at once (writeSync), so that whatever the kernel writes back of it, the
// marker on disk never names data the commitlog on disk may lack.
type marker struct {
	mu      sync.Mutex
	m       vfs.Mapping
	b       []byte
	seq     uint64
	last    markerState // what the newest slot holds
	closed  bool
	written bool // a version-2 slot has been written
}

// openMarker maps (creating) the marker in root and returns the newest valid slot, if any.
func openMarker(fsys vfs.FS, root string) (*marker, markerState, bool, error) {
	m, err := fsys.Map(filepath.Join(root, markerName), markerFileSize)
	if err != nil {
		return nil, markerState{}, false, fmt.Errorf("fsm marker: %w", err)
	}
	mk := &marker{m: m, b: m.Bytes()}
	found := false
	for i := 0; i < 2; i++ {
		st, seq, ok := decodeSlotV2(mk.b[i*markerSlotSize : (i+1)*markerSlotSize])
		if ok && (!found || seq > mk.seq) {
			mk.last, mk.seq, found = st, seq, true
		}
	}
	if found {
		mk.written = true
		return mk, mk.last, true, nil
	}
	for i := 0; i < 2; i++ {
		a, seq, ok := decodeSlotV1(mk.b[i*markerV1SlotSize : (i+1)*markerV1SlotSize])
		if ok && (!found || seq > mk.seq) {
			mk.last, mk.seq, found = markerState{Cur: a}, seq, true
		}
	}
	if found && mk.seq%2 == 0 {
		mk.seq++ // the next write (seq+1, even) goes to slot 0 otherwise: make it slot 1
	}
	return mk, mk.last, found, nil
}

func decodeSlotV1(b []byte) (applied, uint64, bool) {
	be := binary.BigEndian
	if be.Uint32(b) != markerMagic || be.Uint16(b[4:]) != markerV1 {
		return applied{}, 0, false
	}
	if crc32.Checksum(b[:60], castagnoli) != be.Uint32(b[60:]) {
		return applied{}, 0, false
	}
	a := applied{Index: be.Uint64(b[16:]), Term: be.Uint64(b[24:]), End: int64(be.Uint64(b[32:])), MetaIndex: be.Uint64(b[40:])}
	return a, be.Uint64(b[8:]), true
}

func decodeSlotV2(b []byte) (markerState, uint64, bool) {
	be := binary.BigEndian
	if be.Uint32(b) != markerMagic || be.Uint16(b[4:]) != markerV2 {
		return markerState{}, 0, false
	}
	if crc32.Checksum(b[:124], castagnoli) != be.Uint32(b[124:]) {
		return markerState{}, 0, false
	}
	st := markerState{Cur: getApplied(b[16:]), Floor: getApplied(b[56:]), DigestKnown: be.Uint16(b[6:])&1 != 0}
	return st, be.Uint64(b[8:]), true
}

func getApplied(b []byte) applied {
	be := binary.BigEndian
	return applied{Index: be.Uint64(b), Term: be.Uint64(b[8:]), End: int64(be.Uint64(b[16:])), MetaIndex: be.Uint64(b[24:]), Digest: be.Uint64(b[32:])}
}

func putApplied(b []byte, a applied) {
	be := binary.BigEndian
	be.PutUint64(b, a.Index)
	be.PutUint64(b[8:], a.Term)
	be.PutUint64(b[16:], uint64(a.End))
	be.PutUint64(b[24:], a.MetaIndex)
	be.PutUint64(b[32:], a.Digest)
}

func encodeSlotV2(b []byte, seq uint64, st markerState) {
	be := binary.BigEndian
	clear(b[:markerSlotSize])
	be.PutUint32(b, markerMagic)
	be.PutUint16(b[4:], markerV2)
	if st.DigestKnown {
		be.PutUint16(b[6:], 1)
	}
	be.PutUint64(b[8:], seq)
	putApplied(b[16:], st.Cur)
	putApplied(b[56:], st.Floor)
	be.PutUint32(b[124:], crc32.Checksum(b[:124], castagnoli))
}

// errMarkerClosed: the marker was closed (the store it describes was closed or replaced).
var errMarkerClosed = errors.New("fsm marker: closed")

// writeSync records st in the slot the newest one is not in and makes it durable. The caller
// must have made st.Cur's commitlog bytes (and st.Floor's whole store) durable first. A state
// older than the newest written is not written: the marker never moves back.
func (mk *marker) writeSync(st markerState) error {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	if mk.closed {
		return errMarkerClosed
	}
	if mk.written && st.Cur.Index < mk.last.Cur.Index {
		return nil
	}
	if st.Floor.Index < mk.last.Floor.Index {
		st.Floor = mk.last.Floor
	}
	return mk.writeSyncLocked(st)
}

// rewind records st even though it is older than the newest slot: the store was truncated back
// to it (see FSM.open). The caller must have made st's whole store durable.
func (mk *marker) rewind(st markerState) error {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	if mk.closed {
		return errMarkerClosed
	}
	return mk.writeSyncLocked(st)
}

func (mk *marker) writeSyncLocked(st markerState) error {
	mk.seq++
	i := int(mk.seq % 2)
	encodeSlotV2(mk.b[i*markerSlotSize:], mk.seq, st)
	if err := mk.m.Sync(i*markerSlotSize, markerSlotSize); err != nil {
		return fmt.Errorf("fsm marker: %w", err)
	}
	mk.last, mk.written = st, true
	return nil
}

// state returns what the newest slot holds, and whether this version wrote it (false: nothing,
// or a version-1 slot).
func (mk *marker) state() (markerState, bool) {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	return mk.last, mk.written
}

func (mk *marker) close() error {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	if mk.closed {
		return nil
	}
	mk.closed = true
	return mk.m.Close()
}
