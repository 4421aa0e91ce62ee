package fsm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"rocketraft/storage"
)

const (
	snapMagic      = 0x52525350 // "RRSP"
	snapVersion    = 1          // a full stream: the store files' data follows the metadata
	snapVersionRef = 2          // a reference snapshot: store files named, their data left in the store
	snapHeaderSize = 64

	frameMeta  byte = 1
	frameStore byte = 2
	frameRef   byte = 3 // a store file of a reference snapshot: name, size, length, no data

	maxNameLen  = 4096
	maxMetaSize = 256 << 20
	maxFiles    = 1 << 24
)

// snapHeader opens a snapshot stream (layout in the package doc).
type snapHeader struct {
	Version     uint16 // snapVersion or snapVersionRef
	Store       byte   // snapStoreKnown, with snapStoreEntryLog for a commitlog-store node's
	Index, Term uint64 // the store's applied entry
	Min, End    int64  // commitlog data range
	MetaIndex   uint64 // the tables hold every metadata entry up to here
	MetaFiles   uint32
	StoreFiles  uint32
}

func (h *snapHeader) encode() []byte {
	b := make([]byte, snapHeaderSize)
	be := binary.BigEndian
	be.PutUint32(b, snapMagic)
	be.PutUint16(b[4:], max(h.Version, snapVersion))
	b[6] = h.Store
	be.PutUint64(b[8:], h.Index)
	be.PutUint64(b[16:], h.Term)
	be.PutUint64(b[24:], uint64(h.Min))
	be.PutUint64(b[32:], uint64(h.End))
	be.PutUint64(b[40:], h.MetaIndex)
	be.PutUint32(b[48:], h.MetaFiles)
	be.PutUint32(b[52:], h.StoreFiles)
	be.PutUint32(b[60:], crc32.Checksum(b[:60], castagnoli))
	return b
}

func decodeHeader(b []byte) (snapHeader, error) {
	be := binary.BigEndian
	if len(b) != snapHeaderSize || be.Uint32(b) != snapMagic {
		return snapHeader{}, fmt.Errorf("%w: not a snapshot", ErrBadSnapshot)
	}
	v := be.Uint16(b[4:])
	if v != snapVersion && v != snapVersionRef {
		return snapHeader{}, fmt.Errorf("%w: version %d, want %d or %d", ErrBadSnapshot, v, snapVersion, snapVersionRef)
	}
	if crc32.Checksum(b[:60], castagnoli) != be.Uint32(b[60:]) {
		return snapHeader{}, fmt.Errorf("%w: header CRC mismatch", ErrBadSnapshot)
	}
	h := snapHeader{
		Version: v, Store: b[6], Index: be.Uint64(b[8:]), Term: be.Uint64(b[16:]),
		Min: int64(be.Uint64(b[24:])), End: int64(be.Uint64(b[32:])),
		MetaIndex: be.Uint64(b[40:]), MetaFiles: be.Uint32(b[48:]), StoreFiles: be.Uint32(b[52:]),
	}
	if h.Min < 0 || h.End < h.Min || h.MetaFiles > maxFiles || h.StoreFiles > maxFiles {
		return snapHeader{}, fmt.Errorf("%w: bad header values", ErrBadSnapshot)
	}
	return h, nil
}

// Header byte 6: which kind of Raft log store the snapshot's node ran (Config.EntryLog). A
// commitlog-store node's commitlog holds entry headers and stamped offsets that a raft-wal or bolt
// node's does not, so a node installs only its own kind's snapshots (a group must not mix stores,
// dledger/storeguard.go refuses the entries). Snapshots from before the byte was written have 0
// there: not known, installed as before.
const (
	snapStoreKnown    byte = 1 << 1
	snapStoreEntryLog byte = 1 << 0
)

// storeByte is header byte 6 for a node whose Raft log is (entryLog) or is not its commitlog.
func storeByte(entryLog bool) byte {
	if entryLog {
		return snapStoreKnown | snapStoreEntryLog
	}
	return snapStoreKnown
}

// ErrBadSnapshot is wrapped by Restore errors about the stream's contents.
var ErrBadSnapshot = errors.New("fsm: bad snapshot stream")

