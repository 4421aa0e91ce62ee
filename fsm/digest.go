package fsm

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/hashicorp/raft"

	"rocketraft/storage/vfs"
)

// Divergence detection. Raft's log matching promises that replicas which applied the same index
// applied the same entries; a bug (ours or the library's) that breaks it is silent: each replica
// serves its own history. So every node keeps a running digest of what it applied,
//
//	digest(i) = xxhash64(digest(i-1) as 8 bytes big-endian || i as 8 bytes big-endian || entry data)
//
// over every command entry, and the leader proposes, every few seconds, a KindDigestCheck entry
// carrying (k, digest(k)) for an index k it has applied. Each replica that applies the check
// compares its own digest(k) (kept for the last digestRing indexes) and, on a mismatch, stops
// applying, records the divergence in a file next to its store (New refuses to open a store
// that diverged) and reports it through Config.OnDiverged. The digest is in the applied marker
// and in snapshots, so it survives restarts and restores. A node that does not know its digest
// (its state was written by a version without digests) checks nothing; a leader in that state
// proposes a rebase instead of a check (k = 0): every replica that applies it restarts its
// digest at that index from the same value, so checks resume without a false alarm.
//
// KindDigestCheck (5):
//
//	offset  size  field
//	0       1     kind = 5
//	1       8     index k of the digest (big-endian); 0: a rebase
//	9       8     digest(k) on the proposer
//	17      4     CRC-32C of bytes 0..16

// KindDigestCheck is the entry kind of a digest check (see the doc above).
const KindDigestCheck byte = 5

const (
	digestCheckSize = 21
	// digestRing is how many recent (index, digest) pairs a replica keeps for checks: a check is
	// proposed for an index the leader has applied and committed a few entries later, so a
	// replica that applies the check still holds the digest unless thousands of entries came in
	// between (then the check is skipped).
	digestRing = 8192
	// digestFileName is the snapshot's metadata frame that carries the digest at its index.
	digestFileName = "fsm.digest"
	// divergedName is the file that records a divergence, in the FSM's data directory.
	divergedName = "DIVERGED"
)

// ErrDiverged: this replica applied something other than its leader did; it must be rebuilt
// from its group.
var ErrDiverged = errors.New("fsm: replica diverged from its group")

// Divergence describes a failed digest check.
type Divergence struct {
	Index        uint64    `json:"index"`        // the index whose digests differ
	CheckIndex   uint64    `json:"checkIndex"`   // the check entry's index
	CheckTerm    uint64    `json:"checkTerm"`    // and its term
	LocalDigest  uint64    `json:"localDigest"`  // this replica's digest at Index
	LeaderDigest uint64    `json:"leaderDigest"` // the proposer's
	At           time.Time `json:"at"`
}

func (d *Divergence) String() string {
	return fmt.Sprintf("replica diverged: at raft index %d this node's digest is %016x, the leader's (check entry %d, term %d) is %016x",
		d.Index, d.LocalDigest, d.CheckIndex, d.CheckTerm, d.LeaderDigest)
}

// EncodeDigestCheck builds a KindDigestCheck entry for (index, digest).
func EncodeDigestCheck(index, digest uint64) []byte {
	b := make([]byte, digestCheckSize)
	b[0] = KindDigestCheck
	binary.BigEndian.PutUint64(b[1:], index)
	binary.BigEndian.PutUint64(b[9:], digest)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[:17], castagnoli))
	return b
}

// DecodeDigestCheck parses a KindDigestCheck entry.
func DecodeDigestCheck(b []byte) (index, digest uint64, err error) {
	if len(b) != digestCheckSize || b[0] != KindDigestCheck {
		return 0, 0, fmt.Errorf("fsm: digest check entry of %d bytes", len(b))
	}
	if crc32.Checksum(b[:17], castagnoli) != binary.BigEndian.Uint32(b[17:]) {
		return 0, 0, errors.New("fsm: digest check entry: CRC mismatch")
	}
	return binary.BigEndian.Uint64(b[1:]), binary.BigEndian.Uint64(b[9:]), nil
}

// digester is the running digest and the ring of recent values.
type digester struct {
	h     *xxhash.Digest
	index uint64 // the last index digested
	sum   uint64 // digest(index)
	known bool   // false: the digest of the state this node started from is not known
	ring  [digestRing]struct{ index, sum uint64 }
}

func newDigester() *digester { return &digester{h: xxhash.New()} }

// reset starts from a state: sum is digest(index) if known.
func (d *digester) reset(index, sum uint64, known bool) {
	d.index, d.sum, d.known = index, sum, known
	d.ring = [digestRing]struct{ index, sum uint64 }{}
	d.remember()
}

func (d *digester) remember() {
	d.ring[d.index%digestRing] = struct{ index, sum uint64 }{d.index, d.sum}
}

// add digests entry l if it is the next one.
func (d *digester) add(l *raft.Log) {
	if l.Index <= d.index {
		return
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:], d.sum)
	binary.BigEndian.PutUint64(b[8:], l.Index)
	d.h.Reset()
	d.h.Write(b[:])
	d.h.Write(l.Data)
	d.index, d.sum = l.Index, d.h.Sum64()
	d.remember()
}

