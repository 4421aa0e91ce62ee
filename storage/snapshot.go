package storage

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Snapshots of a store, for the Raft state machine: Manifest lists the files (and how much of
// each) that make up the store as of now, CopyFile streams one of them while appends go on, and
// an Installer writes them into an empty directory that Open then recovers as a whole store.
//
// What is shipped: every commitlog segment up to the commitlog end, and every consume-queue
// segment up to its queue's max offset (the queues carry state the commitlog alone cannot give
// back: a deleted topic's queues, or a queue whose front retention removed). Index files are
// not shipped: Open rebuilds them from the commitlog.

// SnapshotFile is one file of a store snapshot.
type SnapshotFile struct {
	// Path is slash-separated and relative to the store: "commitlog/<20 digits>" or
	// "consumequeue/<topic>/<queueId>/<20 digits>".
	Path string
	// Size is the file's full (mapped) size.
	Size int64
	// Len is how many leading bytes hold data; the rest of the file is zeros.
	Len int64
	// Fingerprint, for a file kept by name only (a reference snapshot), is the checksum of its
	// first bytes (Store.Fingerprint), which BindSnapshotFiles compares.
	Fingerprint uint32

	segs  *segmentList // where CopyFile reads from (nil in a decoded manifest)
	start int64
}

// Manifest describes a consistent store image: nothing in it changes afterwards, because
// appends only write past CommitLogEnd and past each queue's max offset.
type Manifest struct {
	// CommitLogMin and CommitLogEnd bound the commitlog data.
	CommitLogMin, CommitLogEnd int64
	// Files are the commitlog segments in offset order, then the consume-queue segments by
	// topic, queue id and offset.
	Files []SnapshotFile
}

// Manifest captures the current commitlog end, every queue's max offset and the files that
// hold them. It takes the append lock briefly and reads no file data.
func (s *Store) Manifest() (Manifest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Manifest{}, ErrStoreClosed
	}
	end := s.cl.writePos.Load()
	m := Manifest{CommitLogMin: s.cl.minOffset(), CommitLogEnd: end}
	for _, sg := range s.cl.segs.snapshot() {
		if n := min(end-sg.start, s.cl.size); n > 0 {
			m.Files = append(m.Files, SnapshotFile{Path: "commitlog/" + fileName(sg.start), Size: s.cl.size, Len: n, segs: s.cl.segs, start: sg.start})
		}
	}
	for _, topic := range s.Topics() {
		for _, qid := range s.QueueIDs(topic) {
			q := s.queueByName(topic, qid)
			if q == nil {
				continue
			}
			units := q.max.Load() * ConsumeQueueUnitSize
			for _, sg := range q.segs.snapshot() {
				if n := min(units-sg.start, q.segs.size); n > 0 {
					p := path.Join("consumequeue", topic, strconv.Itoa(int(qid)), fileName(sg.start))
					m.Files = append(m.Files, SnapshotFile{Path: p, Size: q.segs.size, Len: n, segs: q.segs, start: sg.start})
				}
			}
		}
	}
	return m, nil
}

// BindSnapshotFiles resolves the files of a manifest captured earlier and kept by name only (a
// reference snapshot) against this store, so that CopyFile can read them; their leading Len
// bytes have not changed since, since appends only write past a manifest's ends. A file that
// retention has removed since from the front of the commitlog or of its queue is left out: the
// result is the captured image with that retention applied, and min, the commitlog's first
// offset, moves to the first commitlog file kept (end if none is). Any other missing file (a
// deleted topic's queue) or a file of another size is an error.
func (s *Store) BindSnapshotFiles(files []SnapshotFile, min, end int64) ([]SnapshotFile, int64, error) {
	out := make([]SnapshotFile, 0, len(files))
	clDropped, clFirst := false, int64(-1)
	for _, f := range files {
		segs, start, err := s.snapshotList(f.Path)
		if err != nil {
			return nil, 0, err
		}
		if f.Size != segs.size || f.Len < 0 || f.Len > f.Size {
			return nil, 0, fmt.Errorf("snapshot file %s: %d of %d bytes, this store's files have %d", f.Path, f.Len, f.Size, segs.size)
		}
		segs.mu.RLock()
		sg, first := segs.find(start), segs.first()
		segs.mu.RUnlock()
		isLog := segs == s.cl.segs
		if sg == nil || sg.start != start {
			if first == nil || start < first.start { // retention removed it from the front
				clDropped = clDropped || isLog
				continue
			}
			return nil, 0, fmt.Errorf("snapshot file %s: no longer in the store", f.Path)
		}
		if isLog && clFirst < 0 {
			clFirst = start
		}
		f.segs, f.start = segs, start
		if fp, err := s.Fingerprint(f); err != nil || fp != f.Fingerprint {
			return nil, 0, fmt.Errorf("snapshot file %s: its leading bytes changed since (a deleted topic's queue created again?)", f.Path)
		}
		out = append(out, f)
	}
	if clDropped {
		min = end
		if clFirst >= 0 {
			min = clFirst
		}
	}
	return out, min, nil
}