// snapshot is what Snapshot captures: positions and file lists, no data.
type snapshot struct {
	log   hclog.Logger
	store *storage.Store
	fsm   *FSM // whose marker Persist syncs, after the store, before writing the reference
	hdr   snapHeader
	point applied // the applied state the snapshot captures: the marker's floor once persisted
	man   storage.Manifest
	meta  []MetaFile
}

// Snapshot captures, under the FSM lock and without reading file data, the applied index, the
// commitlog range, the list of commitlog and consume-queue files with how much of each to ship,
// and the metadata tables' serialized files. Persist writes them as a reference snapshot.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.store == nil {
		return nil, ErrClosed
	}
	man, err := f.store.Manifest()
	if err != nil {
		return nil, fmt.Errorf("fsm snapshot: %w", err)
	}
	var meta []MetaFile
	if f.cfg.Meta != nil {
		if meta, err = f.cfg.Meta.SnapshotMeta(); err != nil {
			return nil, fmt.Errorf("fsm snapshot: metadata: %w", err)
		}
	}
	if f.dig.known {
		meta = append(meta, encodeDigestFile(f.cur.Index, f.dig.sum))
	}
	hdr := snapHeader{
		Store: storeByte(f.cfg.EntryLog),
		Index: f.cur.Index, Term: f.cur.Term, Min: man.CommitLogMin, End: man.CommitLogEnd,
		MetaIndex: f.metaThrough, MetaFiles: uint32(len(meta)), StoreFiles: uint32(len(man.Files)),
	}
	return &snapshot{log: f.log, store: f.store, fsm: f, hdr: hdr, man: man, meta: meta, point: f.cur}, nil
}

// Persist writes a reference snapshot to sink, then closes it (or cancels it on error): the
// header, the metadata files and the names and lengths of the store files, not their data.
// The store's files are append-only below the captured ends, so the store itself keeps the
// snapshot's data; Persist first makes it durable (store flush, marker sync), so that a restart,
// which truncates the store back to the marker, never cuts below it. ExpandSnapshot turns the
// reference into the full stream when a follower needs it. Writing the data out instead cost a
// copy of the whole store at every snapshot (hundreds of MB every few seconds when snapshots
// are frequent: 34,300 -> 22,900 msg/s, scripts/cpubench.sh R3 at 2048 in flight, 2026-11-30).
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	began := time.Now()
	n, err := s.writeRef(sink)
	if err != nil {
		s.log.Error("snapshot persist failed", "index", s.hdr.Index, "bytes", n, "error", err)
		sink.Cancel()
		return err
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("fsm snapshot: close sink: %w", err)
	}
	s.log.Info("snapshot persisted", "index", s.hdr.Index, "commitLogEnd", s.hdr.End, "files", len(s.man.Files), "bytes", n, "took", time.Since(began))
	return nil
}

// writeRef makes the captured state durable and writes the reference snapshot to w.
func (s *snapshot) writeRef(w io.Writer) (int64, error) {
	if err := s.store.Flush(); err != nil {
		return 0, fmt.Errorf("fsm snapshot: %w", err)
	}
	if err := s.fsm.syncApplied(s.store, s.point); err != nil {
		return 0, fmt.Errorf("fsm snapshot: %w", err)
	}
	bw := bufio.NewWriter(w)
	cw := &countingWriter{w: bw}
	hdr := s.hdr
	hdr.Version = snapVersionRef
	if _, err := cw.Write(hdr.encode()); err != nil {
		return cw.n, err
	}
	if err := s.writeMeta(cw); err != nil {
		return cw.n, err
	}
	for _, sf := range s.man.Files {
		fp, err := s.store.Fingerprint(sf)
		if err != nil {
			return cw.n, fmt.Errorf("fsm snapshot: %w", err)
		}
		if _, err := cw.Write(binary.BigEndian.AppendUint32(frameHead(frameRef, sf.Path, sf.Size, sf.Len), fp)); err != nil {
			return cw.n, err
		}
	}
	return cw.n, bw.Flush()
}

