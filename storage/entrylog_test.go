package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"rocketraft/message"
	"rocketraft/storage/vfs"
)

// entryConfig is an EntryLog store on the real file system in a temp dir, with testConfig's
// small files (64 KiB commitlog files, so entries roll).
func entryConfig(t *testing.T) Config {
	t.Helper()
	cfg := testConfig(vfs.OS{})
	cfg.StorePathRootDir = t.TempDir()
	cfg.FlushDiskType = AsyncFlush
	cfg.EntryLog = true
	return cfg
}

// entryStoreTS is the store time the tests' leader stamps into every record.
const entryStoreTS = 1_700_000_000_000

// entrySeq plays the leader's sequencer: it stamps each dispatchable record with the next
// queue offset of its queue, from its own counters.
type entrySeq struct{ next map[queueKey]int64 }

func newEntrySeq() *entrySeq { return &entrySeq{next: map[queueKey]int64{}} }

func (q *entrySeq) stamp(r []byte) {
	v, err := message.ParseView(r)
	if err != nil {
		panic(err)
	}
	if !message.IsDispatchable(v.SysFlag()) {
		return
	}
	k := queueKey{string(v.Topic()), v.QueueID()}
	v.SetQueueOffset(q.next[k])
	q.next[k]++
}

// headerRec is an entry header record: the reserved topic, rolled back, stamped.
func headerRec(t testing.TB, n int) []byte {
	t.Helper()
	b, err := message.EncodeRecord(&message.Message{
		Topic: message.RaftEntryTopic, SysFlag: message.TransactionRollbackType,
		BornTimestamp: 1, StoreTimestamp: entryStoreTS,
		BornHost: testStoreHost, StoreHost: testStoreHost,
		Body: []byte(fmt.Sprintf("entry of %d records", n)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// msgRec is a message record as the leader proposes it (store time stamped, tags "tag").
func msgRec(t testing.TB, topic string, qid int32, body, keys string) []byte {
	t.Helper()
	r := rec(t, topic, qid, body, "tag", keys)
	setStoreTS(r, entryStoreTS)
	return r
}

// testEntry is one Raft entry: a header record and its groups' records.
type testEntry struct {
	recs     [][]byte
	groups   []DispatchGroup
	pos, end int64
}

// newEntry builds an entry holding groups (one append each), stamping the records with q
// (nil: the offsets they carry are kept).
func newEntry(t testing.TB, q *entrySeq, groups ...[][]byte) *testEntry {
	t.Helper()
	n := 0
	for _, g := range groups {
		n += len(g)
	}
	e := &testEntry{recs: [][]byte{headerRec(t, n)}}
	for _, g := range groups {
		for _, r := range g {
			if q != nil {
				q.stamp(r)
			}
			e.recs = append(e.recs, r)
		}
		e.groups = append(e.groups, DispatchGroup{Records: len(g)})
	}
	return e
}

func writeEntryT(t testing.TB, s *Store, e *testEntry) {
	t.Helper()
	pos, end, err := s.WriteEntry(e.recs)
	if err != nil {
		t.Fatalf("write entry: %v", err)
	}
	e.pos, e.end = pos, end
}

func dispatchT(t testing.TB, s *Store, end int64, groups []DispatchGroup) []BatchOutcome {
	t.Helper()
	out, err := s.DispatchWritten(end, groups)
	if err != nil {
		t.Fatalf("dispatch written to %d: %v", end, err)
	}
	if len(out) != len(groups) {
		t.Fatalf("dispatch: %d outcomes for %d groups", len(out), len(groups))
	}
	return out
}

// groupsOf concatenates the groups of entries (one DispatchWritten call covering them).
func groupsOf(es ...*testEntry) []DispatchGroup {
	var gs []DispatchGroup
	for _, e := range es {
		gs = append(gs, e.groups...)
	}
	return gs
}

// queueUnits returns the units of (topic, qid) from its min offset to its max.
func queueUnits(s *Store, topic string, qid int32) []cqUnit {
	q := s.queueByName(topic, qid)
	if q == nil {
		return nil
	}
	var out []cqUnit
	for i := q.min.Load(); i < q.max.Load(); i++ {
		u, _ := q.unit(i)
		out = append(out, u)
	}
	return out
}

// crashOS stops the store's goroutines and unmaps everything without a clean close: the page
// cache keeps what was written, like kill -9.
func crashOS(s *Store) {
	close(s.stop)
	s.wg.Wait()
	s.release()
}

func TestEntryLogWriteDispatchRead(t *testing.T) {
	cfg := entryConfig(t)
	var dispatched []string
	cfg.OnDispatch = func(topic string, qid int32, qoff, _ int64) {
		dispatched = append(dispatched, fmt.Sprintf("%s-%d@%d", topic, qid, qoff))
	}
	s := openT(t, cfg)
	defer s.Close()
	seq := newEntrySeq()
	e := newEntry(t, seq,
		[][]byte{msgRec(t, "T", 0, "a", "ka"), msgRec(t, "T", 1, "b", "kb")},
		[][]byte{msgRec(t, "T", 0, "c", "kc")})
	orig := make([][]byte, len(e.recs))
	for i, r := range e.recs {
		orig[i] = bytes.Clone(r)
	}
	writeEntryT(t, s, e)
	if e.pos != 0 || s.WrittenEnd() != e.end || s.CommitLogMaxOffset() != 0 {
		t.Fatalf("entry at [%d,%d), written end %d, dispatched end %d", e.pos, e.end, s.WrittenEnd(), s.CommitLogMaxOffset())
	}
	for i, r := range e.recs {
		if !bytes.Equal(r, orig[i]) {
			t.Fatalf("record %d modified by WriteEntry", i)
		}
	}

	// Read back: every record as given, with PHYSICALOFFSET where it landed.
	got, err := s.ReadWritten(e.pos, int(e.end-e.pos))
	if err != nil {
		t.Fatal(err)
	}
	var phys []int64
	off := 0
	for i, r := range orig {
		want := bytes.Clone(r)
		v, _ := message.ParseView(want)
		v.SetPhysicalOffset(e.pos + int64(off))
		phys = append(phys, e.pos+int64(off))
		if !bytes.Equal(got[off:off+len(r)], want) {
			t.Fatalf("record %d read back differs from what was written", i)
		}
		off += len(r)
	}
	if off != len(got) {
		t.Fatalf("read %d bytes, entry is %d", len(got), off)
	}
	if _, err := s.ReadWritten(e.pos, int(e.end-e.pos)+1); err == nil {
		t.Fatal("read past the written end accepted")
	}

	// Nothing is visible before dispatch.
	if r := s.GetMessages("T", 0, 0, 10, 0, nil); r.Status != NoMatchedLogicQueue {
		t.Fatalf("pull before dispatch: %v", r.Status)
	}
	if _, err := s.ReadRecord(phys[1]); err == nil {
		t.Fatal("ReadRecord of an undispatched record succeeded")
	}
	if b, err := s.ReadCommitLog(0, 1<<20); err != nil || len(b) != 0 {
		t.Fatalf("ReadCommitLog before dispatch: %d bytes, %v", len(b), err)
	}
	if recs, _, _ := s.QueryByKey("T", "ka", 5, 0, 1<<62); len(recs) != 0 {
		t.Fatal("undispatched record found by key")
	}
	if err := s.SyncWritten(); err != nil {
		t.Fatal(err)
	}
	if s.CommitLogFlushedOffset() != 0 {
		t.Fatalf("flushed end %d past the dispatched end", s.CommitLogFlushedOffset())
	}

	out := dispatchT(t, s, e.end, e.groups)
	want := [][]AppendResult{
		{{phys[1], 0, int32(len(orig[1])), entryStoreTS}, {phys[2], 0, int32(len(orig[2])), entryStoreTS}},
		{{phys[3], 1, int32(len(orig[3])), entryStoreTS}},
	}
	for i := range want {
		if out[i].Err != nil || fmt.Sprint(out[i].Results) != fmt.Sprint(want[i]) {
			t.Fatalf("group %d: %+v, want %+v", i, out[i], want[i])
		}
	}
	if s.CommitLogMaxOffset() != e.end || s.WrittenEnd() != e.end {
		t.Fatalf("after dispatch: dispatched end %d, written end %d, want %d", s.CommitLogMaxOffset(), s.WrittenEnd(), e.end)
	}
	r := s.GetMessages("T", 0, 0, 10, 0, nil)
	if r.Status != Found || len(r.Records) != 2 || !bytes.Equal(r.Records[0], got[phys[1]-e.pos:phys[2]-e.pos]) || !bytes.Equal(r.Records[1], got[phys[3]-e.pos:]) {
		t.Fatalf("pull after dispatch: %v, %d records", r.Status, len(r.Records))
	}
	if b, err := s.ReadRecord(phys[2]); err != nil || !bytes.Equal(b, got[phys[2]-e.pos:phys[3]-e.pos]) {
		t.Fatalf("ReadRecord after dispatch: %v", err)
	}
	if recs, _, _ := s.QueryByKey("T", "kb", 5, 0, 1<<62); len(recs) != 1 {
		t.Fatalf("dispatched record found %d times by key", len(recs))
	}
	if got := fmt.Sprint(dispatched); got != "[T-0@0 T-1@0 T-0@1]" {
		t.Fatalf("OnDispatch calls %s", got)
	}
	if st := s.Stats(); st.PutMessageTimesTotal != 3 || st.PutMessageSizeTotal != int64(len(orig[1])+len(orig[2])+len(orig[3])) {
		t.Fatalf("stats %+v", st)
	}
	if err := s.FlushDispatched(); err != nil {
		t.Fatal(err)
	}
	if s.CommitLogFlushedOffset() != e.end || s.cp.read().dispatchedOffset != e.end {
		t.Fatalf("after FlushDispatched: flushed %d, checkpoint %d, want %d", s.CommitLogFlushedOffset(), s.cp.read().dispatchedOffset, e.end)
	}
	checkInvariants(t, s)
}

// TestEntryLogRollSameBytes feeds the same entries to two stores, one dispatching each entry
// as it is written and one dispatching everything at the end: entries roll to new files behind
// a blank marker exactly as Append would, both stores hold identical commitlog files and
// consume queues, and dispatching across the marker works either way.
func TestEntryLogRollSameBytes(t *testing.T) {
	cfgA, cfgB := entryConfig(t), entryConfig(t)
	a, b := openT(t, cfgA), openT(t, cfgB)
	seq := newEntrySeq()
	var es []*testEntry
	rolled := -1
	for i := 0; i < 60; i++ {
		var g [][]byte
		for j := 0; j < 1+i%3; j++ {
			g = append(g, msgRec(t, "R", int32(j), fmt.Sprintf("%0900d", i*10+j), fmt.Sprintf("k%d-%d", i, j)))
		}
		e := newEntry(t, seq, g)
		writeEntryT(t, a, e)
		pos, end, err := b.WriteEntry(e.recs)
		if err != nil || pos != e.pos || end != e.end {
			t.Fatalf("entry %d: store b wrote [%d,%d) %v, store a [%d,%d)", i, pos, end, err, e.pos, e.end)
		}
		dispatchT(t, b, e.end, e.groups)
		if i > 0 && e.pos != es[i-1].end && rolled < 0 {
			rolled = i
		}
		es = append(es, e)
	}
	if rolled < 0 {
		t.Fatal("no entry rolled to a new file")
	}
	blankPos := es[rolled-1].end
	if es[rolled].pos != cfgA.MappedFileSizeCommitLog-blankPos%cfgA.MappedFileSizeCommitLog+blankPos {
		t.Fatalf("rolled entry at %d, previous ended at %d", es[rolled].pos, blankPos)
	}
	marker, err := a.ReadWritten(blankPos, message.BlankMarkerSize)
	if err != nil {
		t.Fatal(err)
	}
	if int64(binary.BigEndian.Uint32(marker)) != es[rolled].pos-blankPos || binary.BigEndian.Uint32(marker[4:]) != message.BlankMagicCode {
		t.Fatalf("no blank marker at %d: % x", blankPos, marker)
	}
	// store a: nothing visible, then one dispatch across every roll
	if a.CommitLogMaxOffset() != 0 {
		t.Fatal("dispatched end moved without a dispatch")
	}
	last := es[len(es)-1]
	if err := a.SyncWritten(); err != nil {
		t.Fatal(err)
	}
	for _, out := range dispatchT(t, a, last.end, groupsOf(es...)) {
		if out.Err != nil {
			t.Fatal(out.Err)
		}
	}
	for _, s := range []*Store{a, b} {
		if s.CommitLogMaxOffset() != last.end || s.WrittenEnd() != last.end {
			t.Fatalf("ends %d/%d, want %d", s.CommitLogMaxOffset(), s.WrittenEnd(), last.end)
		}
		checkInvariants(t, s)
	}
	for qid := int32(0); qid < 3; qid++ {
		ua, ub := queueUnits(a, "R", qid), queueUnits(b, "R", qid)
		if len(ua) == 0 || fmt.Sprint(ua) != fmt.Sprint(ub) {
			t.Fatalf("queue %d differs: %d and %d units", qid, len(ua), len(ub))
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	imgA, imgB := dirImage(t, filepath.Join(cfgA.StorePathRootDir, "commitlog")), dirImage(t, filepath.Join(cfgB.StorePathRootDir, "commitlog"))
	if len(imgA) < 2 {
		t.Fatalf("%d commitlog files", len(imgA))
	}
	sameImage(t, "commitlog of two stores fed the same entries", imgA, imgB)
}

// dirImage reads every file of a real directory.
func dirImage(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// TestEntryLogStaleGroup: a group whose queue offsets do not match is refused as a whole and
// never visible, later groups are checked against the queues as the accepted groups left them,
// Skip groups are neither checked nor dispatched, PREPARED records are not checked.
func TestEntryLogStaleGroup(t *testing.T) {
	cfg := entryConfig(t)
	s := openT(t, cfg)
	prepared, err := message.EncodeRecord(&message.Message{
		Topic: "S", QueueOffset: 77, // not checked
		SysFlag: message.TransactionPreparedType, BornTimestamp: 1, StoreTimestamp: entryStoreTS,
		BornHost: testStoreHost, StoreHost: testStoreHost, Body: []byte("half"),
		Properties: message.FormatProperties(map[string]string{message.PropertyKeys: "kprep"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	e := newEntry(t, nil,
		[][]byte{withQueueOffset(msgRec(t, "S", 0, "g0a", "k0a"), 0), withQueueOffset(msgRec(t, "S", 1, "g0b", "k0b"), 0)},
		[][]byte{withQueueOffset(msgRec(t, "S", 1, "g1a", "k1a"), 1), withQueueOffset(msgRec(t, "S", 0, "g1b", "kstale"), 5)}, // S-0 expects 1
		[][]byte{withQueueOffset(msgRec(t, "S", 0, "g2a", "k2a"), 1), withQueueOffset(msgRec(t, "S", 1, "g2b", "k2b"), 1)},    // as if g1 never was
		[][]byte{withQueueOffset(msgRec(t, "S", 0, "g3", "kskip"), 2)},
		[][]byte{withQueueOffset(msgRec(t, "S", 0, "g4", "k4"), 2), prepared},
		[][]byte{withQueueOffset(msgRec(t, "Fresh", 3, "g5", "kfresh"), 1)}, // a queue that does not exist expects 0
	)
	e.groups[3].Skip = true
	writeEntryT(t, s, e)

	// a split that does not add up changes nothing
	if _, err := s.DispatchWritten(e.end, []DispatchGroup{{Records: 3}}); err == nil {
		t.Fatal("groups not covering the records accepted")
	}
	if _, err := s.DispatchWritten(e.end-1, e.groups); err == nil {
		t.Fatal("dispatch to a non-boundary accepted")
	}
	if s.CommitLogMaxOffset() != 0 || len(s.Topics()) != 0 {
		t.Fatalf("a refused dispatch changed the store: end %d, topics %v", s.CommitLogMaxOffset(), s.Topics())
	}

	out := dispatchT(t, s, e.end, e.groups)
	for i, o := range out {
		stale := errors.Is(o.Err, ErrQueueOffsetStale)
		switch i {
		case 1, 5:
			if !stale || o.Results != nil {
				t.Fatalf("group %d: %+v, want ErrQueueOffsetStale", i, o)
			}
		case 3:
			if o.Err != nil || o.Results != nil {
				t.Fatalf("skipped group %d: %+v", i, o)
			}
		default:
			if o.Err != nil || len(o.Results) != e.groups[i].Records {
				t.Fatalf("group %d: %+v", i, o)
			}
		}
	}
	if r := out[4].Results; r[0].QueueOffset != 2 || r[1].QueueOffset != 0 {
		t.Fatalf("group 4 results %+v", r)
	}
	if s.CommitLogMaxOffset() != e.end {
		t.Fatalf("dispatched end %d, want %d", s.CommitLogMaxOffset(), e.end)
	}
	bodies := func(qid int32) string {
		var out []string
		for _, r := range s.GetMessages("S", qid, 0, 100, 0, nil).Records {
			v, _ := message.ParseView(r)
			out = append(out, string(v.Body()))
		}
		return fmt.Sprint(out)
	}
	if got := bodies(0); got != "[g0a g2a g4]" {
		t.Fatalf("S-0 holds %s", got)
	}
	if got := bodies(1); got != "[g0b g2b]" {
		t.Fatalf("S-1 holds %s", got)
	}
	if s.queueByName("Fresh", 3) != nil {
		t.Fatal("a refused record created its queue")
	}
	for _, k := range []string{"k1a", "kstale", "kskip", "kfresh"} {
		if recs, _, _ := s.QueryByKey("S", k, 5, 0, 1<<62); len(recs) != 0 {
			t.Fatalf("refused record %s found by key", k)
		}
	}
	if recs, _, _ := s.QueryByKey("S", "k2b", 5, 0, 1<<62); len(recs) != 1 {
		t.Fatal("dispatched record not found by key")
	}
	if st := s.Stats(); st.PutMessageTimesTotal != 6 {
		t.Fatalf("%d records counted, want 6", st.PutMessageTimesTotal)
	}
	checkQueues(t, s)

	// After a crash the index is rebuilt from the commitlog, refused records included:
	// QueryByKey still leaves them out.
	if err := s.FlushDispatched(); err != nil {
		t.Fatal(err)
	}
	crashOS(s)
	cfg.Truncate, cfg.TruncateTo = true, e.end
	s = openT(t, cfg)
	defer s.Close()
	offs, _, _ := s.idx.query(message.IndexKeyHash("S#kstale"), 10, 0, 1<<62)
	if len(offs) != 1 {
		t.Fatalf("the rebuilt index holds the refused record %d times, want once (the test relies on it)", len(offs))
	}
	if recs, _, _ := s.QueryByKey("S", "kstale", 5, 0, 1<<62); len(recs) != 0 {
		t.Fatal("refused record found by key after the index rebuild")
	}
	if recs, _, _ := s.QueryByKey("S", "kprep", 5, 0, 1<<62); len(recs) != 1 {
		t.Fatal("dispatched PREPARED record not found by key after the index rebuild")
	}
	if got := bodies(0); got != "[g0a g2a g4]" {
		t.Fatalf("S-0 holds %s after restart", got)
	}
}

func TestEntryLogTruncateWritten(t *testing.T) {
	cfg := entryConfig(t)
	s := openT(t, cfg)
	seq := newEntrySeq()
	size := cfg.MappedFileSizeCommitLog
	entry := func(i int) *testEntry {
		return newEntry(t, seq, [][]byte{msgRec(t, "W", 0, fmt.Sprintf("%03000d", i), "")})
	}
	e1, e2 := entry(1), entry(2)
	writeEntryT(t, s, e1)
	writeEntryT(t, s, e2)
	dispatchT(t, s, e1.end, e1.groups)
	for _, pos := range []int64{e1.pos, e1.end - 1, e2.pos + 1, e2.end - 3, e2.end + 1} {
		if err := s.TruncateWritten(pos); !errors.Is(err, ErrTruncateInvalid) {
			t.Fatalf("truncate to %d: %v, want ErrTruncateInvalid", pos, err)
		}
	}
	if s.WrittenEnd() != e2.end {
		t.Fatal("a refused truncation moved the written end")
	}
	if err := s.TruncateWritten(e2.end); err != nil || s.WrittenEnd() != e2.end {
		t.Fatalf("truncate to the written end: %v", err)
	}
	// within a file
	seq.next[queueKey{"W", 0}] = 1 // the leader's counters after e1
	if err := s.TruncateWritten(e2.pos); err != nil {
		t.Fatal(err)
	}
	if s.WrittenEnd() != e2.pos || s.CommitLogMaxOffset() != e1.end {
		t.Fatalf("after truncation: written %d dispatched %d", s.WrittenEnd(), s.CommitLogMaxOffset())
	}
	file0 := filepath.Join(cfg.StorePathRootDir, "commitlog", fileName(0))
	if b := readFileT(t, file0); !allZero(b[e2.pos:]) {
		t.Fatal("bytes after the truncation point not zeroed")
	}
	e2b := entry(22)
	writeEntryT(t, s, e2b)
	if e2b.pos != e2.pos {
		t.Fatalf("entry after truncation at %d, want %d", e2b.pos, e2.pos)
	}
	dispatchT(t, s, e2b.end, e2b.groups)

	// across a roll: cut at the blank marker (end of the last entry kept)
	// untilRoll writes entries numbered from base until one starts the next file.
	untilRoll := func(base int) []*testEntry {
		var es []*testEntry
		for len(es) == 0 || es[len(es)-1].pos < size {
			e := entry(base + len(es))
			writeEntryT(t, s, e)
			es = append(es, e)
		}
		return es
	}
	es := untilRoll(100)
	if es[len(es)-1].pos != size {
		t.Fatalf("rolled entry at %d", es[len(es)-1].pos)
	}
	blankPos := es[len(es)-2].end
	if err := s.SyncWritten(); err != nil {
		t.Fatal(err)
	}
	if err := s.TruncateWritten(blankPos + 4); !errors.Is(err, ErrTruncateInvalid) {
		t.Fatalf("truncate inside the blank space: %v", err)
	}
	seq.next[queueKey{"W", 0}] -= 1
	if err := s.TruncateWritten(blankPos); err != nil {
		t.Fatal(err)
	}
	if s.WrittenEnd() != blankPos {
		t.Fatalf("written end %d, want %d", s.WrittenEnd(), blankPos)
	}
	if b := readFileT(t, file0); !allZero(b[blankPos:]) {
		t.Fatal("blank marker not zeroed")
	}
	file1 := filepath.Join(cfg.StorePathRootDir, "commitlog", fileName(size))
	if _, err := os.Stat(file1); !os.IsNotExist(err) {
		t.Fatalf("file after the truncation point kept: %v", err)
	}
	small := newEntry(t, seq, [][]byte{msgRec(t, "W", 0, "small", "")})
	writeEntryT(t, s, small)
	if small.pos != blankPos {
		t.Fatalf("small entry at %d, want %d (it fits before the file end)", small.pos, blankPos)
	}

	// across a roll again, cut at the next file's start: the marker stays
	es2 := untilRoll(200)
	if es2[len(es2)-1].pos != size {
		t.Fatalf("rolled entry at %d", es2[len(es2)-1].pos)
	}
	seq.next[queueKey{"W", 0}] -= 1
	if err := s.TruncateWritten(size); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file1); !os.IsNotExist(err) {
		t.Fatalf("file starting at the truncation point kept: %v", err)
	}
	if s.WrittenEnd() != size {
		t.Fatalf("written end %d", s.WrittenEnd())
	}
	again := entry(300)
	writeEntryT(t, s, again)
	if again.pos != size {
		t.Fatalf("entry after truncating to a file start at %d", again.pos)
	}
	all := append(es[:len(es)-1:len(es)-1], small)
	all = append(all, es2[:len(es2)-1]...)
	all = append(all, again)
	for _, o := range dispatchT(t, s, again.end, groupsOf(all...)) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
	}
	checkInvariants(t, s)

	// the truncations are durable: a clean reopen finds the same written end
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, cfg)
	defer s.Close()
	if s.WrittenEnd() != again.end || s.CommitLogMaxOffset() != again.end {
		t.Fatalf("after reopen: written %d dispatched %d, want %d", s.WrittenEnd(), s.CommitLogMaxOffset(), again.end)
	}
	checkInvariants(t, s)
}

func readFileT(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// TestEntryLogRecoverKeepsWritten: after a stop (unclean, or clean) with entries written but
// not applied, Open with TruncateTo = the applied end keeps every written byte (the Raft log),
// rolls the consume queues, the index and the dispatched end back to TruncateTo, and
// dispatching the same entries again rebuilds the same consume queues.
func TestEntryLogRecoverKeepsWritten(t *testing.T) {
	t.Run("crash", func(t *testing.T) { testEntryLogRecoverKeepsWritten(t, true) })
	t.Run("clean", func(t *testing.T) { testEntryLogRecoverKeepsWritten(t, false) })
}

func testEntryLogRecoverKeepsWritten(t *testing.T, crash bool) {
	cfg := entryConfig(t)
	s := openT(t, cfg)
	seq := newEntrySeq()
	var es []*testEntry
	for i := 0; i < 40; i++ {
		e := newEntry(t, seq,
			[][]byte{msgRec(t, "C", int32(i%2), fmt.Sprintf("%01500d", i), fmt.Sprintf("c%d", i))},
			[][]byte{msgRec(t, "C", 2, fmt.Sprintf("x%d", i), fmt.Sprintf("x%d", i))})
		writeEntryT(t, s, e)
		es = append(es, e)
	}
	if err := s.SyncWritten(); err != nil {
		t.Fatal(err)
	}
	applied := es[14]
	dispatchT(t, s, applied.end, groupsOf(es[:15]...))
	if err := s.FlushDispatched(); err != nil { // then the state machine records applied.end
		t.Fatal(err)
	}
	last := es[len(es)-1]
	dispatchT(t, s, es[29].end, groupsOf(es[15:30]...))
	if err := s.flushLogics(); err != nil { // units past the applied end are durable too
		t.Fatal(err)
	}
	dispatchT(t, s, last.end, groupsOf(es[30:]...))
	want := map[int32][]cqUnit{}
	for qid := int32(0); qid < 3; qid++ {
		want[qid] = queueUnits(s, "C", qid)
	}
	if applied.end >= cfg.MappedFileSizeCommitLog || last.end <= cfg.MappedFileSizeCommitLog {
		t.Fatalf("the test needs the written tail to cross a file (applied %d, end %d)", applied.end, last.end)
	}
	image, err := s.ReadWritten(es[20].pos, int(es[21].end-es[20].pos))
	if err != nil {
		t.Fatal(err)
	}
	if crash {
		crashOS(s)
	} else if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	cfg.Truncate, cfg.TruncateTo = true, applied.end
	s = openT(t, cfg)
	if s.WrittenEnd() != last.end || s.CommitLogMaxOffset() != applied.end {
		t.Fatalf("after recovery: written %d dispatched %d, want %d %d", s.WrittenEnd(), s.CommitLogMaxOffset(), last.end, applied.end)
	}
	if got, err := s.ReadWritten(es[20].pos, len(image)); err != nil || !bytes.Equal(got, image) {
		t.Fatalf("written bytes changed by recovery: %v", err)
	}
	for qid := int32(0); qid < 3; qid++ {
		n := int64(len(queueUnits(s, "C", qid)))
		wantN := int64(8)
		if qid == 1 {
			wantN = 7
		} else if qid == 2 {
			wantN = 15
		}
		if n != wantN || s.MaxOffset("C", qid) != wantN {
			t.Fatalf("queue %d: %d units after recovery, want %d", qid, n, wantN)
		}
	}
	if _, err := s.ReadRecord(es[20].pos + int64(len(es[20].recs[0]))); err == nil {
		t.Fatal("record past the applied end readable after recovery")
	}
	if recs, _, _ := s.QueryByKey("C", "c20", 5, 0, 1<<62); len(recs) != 0 {
		t.Fatal("record past the applied end found by key after recovery")
	}
	if offs, _, _ := s.idx.query(message.IndexKeyHash("C#c20"), 10, 0, 1<<62); len(offs) != 0 {
		t.Fatal("index entry of a record past the applied end kept")
	}
	if recs, _, _ := s.QueryByKey("C", "c5", 5, 0, 1<<62); len(recs) != 1 {
		t.Fatalf("applied record found %d times by key after recovery", len(recs))
	}
	for _, o := range dispatchT(t, s, last.end, groupsOf(es[15:]...)) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
	}
	for qid := int32(0); qid < 3; qid++ {
		if got := queueUnits(s, "C", qid); fmt.Sprint(got) != fmt.Sprint(want[qid]) {
			t.Fatalf("queue %d after dispatching again: %v, want %v", qid, got, want[qid])
		}
	}
	if recs, _, _ := s.QueryByKey("C", "c20", 5, 0, 1<<62); len(recs) != 1 {
		t.Fatal("record dispatched again not found by key")
	}
	checkInvariants(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Errors as for a plain truncation.
	cfg.TruncateTo = last.end + 1
	if _, err := Open(cfg); !errors.Is(err, ErrTruncateBeyondEnd) {
		t.Fatalf("TruncateTo past the written end: %v", err)
	}
	cfg.TruncateTo = applied.end + 3
	if _, err := Open(cfg); !errors.Is(err, ErrTruncateInvalid) {
		t.Fatalf("TruncateTo inside a record: %v", err)
	}
	// Without Truncate everything written is dispatched.
	cfg.Truncate = false
	s = openT(t, cfg)
	defer s.Close()
	if s.WrittenEnd() != last.end || s.CommitLogMaxOffset() != last.end {
		t.Fatalf("without Truncate: written %d dispatched %d", s.WrittenEnd(), s.CommitLogMaxOffset())
	}
}

// TestEntryLogTornTail: on a power loss, written bytes not synced are lost and a torn record
// ends the written log; the log store then cuts the partial entry and writes it again.
func TestEntryLogTornTail(t *testing.T) {
	memConfig := func(fs *vfs.MemFS) Config {
		cfg := testConfig(fs)
		cfg.EntryLog = true
		cfg.FlushIntervalCommitLog = time.Hour // only SyncWritten syncs the written bytes
		return cfg
	}
	base := vfs.NewMemFS()
	cfg := memConfig(base)
	s := openT(t, cfg)
	seq := newEntrySeq()
	e1 := newEntry(t, seq, [][]byte{msgRec(t, "P", 0, "one", ""), msgRec(t, "P", 0, "two", "")})
	e2 := newEntry(t, seq, [][]byte{msgRec(t, "P", 0, "three", ""), msgRec(t, "P", 0, "four", "")})
	writeEntryT(t, s, e1)
	dispatchT(t, s, e1.end, e1.groups)
	if err := s.FlushDispatched(); err != nil {
		t.Fatal(err)
	}
	writeEntryT(t, s, e2)
	// not synced: lost on power loss
	lost := crashCopy(t, s, base)
	c1 := memConfig(lost)
	c1.Truncate, c1.TruncateTo = true, e1.end
	s1 := openT(t, c1)
	if s1.WrittenEnd() != e1.end || s1.CommitLogMaxOffset() != e1.end {
		t.Fatalf("unsynced entry survived: written %d", s1.WrittenEnd())
	}
	s1.Close()

	// synced, then torn in its last record
	base = vfs.NewMemFS()
	cfg = memConfig(base)
	s = openT(t, cfg)
	writeEntryT(t, s, e1)
	dispatchT(t, s, e1.end, e1.groups)
	if err := s.FlushDispatched(); err != nil {
		t.Fatal(err)
	}
	writeEntryT(t, s, e2)
	if err := s.SyncWritten(); err != nil {
		t.Fatal(err)
	}
	lastRec := e2.end - int64(len(e2.recs[2]))
	crashed := crashCopy(t, s, base)
	overwrite(t, crashed, "/store/commitlog/"+fileName(0), cfg.MappedFileSizeCommitLog, lastRec+message.OffsetPhysicalOffset, []byte("garbage"))
	cfg = memConfig(crashed)
	cfg.Truncate, cfg.TruncateTo = true, e1.end
	s = openT(t, cfg)
	defer s.Close()
	if s.WrittenEnd() != lastRec || s.CommitLogMaxOffset() != e1.end {
		t.Fatalf("torn tail: written %d dispatched %d, want %d %d", s.WrittenEnd(), s.CommitLogMaxOffset(), lastRec, e1.end)
	}
	if err := s.TruncateWritten(e2.pos); err != nil {
		t.Fatal(err)
	}
	writeEntryT(t, s, e2)
	if e2.end != lastRec+int64(len(e2.recs[2])) {
		t.Fatalf("entry written again ends at %d", e2.end)
	}
	dispatchT(t, s, e2.end, e2.groups)
	if s.MaxOffset("P", 0) != 4 {
		t.Fatalf("queue max %d", s.MaxOffset("P", 0))
	}
	checkInvariants(t, s)
}

// TestEntryLogRefusals: appends are refused in EntryLog mode, entry-log calls outside it, and
// WriteEntry refuses what recovery would not accept, writing nothing.
func TestEntryLogRefusals(t *testing.T) {
	cfg := entryConfig(t)
	s := openT(t, cfg)
	defer s.Close()
	r := msgRec(t, "X", 0, "x", "")
	if _, err := s.Append(context.Background(), [][]byte{r}); !errors.Is(err, ErrEntryLog) {
		t.Fatalf("Append: %v", err)
	}
	if _, err := s.AppendScanned(context.Background(), [][]byte{r}, nil); !errors.Is(err, ErrEntryLog) {
		t.Fatalf("AppendScanned: %v", err)
	}
	if _, err := s.AppendReplicated([][]byte{r}); !errors.Is(err, ErrEntryLog) {
		t.Fatalf("AppendReplicated: %v", err)
	}
	if _, err := s.AppendReplicatedBatch([][][]byte{{r}}); !errors.Is(err, ErrEntryLog) {
		t.Fatalf("AppendReplicatedBatch: %v", err)
	}
	if err := s.AppendRaw(0, r); !errors.Is(err, ErrEntryLog) {
		t.Fatalf("AppendRaw: %v", err)
	}

	badProps := msgRec(t, "X", 0, "x", "")
	badProps[len(badProps)-1] = 'x' // properties no longer end with U+0002: CheckStored fails
	noTS := rec(t, "X", 0, "x", "", "")
	negQ := msgRec(t, "X", -1, "x", "")
	big := msgRec(t, "X", 0, string(make([]byte, 40<<10)), "")
	for name, recs := range map[string][][]byte{
		"no records":        nil,
		"malformed":         {headerRec(t, 1), badProps},
		"store time 0":      {headerRec(t, 1), noTS},
		"negative queue id": {headerRec(t, 1), negQ},
		"trailing bytes":    {append(headerRec(t, 0), 0)},
		"too big for files": {headerRec(t, 2), big, big},
	} {
		if _, _, err := s.WriteEntry(recs); !errors.Is(err, ErrMessageIllegal) {
			t.Fatalf("%s: %v, want ErrMessageIllegal", name, err)
		}
	}
	if s.WrittenEnd() != 0 {
		t.Fatalf("refused entries wrote up to %d", s.WrittenEnd())
	}

	plain := openT(t, testConfig(vfs.NewMemFS()))
	defer plain.Close()
	appendT(t, plain, r)
	if plain.WrittenEnd() != plain.CommitLogMaxOffset() {
		t.Fatal("WrittenEnd outside EntryLog mode differs from CommitLogMaxOffset")
	}
	errs := []error{
		func() error { _, _, err := plain.WriteEntry([][]byte{headerRec(t, 0)}); return err }(),
		plain.SyncWritten(),
		func() error { _, err := plain.ReadWritten(0, 8); return err }(),
		plain.TruncateWritten(0),
		func() error { _, err := plain.DispatchWritten(0, nil); return err }(),
	}
	for i, err := range errs {
		if !errors.Is(err, ErrEntryLog) {
			t.Fatalf("entry-log call %d on a plain store: %v", i, err)
		}
	}
}

// TestEntryLogReadWhileWriting: ReadWritten of written entries runs beside WriteEntry,
// DispatchWritten and SyncWritten (run with -race).
func TestEntryLogReadWhileWriting(t *testing.T) {
	s := openT(t, entryConfig(t))
	defer s.Close()
	seq := newEntrySeq()
	first := newEntry(t, seq, [][]byte{msgRec(t, "Q", 0, "first", "")})
	writeEntryT(t, s, first)
	want, err := s.ReadWritten(first.pos, int(first.end-first.pos))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-stop:
				return
			default:
			}
			got, err := s.ReadWritten(first.pos, len(want))
			if err != nil || !bytes.Equal(got, want) {
				readErr = fmt.Errorf("read %v", err)
				return
			}
		}
	}()
	prev := first.end
	for i := 0; i < 200; i++ {
		e := newEntry(t, seq, [][]byte{msgRec(t, "Q", 0, fmt.Sprintf("%0800d", i), "")})
		writeEntryT(t, s, e)
		if i%10 == 0 {
			if err := s.SyncWritten(); err != nil {
				t.Fatal(err)
			}
		}
		dispatchT(t, s, prev, []DispatchGroup{{Records: 1}})
		prev = e.end
	}
	close(stop)
	wg.Wait()
	if readErr != nil {
		t.Fatal(readErr)
	}
	if s.MaxOffset("Q", 0) != 200 {
		t.Fatalf("queue max %d", s.MaxOffset("Q", 0))
	}
}

// TestEntryLogClassicSlaveStream: what the HA server reads from a commitlog that is the Raft log
// (ReadCommitLog) is whole records, with the records the state machine refused (a stale group, a
// skipped step) masked as rolled back, so a classic slave's AppendRaw takes it chunk by chunk
// and ends with the same consume queues.
func TestEntryLogClassicSlaveStream(t *testing.T) {
	cfg := entryConfig(t)
	s := openT(t, cfg)
	for i := 0; i < 40; i++ {
		e := newEntry(t, nil,
			[][]byte{withQueueOffset(msgRec(t, "S", 0, fmt.Sprint("a", i), "ka"), int64(2*i))},
			[][]byte{withQueueOffset(msgRec(t, "S", 0, fmt.Sprint("stale", i), "kstale"), int64(2*i+7))}, // S-0 expects 2i+1
			[][]byte{withQueueOffset(msgRec(t, "S", 0, fmt.Sprint("b", i), "kb"), int64(2*i+1)), withQueueOffset(msgRec(t, "T", 1, fmt.Sprint("t", i), "kt"), int64(2*i))},
			[][]byte{withQueueOffset(msgRec(t, "T", 1, fmt.Sprint("skip", i), "ks"), int64(2*i+1))},
			[][]byte{withQueueOffset(msgRec(t, "T", 1, fmt.Sprint("c", i), "kc"), int64(2*i+1))},
		)
		e.groups[3].Skip = true
		writeEntryT(t, s, e)
		dispatchT(t, s, e.end, e.groups)
	}
	classic := entryConfig(t)
	classic.EntryLog = false
	classic.StorePathRootDir = t.TempDir()
	slave := openT(t, classic)
	masked := 0
	for off := int64(0); off < s.CommitLogMaxOffset(); {
		b, err := s.ReadCommitLog(off, 700)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			t.Fatalf("empty chunk at %d of %d", off, s.CommitLogMaxOffset())
		}
		for p := 0; p+8 <= len(b); {
			size := int(int32(binary.BigEndian.Uint32(b[p:])))
			if binary.BigEndian.Uint32(b[p+4:]) == message.BlankMagicCode {
				break
			}
			v, err := message.ParseView(b[p : p+size])
			if err != nil {
				t.Fatalf("chunk at %d: record at %d: %v", off, p, err)
			}
			body := string(v.Body())
			rolled := message.TransactionType(v.SysFlag()) == message.TransactionRollbackType
			if (strings.HasPrefix(body, "stale") || strings.HasPrefix(body, "skip")) != (rolled && string(v.Topic()) != message.RaftEntryTopic) {
				t.Fatalf("record %q of %s: rolled back %v", body, v.Topic(), rolled)
			}
			if rolled && string(v.Topic()) != message.RaftEntryTopic {
				masked++
			}
			p += size
		}
		if err := slave.AppendRaw(off, b); err != nil {
			t.Fatalf("classic slave refuses the chunk at %d (%d bytes): %v", off, len(b), err)
		}
		off += int64(len(b))
	}
	if masked != 80 {
		t.Fatalf("%d refused records masked, want 80", masked)
	}
	for _, q := range []struct {
		topic string
		qid   int32
	}{{"S", 0}, {"T", 1}} {
		a, b := queueUnits(s, q.topic, q.qid), queueUnits(slave, q.topic, q.qid)
		if len(a) != 80 || !reflect.DeepEqual(a, b) {
			t.Fatalf("queue %s-%d: %d units on the entry log, %d on the slave", q.topic, q.qid, len(a), len(b))
		}
	}
}

// withQueueOffset sets record r's QUEUEOFFSET, as the leader's sequencer would, and returns it.
func withQueueOffset(r []byte, off int64) []byte {
	v, _ := message.ParseView(r)
	v.SetQueueOffset(off)
	return r
}

// TestEntryLogSmallEntryThroughFile: an entry far smaller than a page is written with WriteAt,
// not stored through the mapping: each entry is synced right after, and a store into a page the
// last sync cleaned would fault and flush the page's translations on every CPU
// (writeThroughMin), once per message for a lone producer.
func TestEntryLogSmallEntryThroughFile(t *testing.T) {
	fs := vfs.NewMemFS()
	cfg := testConfig(fs)
	cfg.FlushDiskType = AsyncFlush
	cfg.EntryLog = true
	s := openT(t, cfg)
	defer s.Close()
	seq := newEntrySeq()
	var size int64
	for i := range 3 {
		e := newEntry(t, seq, [][]byte{msgRec(t, "T", 0, fmt.Sprint("m", i), "")})
		before := fs.Calls(vfs.OpWriteAt)
		writeEntryT(t, s, e)
		if e.end-e.pos >= writeThroughMin {
			t.Fatalf("entry of %d bytes: not a small one", e.end-e.pos)
		}
		if got := fs.Calls(vfs.OpWriteAt) - before; got != 1 {
			t.Fatalf("entry %d: %d WriteAt calls, want 1 (the mapping must not take it)", i, got)
		}
		if err := s.SyncWritten(); err != nil {
			t.Fatal(err)
		}
		size = e.end
	}
	got, err := s.ReadWritten(0, int(size))
	if err != nil || len(got) != int(size) {
		t.Fatalf("read back %d bytes: %v", len(got), err)
	}
}

// TestEntryLogDispatchesFromMemory: DispatchWritten parses the records of the entries written
// since the last dispatch where WriteEntry was given them, not through the commitlog's mapping,
// with the outcomes reading the file gives (across a roll, several entries at once, after a
// truncation, past maxUndispatched); an entry whose file bytes were overwritten after its write
// still dispatches from memory, while a store that kept nothing reads the file and refuses it.
func TestEntryLogDispatchesFromMemory(t *testing.T) {
	cfgMem, cfgFile := entryConfig(t), entryConfig(t)
	mem, file := openT(t, cfgMem), openT(t, cfgFile)
	seqMem, seqFile := newEntrySeq(), newEntrySeq()
	size := cfgMem.MappedFileSizeCommitLog
	entry := func(q *entrySeq, i int) *testEntry {
		return newEntry(t, q, [][]byte{msgRec(t, "M", int32(i%2), fmt.Sprintf("%02000d", i), fmt.Sprintf("k%d", i))},
			[][]byte{msgRec(t, "N", 0, fmt.Sprintf("%0500d", i), "")})
	}
	forget := func() { // file reads the commitlog
		file.mu.Lock()
		file.undispatched = nil
		file.mu.Unlock()
	}
	step := func(n, base int) {
		t.Helper()
		var em, ef []*testEntry
		for i := range n {
			m, f := entry(seqMem, base+i), entry(seqFile, base+i)
			writeEntryT(t, mem, m)
			writeEntryT(t, file, f)
			if m.pos != f.pos || m.end != f.end {
				t.Fatalf("entry %d at [%d, %d) and [%d, %d)", base+i, m.pos, m.end, f.pos, f.end)
			}
			em, ef = append(em, m), append(ef, f)
		}
		forget()
		end := em[n-1].end
		mem.mu.Lock()
		_, kept := mem.undispatchedRecords(mem.cl.writePos.Load(), end)
		mem.mu.Unlock()
		if !kept {
			t.Fatalf("entries %d..%d: the memory store kept nothing to dispatch from", base, base+n-1)
		}
		got, want := dispatchT(t, mem, end, groupsOf(em...)), dispatchT(t, file, end, groupsOf(ef...))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("entries %d..%d: from memory %+v, from the file %+v", base, base+n-1, got, want)
		}
	}
	for i := 0; mem.WrittenEnd() < 2*size; i += 3 { // one at a time, then two, three: rolls included
		step(1+i%3, i)
	}
	// a truncation of entries not dispatched: what follows reads the file until it is dispatched
	m, f := entry(seqMem, 900), entry(seqFile, 900)
	writeEntryT(t, mem, m)
	writeEntryT(t, file, f)
	if err := mem.TruncateWritten(m.pos); err != nil {
		t.Fatal(err)
	}
	if err := file.TruncateWritten(f.pos); err != nil {
		t.Fatal(err)
	}
	for _, q := range []*entrySeq{seqMem, seqFile} { // the leader's counters before entry 900
		q.next[queueKey{"M", 0}]--
		q.next[queueKey{"N", 0}]--
	}
	step(2, 1000)
	// more entries than are kept: the dispatch reads the file for them
	var em, ef []*testEntry
	for i := range maxUndispatched + 3 {
		m, f := entry(seqMem, 2000+i), entry(seqFile, 2000+i)
		writeEntryT(t, mem, m)
		writeEntryT(t, file, f)
		em, ef = append(em, m), append(ef, f)
	}
	forget()
	end := em[len(em)-1].end
	if got, want := dispatchT(t, mem, end, groupsOf(em...)), dispatchT(t, file, end, groupsOf(ef...)); !reflect.DeepEqual(got, want) {
		t.Fatalf("past maxUndispatched: from memory %+v, from the file %+v", got, want)
	}
	step(1, 3000)

	// the file's copy of an entry overwritten after its write: memory still has the records
	m, f = entry(seqMem, 4000), entry(seqFile, 4000)
	writeEntryT(t, mem, m)
	writeEntryT(t, file, f)
	forget()
	for _, c := range []struct {
		s   *Store
		cfg Config
		e   *testEntry
	}{{mem, cfgMem, m}, {file, cfgFile, f}} {
		name := filepath.Join(c.cfg.StorePathRootDir, "commitlog", fileName(c.e.pos-c.e.pos%size))
		fh, err := os.OpenFile(name, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fh.WriteAt(make([]byte, c.e.end-c.e.pos), c.e.pos%size); err != nil {
			t.Fatal(err)
		}
		fh.Close()
	}
	if _, err := mem.DispatchWritten(m.end, m.groups); err != nil {
		t.Fatalf("dispatch from memory after the file's bytes were zeroed: %v", err)
	}
	if _, err := file.DispatchWritten(f.end, f.groups); err == nil {
		t.Fatal("the store that kept nothing dispatched zeroed bytes")
	}
}