// fingerprintBytes is how many leading bytes of a file Fingerprint covers.
const fingerprintBytes = 4096

// fingerprintTable is CRC-32C's.
var fingerprintTable = crc32.MakeTable(crc32.Castagnoli)

// Fingerprint checksums the first bytes of a file of a Manifest of this store (CRC-32C of up to
// 4 KiB of its first Len). Commitlog files never come back at an offset once removed, but a
// queue file does when its topic is deleted and sent to again, and then holds other units.
func (s *Store) Fingerprint(f SnapshotFile) (uint32, error) {
	if f.segs == nil {
		return 0, fmt.Errorf("fingerprint %s: not from a manifest of this store", f.Path)
	}
	buf := make([]byte, min(fingerprintBytes, f.Len))
	if !f.segs.readInto(f.start, 0, buf) {
		return 0, fmt.Errorf("fingerprint %s: file removed", f.Path)
	}
	return crc32.Checksum(buf, fingerprintTable), nil
}

// snapshotList is the segment list a snapshot path belongs to, and the segment's start.
func (s *Store) snapshotList(p string) (*segmentList, int64, error) {
	parts := strings.Split(p, "/")
	start, err := strconv.ParseInt(parts[len(parts)-1], 10, 64)
	switch {
	case err != nil:
	case len(parts) == 2 && parts[0] == "commitlog":
		return s.cl.segs, start, nil
	case len(parts) == 4 && parts[0] == "consumequeue":
		qid, qerr := strconv.ParseInt(parts[2], 10, 32)
		if qerr != nil {
			break
		}
		if q := s.queueByName(parts[1], int32(qid)); q != nil {
			return q.segs, start, nil
		}
		return nil, 0, fmt.Errorf("snapshot file %s: its queue is no longer in the store", p)
	}
	return nil, 0, fmt.Errorf("snapshot file %q: not a store file", p)
}

// copyChunk is how much CopyFile copies per segment-lock hold.
const copyChunk = 1 << 20

// CopyFile writes the first f.Len bytes of a file of a Manifest of this store to w, a chunk at a
// time, never holding a lock while writing to w. It fails if the file has been removed since
// (retention, topic deletion, Close).
func (s *Store) CopyFile(w io.Writer, f SnapshotFile) error {
	if f.segs == nil {
		return fmt.Errorf("copy %s: not from a manifest of this store", f.Path)
	}
	buf := make([]byte, min(copyChunk, f.Len))
	for off := int64(0); off < f.Len; {
		n := min(int64(len(buf)), f.Len-off)
		if !f.segs.readInto(f.start, off, buf[:n]) {
			return fmt.Errorf("copy %s: file removed while copying", f.Path)
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return fmt.Errorf("copy %s: %w", f.Path, err)
		}
		off += n
	}
	return nil
}

// readInto copies len(dst) bytes at position off of the segment starting at start, if it is
// still mapped.
func (l *segmentList) readInto(start, off int64, dst []byte) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	sg := l.find(start)
	if sg == nil || sg.start != start || off+int64(len(dst)) > int64(len(sg.b)) {
		return false
	}
	copy(dst, sg.b[off:])
	return true
}

// Installer writes a store snapshot into an empty directory. Use: NewInstaller, WriteFile for
// every file of the manifest, Finish; then Open the directory (with the same Config). Nothing
// it writes is visible to Open as a valid store before Finish returns.
type Installer struct {
	cfg     Config
	written int
}

// NewInstaller prepares to install a snapshot into cfg.StorePathRootDir, which must not exist
// or be empty. cfg's file sizes must match the snapshot's (WriteFile checks each file).
func NewInstaller(cfg Config) (*Installer, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("storage config: %w", err)
	}
	root := cfg.StorePathRootDir
	if err := cfg.FS.MkdirAll(root); err != nil {
		return nil, fmt.Errorf("install snapshot: %w", err)
	}
	names, err := cfg.FS.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("install snapshot: %w", err)
	}
	if len(names) > 0 {
		return nil, fmt.Errorf("install snapshot: %s is not empty", root)
	}
	return &Installer{cfg: cfg}, nil
}