// ExpandSnapshot turns a snapshot as stored (rc, size bytes) into the stream Restore reads. A
// full stream (one received from a leader) passes through. A reference snapshot becomes the
// full stream of the state it captured, read from this node's store while the returned reader
// is read: the store files' leading bytes it names never change. Files that retention has
// since removed from the front of the commitlog or of a queue are left out (the stream is then
// that state with the retention applied); a file missing otherwise (a deleted topic's queue),
// or a store behind the reference (it lost data), is an error: a later snapshot will do. The
// returned size is the stream's exact length, which Raft's InstallSnapshot announces. It takes
// rc over (closes it); closing the returned reader stops the stream and releases the store.
func (f *FSM) ExpandSnapshot(rc io.ReadCloser, size int64) (io.ReadCloser, int64, error) {
	hb := make([]byte, snapHeaderSize)
	if _, err := io.ReadFull(rc, hb); err != nil {
		rc.Close()
		return nil, 0, fmt.Errorf("%w: header: %w", ErrBadSnapshot, err)
	}
	hdr, err := decodeHeader(hb)
	if err != nil {
		rc.Close()
		return nil, 0, err
	}
	if hdr.Version != snapVersionRef {
		return struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(hb), rc), rc}, size, nil
	}
	br := bufio.NewReader(rc)
	meta, err := readMeta(br, int(hdr.MetaFiles))
	var refs []storage.SnapshotFile
	if err == nil {
		refs, err = readRefs(br, int(hdr.StoreFiles))
	}
	rc.Close()
	if err != nil {
		return nil, 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.drainTimeout)
	defer cancel()
	st, release, err := f.Acquire(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("fsm snapshot %d: %w", hdr.Index, err)
	}
	if end := st.CommitLogMaxOffset(); end < hdr.End || f.AppliedIndex() < hdr.Index {
		release()
		return nil, 0, fmt.Errorf("%w: reference snapshot at index %d (commitlog end %d) but the store is at index %d, end %d: it lost data; rebuild this node from its group",
			ErrBadSnapshot, hdr.Index, hdr.End, f.AppliedIndex(), end)
	}
	files, min, err := st.BindSnapshotFiles(refs, hdr.Min, hdr.End)
	if err != nil {
		release()
		return nil, 0, fmt.Errorf("fsm snapshot %d: %w", hdr.Index, err)
	}
	hdr.Version, hdr.Min, hdr.StoreFiles = snapVersion, min, uint32(len(files))
	s := &snapshot{log: f.log, store: st, hdr: hdr, man: storage.Manifest{CommitLogMin: min, CommitLogEnd: hdr.End, Files: files}, meta: meta}
	pr, pw := io.Pipe()
	go func() {
		defer release()
		_, err := s.write(pw)
		pw.CloseWithError(err)
	}()
	return pr, s.streamSize(), nil
}

// streamSize is the length of the full stream write produces.
func (s *snapshot) streamSize() int64 {
	n := int64(snapHeaderSize)
	for _, m := range s.meta {
		n += int64(len(frameHead(frameMeta, m.Name, 0, 0))) + int64(len(m.Data)) + 4
	}
	for _, sf := range s.man.Files {
		n += int64(len(frameHead(frameStore, sf.Path, 0, 0))) + sf.Len + 4
	}
	return n
}

// readRefs reads n reference frames: a frame header and the file's fingerprint.
func readRefs(r io.Reader, n int) ([]storage.SnapshotFile, error) {
	var out []storage.SnapshotFile
	for i := 0; i < n; i++ {
		fr, err := readFrameHeader(r, frameRef)
		if err != nil {
			return nil, err
		}
		var fp [4]byte
		if _, err := io.ReadFull(r, fp[:]); err != nil {
			return nil, fmt.Errorf("%w: %s: fingerprint: %w", ErrBadSnapshot, fr.name, err)
		}
		out = append(out, storage.SnapshotFile{Path: fr.name, Size: fr.size, Len: fr.n, Fingerprint: binary.BigEndian.Uint32(fp[:])})
	}
	return out, nil
}

// Release implements raft.FSMSnapshot; nothing is held.
func (s *snapshot) Release() {}