// at returns digest(index) if it is still in the ring and known.
func (d *digester) at(index uint64) (uint64, bool) {
	e := d.ring[index%digestRing]
	return e.sum, d.known && e.index == index && index != 0
}

// Digest returns the index of the last entry this node applied and the running digest through
// it; ok is false while this node does not know its digest (see the doc above). The leader
// proposes EncodeDigestCheck(Digest()).
func (f *FSM) Digest() (index, digest uint64, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dig.index, f.dig.sum, f.dig.known
}

// CheckedIndex is the last index a digest check confirmed on this node (0: none yet).
func (f *FSM) CheckedIndex() uint64 { return f.checked.Load() }

// Diverged returns the divergence this replica found, or nil.
func (f *FSM) Diverged() *Divergence { return f.divergence.Load() }

// applyDigestCheck compares this node's digest at the check's index with the proposer's. The
// check itself has already been digested (Apply digests every entry first).
func (f *FSM) applyDigestCheck(l *raft.Log) interface{} {
	k, theirs, err := DecodeDigestCheck(l.Data)
	if err != nil {
		panic(fmt.Sprintf("fsm: raft entry %d (term %d): %v; a state machine must not skip an entry", l.Index, l.Term, err))
	}
	if l.Index <= f.cur.Index {
		return nil // a replay: the marker's digest already covers it
	}
	f.advance(l, false)
	if k == 0 {
		// A rebase: every replica restarts its digest here, at the same index, from the same
		// value, whatever it knew before (the leader proposes one when it does not know its own).
		f.dig.reset(l.Index-1, 0, true)
		f.dig.add(l)
		f.cur.Digest = f.dig.sum
		f.log.Info("state digest rebased", "index", l.Index)
		return nil
	}
	if !f.dig.known {
		return nil
	}
	mine, ok := f.dig.at(k)
	if !ok {
		f.log.Debug("digest check skipped: index no longer in the ring", "index", k, "check", l.Index)
		return nil
	}
	if mine == theirs {
		f.checked.Store(k)
		return nil
	}
	f.diverge(&Divergence{Index: k, CheckIndex: l.Index, CheckTerm: l.Term, LocalDigest: mine, LeaderDigest: theirs, At: time.Now()})
	return nil
}

// diverge stops this replica: it records d in the DIVERGED file, applies nothing from now on,
// and reports d. Hold f.mu.
func (f *FSM) diverge(d *Divergence) {
	f.divergence.Store(d)
	f.log.Error("REPLICA DIVERGED: this node applied other entries than its leader; it stops applying and serving. Rebuild it from its group (mqadmin removePeer, delete its data directory, restart it with dLegerJoin=true, mqadmin addPeer)",
		"index", d.Index, "checkIndex", d.CheckIndex, "term", d.CheckTerm,
		"localDigest", fmt.Sprintf("%016x", d.LocalDigest), "leaderDigest", fmt.Sprintf("%016x", d.LeaderDigest))
	if b, err := json.MarshalIndent(d, "", "  "); err == nil {
		p := filepath.Join(f.dataDir, divergedName)
		if err := f.fs.WriteFile(p, append(b, '\n')); err != nil {
			f.log.Error("could not record the divergence", "file", p, "error", err)
		}
	}
	if f.cfg.OnDiverged != nil {
		go f.cfg.OnDiverged(d)
	}
}

// checkNotDiverged fails if an earlier run recorded a divergence in dir.
func checkNotDiverged(fsys vfs.FS, dir string) error {
	p := filepath.Join(dir, divergedName)
	if _, err := fsys.Stat(p); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("fsm: %w", err)
	}
	b, _ := os.ReadFile(p) // details for the message; the file's presence is what counts
	var d Divergence
	if json.Unmarshal(b, &d) != nil {
		return fmt.Errorf("%w: %s records a divergence (unreadable: %q); rebuild this node from its group (mqadmin removePeer, delete %s, restart with dLegerJoin=true, mqadmin addPeer)", ErrDiverged, filepath.Join(dir, divergedName), b, dir)
	}
	return fmt.Errorf("%w: %s (recorded %s in %s). Its store cannot be trusted: rebuild this node from its group (mqadmin removePeer, delete %s, restart it with dLegerJoin=true, mqadmin addPeer)",
		ErrDiverged, d.String(), d.At.Format(time.RFC3339), filepath.Join(dir, divergedName), dir)
}

// encodeDigestFile is the snapshot frame carrying digest(index).
func encodeDigestFile(index, sum uint64) MetaFile {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, index)
	binary.BigEndian.PutUint64(b[8:], sum)
	return MetaFile{Name: digestFileName, Data: b}
}

// splitDigestFile takes the digest frame out of a snapshot's metadata files: the digest at the
// snapshot's index, or nil when the snapshot has none (written by a version without digests).
func splitDigestFile(meta []MetaFile, index uint64) ([]MetaFile, *uint64, error) {
	for i, m := range meta {
		if m.Name != digestFileName {
			continue
		}
		if len(m.Data) != 16 || binary.BigEndian.Uint64(m.Data) != index {
			return nil, nil, fmt.Errorf("%w: %s frame does not name the snapshot's index %d", ErrBadSnapshot, digestFileName, index)
		}
		sum := binary.BigEndian.Uint64(m.Data[8:])
		return append(meta[:i:i], meta[i+1:]...), &sum, nil
	}
	return meta, nil, nil
}