// localPath checks a snapshot path and returns where it goes, with the size its files must
// have here.
func (in *Installer) localPath(p string) (string, int64, error) {
	parts := strings.Split(p, "/")
	seg := func(name string) bool {
		_, err := strconv.ParseInt(name, 10, 64)
		return err == nil && len(name) == 20
	}
	switch {
	case len(parts) == 2 && parts[0] == "commitlog" && seg(parts[1]):
		return filepath.Join(in.cfg.commitLogDir(), parts[1]), in.cfg.MappedFileSizeCommitLog, nil
	case len(parts) == 4 && parts[0] == "consumequeue" && validTopicDir(parts[1]) && seg(parts[3]):
		if q, err := strconv.ParseInt(parts[2], 10, 32); err != nil || q < 0 || strconv.FormatInt(q, 10) != parts[2] {
			break
		}
		return filepath.Join(in.cfg.StorePathRootDir, "consumequeue", parts[1], parts[2], parts[3]), in.cfg.MappedFileSizeConsumeQueue, nil
	}
	return "", 0, fmt.Errorf("install snapshot: bad file path %q", p)
}

// validTopicDir accepts a topic name usable as one path element.
func validTopicDir(t string) bool {
	return t != "" && t != "." && t != ".." && !strings.ContainsAny(t, "/\\\x00")
}

// WriteFile creates f.Path under the installer's root at f.Size bytes (which must be this
// store's configured size for that kind of file), fills its first f.Len bytes from r and syncs
// them.
func (in *Installer) WriteFile(f SnapshotFile, r io.Reader) error {
	name, size, err := in.localPath(f.Path)
	if err != nil {
		return err
	}
	if f.Size != size || f.Len < 0 || f.Len > size {
		return fmt.Errorf("install snapshot: %s: file size %d, data %d bytes; this store's files are %d bytes (configs differ?)", f.Path, f.Size, f.Len, size)
	}
	if err := in.cfg.FS.MkdirAll(filepath.Dir(name)); err != nil {
		return fmt.Errorf("install snapshot: %w", err)
	}
	if _, err := in.cfg.FS.Stat(name); err == nil {
		return fmt.Errorf("install snapshot: %s twice", f.Path)
	}
	m, err := in.cfg.FS.Map(name, size)
	if err != nil {
		return fmt.Errorf("install snapshot: %w", err)
	}
	defer m.Close()
	b := m.Bytes()
	if _, err := io.ReadFull(r, b[:f.Len]); err != nil {
		return fmt.Errorf("install snapshot: read %s: %w", f.Path, err)
	}
	if err := m.Sync(0, int(f.Len)); err != nil {
		return fmt.Errorf("install snapshot: %s: %w", f.Path, err)
	}
	in.written++
	return nil
}

// Finish writes the checkpoint and abort marker that make Open take the installed consume
// queues as they are up to commitLogEnd and rebuild the index from the commitlog.
func (in *Installer) Finish(commitLogMin, commitLogEnd int64) error {
	if commitLogMin < 0 || commitLogEnd < commitLogMin {
		return fmt.Errorf("install snapshot: bad commitlog range [%d, %d)", commitLogMin, commitLogEnd)
	}
	root := in.cfg.StorePathRootDir
	if err := in.cfg.FS.MkdirAll(in.cfg.commitLogDir()); err != nil {
		return fmt.Errorf("install snapshot: %w", err)
	}
	cp, _, err := openCheckpoint(in.cfg.FS, root)
	if err != nil {
		return fmt.Errorf("install snapshot: %w", err)
	}
	werr := cp.write(checkpoint{dispatchedOffset: commitLogEnd, indexRebuildFrom: commitLogMin})
	cerr := cp.m.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("install snapshot: %w", err)
	}
	// abort: recover as after a crash, which rebuilds the index files from indexRebuildFrom
	if err := in.cfg.FS.WriteFile(filepath.Join(root, "abort"), nil); err != nil {
		return fmt.Errorf("install snapshot: %w", err)
	}
	return nil
}

// FlushCommitLog makes the commitlog durable at least up to end (one flush round of everything
// written so far, unless it already is). The Raft state machine calls it before it records
// that far as applied.
func (s *Store) FlushCommitLog(end int64) error {
	if s.cl.flushed.Load() >= end {
		return nil
	}
	if err := s.flushCommitLog(); err != nil {
		return fmt.Errorf("flush commitlog to %d: %w", end, err)
	}
	if f := s.cl.flushed.Load(); f < end {
		return fmt.Errorf("flush commitlog to %d: flushed only to %d", end, f)
	}
	return nil
}

// Flush makes everything appended so far durable: the commitlog, then the consume queues,
// index and checkpoint.
func (s *Store) Flush() error {
	if err := s.flushCommitLog(); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	if err := s.flushLogics(); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return nil
}