// countingWriter counts bytes and feeds a CRC.
type countingWriter struct {
	w   io.Writer
	n   int64
	crc hash.Hash32
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if c.crc != nil {
		c.crc.Write(p[:n])
	}
	return n, err
}

func (s *snapshot) write(sink io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(sink, 1<<20)
	cw := &countingWriter{w: bw}
	if _, err := cw.Write(s.hdr.encode()); err != nil {
		return cw.n, err
	}
	if err := s.writeMeta(cw); err != nil {
		return cw.n, err
	}
	nextLog := int64(256 << 20)
	for i, sf := range s.man.Files {
		if err := writeFrame(cw, frameStore, sf.Path, sf.Size, sf.Len, func(w io.Writer) error {
			return s.store.CopyFile(w, sf)
		}); err != nil {
			return cw.n, err
		}
		if cw.n >= nextLog {
			s.log.Info("snapshot progress", "index", s.hdr.Index, "files", i+1, "of", len(s.man.Files), "bytes", cw.n)
			nextLog = cw.n + 256<<20
		}
	}
	return cw.n, bw.Flush()
}

// writeMeta writes the metadata frames.
func (s *snapshot) writeMeta(cw *countingWriter) error {
	for _, m := range s.meta {
		if err := writeFrame(cw, frameMeta, m.Name, int64(len(m.Data)), int64(len(m.Data)), func(w io.Writer) error {
			_, err := w.Write(m.Data)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// frameHead is a frame's header: kind, name length, name, size, data length.
func frameHead(kind byte, name string, size, n int64) []byte {
	h := make([]byte, 0, 3+len(name)+16)
	h = append(h, kind)
	h = binary.BigEndian.AppendUint16(h, uint16(len(name)))
	h = append(h, name...)
	h = binary.BigEndian.AppendUint64(h, uint64(size))
	return binary.BigEndian.AppendUint64(h, uint64(n))
}

// writeFrame writes one file frame: kind, name, size, data length, data, CRC of the data.
func writeFrame(cw *countingWriter, kind byte, name string, size, n int64, data func(io.Writer) error) error {
	if len(name) == 0 || len(name) > maxNameLen {
		return fmt.Errorf("fsm snapshot: bad file name %q", name)
	}
	if _, err := cw.Write(frameHead(kind, name, size, n)); err != nil {
		return err
	}
	crc := crc32.New(castagnoli)
	dw := &countingWriter{w: cw, crc: crc}
	if err := data(dw); err != nil {
		return fmt.Errorf("fsm snapshot: %s: %w", name, err)
	}
	if dw.n != n {
		return fmt.Errorf("fsm snapshot: %s: wrote %d bytes, want %d", name, dw.n, n)
	}
	_, err := cw.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
	return err
}

// frame is a decoded frame header.
type frame struct {
	kind byte
	name string
	size int64
	n    int64
}

func readFrameHeader(r io.Reader, want byte) (frame, error) {
	var b [3]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return frame{}, fmt.Errorf("%w: frame header: %w", ErrBadSnapshot, err)
	}
	nl := int(binary.BigEndian.Uint16(b[1:]))
	if b[0] != want || nl == 0 || nl > maxNameLen {
		return frame{}, fmt.Errorf("%w: frame kind %d, name length %d", ErrBadSnapshot, b[0], nl)
	}
	rest := make([]byte, nl+16)
	if _, err := io.ReadFull(r, rest); err != nil {
		return frame{}, fmt.Errorf("%w: frame header: %w", ErrBadSnapshot, err)
	}
	fr := frame{kind: b[0], name: string(rest[:nl]), size: int64(binary.BigEndian.Uint64(rest[nl:])), n: int64(binary.BigEndian.Uint64(rest[nl+8:]))}
	if fr.n < 0 || fr.size < fr.n {
		return frame{}, fmt.Errorf("%w: %s: %d data bytes in a file of %d", ErrBadSnapshot, fr.name, fr.n, fr.size)
	}
	return fr, nil
}

// readCRC reads a frame's trailing CRC and compares it.
func readCRC(r io.Reader, name string, crc hash.Hash32) error {
	var b [4]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return fmt.Errorf("%w: %s: CRC: %w", ErrBadSnapshot, name, err)
	}
	if binary.BigEndian.Uint32(b[:]) != crc.Sum32() {
		return fmt.Errorf("%w: %s: CRC mismatch", ErrBadSnapshot, name)
	}
	return nil
}

// Restore replaces the FSM's state with a snapshot stream. If the local store already holds the
// snapshot's state or a later one (Raft restores its latest snapshot at every start, and the
// store survives restarts), only the metadata tables are restored. Otherwise the store files
// are written into a staging directory, which replaces the store root only once complete (see
// the package doc); before closing the old store it waits for readers that hold it (Acquire),
// up to DrainTimeout; the store is reopened (index rebuilt from the commitlog) and AppliedIndex
// is the snapshot's. Errors before the swap leave the current store as it was; so does giving
// up on readers (ErrReadersHoldStore; Raft retries the snapshot later).
func (f *FSM) Restore(rc io.ReadCloser) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	br := bufio.NewReaderSize(rc, 1<<20)
	hb := make([]byte, snapHeaderSize)
	if _, err := io.ReadFull(br, hb); err != nil {
		return fmt.Errorf("%w: header: %w", ErrBadSnapshot, err)
	}
	hdr, err := decodeHeader(hb)
	if err != nil {
		return err
	}
	if hdr.Store&snapStoreKnown != 0 && hdr.Store != storeByte(f.cfg.EntryLog) {
		mine, theirs := "commitlog", "wal or bolt"
		if !f.cfg.EntryLog {
			mine, theirs = theirs, mine
		}
		return fmt.Errorf("%w: snapshot at index %d comes from a node whose dLegerLogStore is %s, this node's is %s: every node of a group must use the same raft log store",
			ErrBadSnapshot, hdr.Index, theirs, mine)
	}
	meta, err := readMeta(br, int(hdr.MetaFiles))
	if err != nil {
		return err
	}
	meta, dig, err := splitDigestFile(meta, hdr.Index)
	if err != nil {
		return err
	}
	if f.store != nil && hdr.Index <= f.cur.Index && hdr.End <= f.cur.End {
		f.log.Info("snapshot is not ahead of the local store; keeping the store, restoring metadata", "snapshotIndex", hdr.Index, "appliedIndex", f.cur.Index)
		return f.restoreMeta(meta, hdr.MetaIndex)
	}
	if hdr.Version == snapVersionRef {
		// Its data was this store's, which no longer reaches it (ExpandSnapshot refused it too).
		return fmt.Errorf("%w: reference snapshot at index %d is ahead of the local store (index %d): the store lost data; rebuild this node from its group",
			ErrBadSnapshot, hdr.Index, f.cur.Index)
	}
	f.log.Info("restoring store from snapshot", "snapshotIndex", hdr.Index, "appliedIndex", f.cur.Index, "commitLogEnd", hdr.End, "files", hdr.StoreFiles)
	began := time.Now()
	if err := f.stage(br, hdr, dig); err != nil {
		if rerr := f.removeIfExists(f.staging); rerr != nil {
			f.log.Warn("removing a failed restore", "error", rerr)
		}
		return err
	}
	if err := f.swap(); err != nil {
		if errors.Is(err, ErrReadersHoldStore) {
			// The old store stays; so must not a staged one a later start would take for it.
			if rerr := f.removeIfExists(f.staging); rerr != nil {
				f.log.Warn("removing an abandoned restore", "error", rerr)
			}
		}
		return err
	}
	f.log.Info("store restored from snapshot", "appliedIndex", f.cur.Index, "commitLogEnd", f.cur.End, "took", time.Since(began))
	return f.restoreMeta(meta, hdr.MetaIndex)
}

func readMeta(r io.Reader, n int) ([]MetaFile, error) {
	var out []MetaFile
	for i := 0; i < n; i++ {
		fr, err := readFrameHeader(r, frameMeta)
		if err != nil {
			return nil, err
		}
		if fr.n > maxMetaSize {
			return nil, fmt.Errorf("%w: metadata file %s of %d bytes", ErrBadSnapshot, fr.name, fr.n)
		}
		data := make([]byte, fr.n)
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBadSnapshot, fr.name, err)
		}
		crc := crc32.New(castagnoli)
		crc.Write(data)
		if err := readCRC(r, fr.name, crc); err != nil {
			return nil, err
		}
		out = append(out, MetaFile{Name: fr.name, Data: data})
	}
	return out, nil
}

func (f *FSM) restoreMeta(meta []MetaFile, through uint64) error {
	if f.cfg.Meta != nil {
		if err := f.cfg.Meta.RestoreMeta(meta); err != nil {
			return fmt.Errorf("fsm restore: metadata: %w", err)
		}
	}
	f.metaThrough = through
	return nil
}

// stage writes the snapshot's store files, checkpoint and marker into the staging directory,
// and marks it complete last.
func (f *FSM) stage(r io.Reader, hdr snapHeader, dig *uint64) error {
	if err := f.removeIfExists(f.staging); err != nil {
		return err
	}
	cfg := f.scfg
	cfg.StorePathRootDir = f.staging
	in, err := storage.NewInstaller(cfg)
	if err != nil {
		return fmt.Errorf("fsm restore: %w", err)
	}
	var total int64
	nextLog := int64(256 << 20)
	for i := 0; i < int(hdr.StoreFiles); i++ {
		fr, err := readFrameHeader(r, frameStore)
		if err != nil {
			return err
		}
		crc := crc32.New(castagnoli)
		src := io.TeeReader(io.LimitReader(r, fr.n), crc)
		if err := in.WriteFile(storage.SnapshotFile{Path: fr.name, Size: fr.size, Len: fr.n}, src); err != nil {
			return fmt.Errorf("%w: %w", ErrBadSnapshot, err)
		}
		if err := readCRC(r, fr.name, crc); err != nil {
			return err
		}
		if total += fr.n; total >= nextLog {
			f.log.Info("restore progress", "files", i+1, "of", hdr.StoreFiles, "bytes", total)
			nextLog = total + 256<<20
		}
	}
	if err := in.Finish(hdr.Min, hdr.End); err != nil {
		return fmt.Errorf("fsm restore: %w", err)
	}
	mk, _, _, err := openMarker(f.fs, f.staging)
	if err != nil {
		return err
	}
	a := applied{Index: hdr.Index, Term: hdr.Term, End: hdr.End, MetaIndex: hdr.MetaIndex}
	if dig != nil {
		a.Digest = *dig
	}
	// The installer synced every file: the restored state is the new floor.
	err = errors.Join(mk.writeSync(markerState{Cur: a, Floor: a, DigestKnown: dig != nil}), mk.close())
	if err != nil {
		return err
	}
	return f.fs.WriteFile(filepath.Join(f.staging, completeName), nil)
}

// swap waits for readers to release the store (new readers wait meanwhile), closes it, moves
// the staged one into the root and reopens. Readers then get the new store, or ErrNoStore if
// this failed after the close. If readers do not release the store within DrainTimeout, the
// restore is abandoned with ErrReadersHoldStore and the old store stays in service.
func (f *FSM) swap() error {
	if err := f.drainReaders("snapshot restore"); err != nil {
		return fmt.Errorf("fsm restore: %w", err)
	}
	defer func() { f.publish(f.store) }()
	if err := f.closeStore(); err != nil {
		f.log.Warn("closing the replaced store", "error", err)
	}
	if err := f.removeIfExists(f.replaced); err != nil {
		return err
	}
	if err := f.fs.Rename(f.root, f.replaced); err != nil {
		return fmt.Errorf("fsm restore: move old store aside: %w", err)
	}
	if err := f.fs.Rename(f.staging, f.root); err != nil {
		return fmt.Errorf("fsm restore: move restored store in: %w", err)
	}
	if err := f.fs.Remove(filepath.Join(f.root, completeName)); err != nil {
		return fmt.Errorf("fsm restore: %w", err)
	}
	if err := f.removeIfExists(f.replaced); err != nil {
		f.log.Warn("removing the replaced store", "dir", f.replaced, "error", err)
	}
	if err := f.open(); err != nil {
		return fmt.Errorf("fsm restore: reopen: %w", err)
	}
	return nil
}
