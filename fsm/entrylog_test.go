package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"rocketraft/message"
	"rocketraft/storage"
	"rocketraft/storage/vfs"
)

func newEntryFSM(t testing.TB, fs vfs.FS, meta MetaApplier) *FSM {
	t.Helper()
	f, err := New(Config{Store: storeConfig(fs), Meta: meta, EntryLog: true})
	if err != nil {
		t.Fatalf("new fsm with the entry log: %v", err)
	}
	return f
}

// stampLike gives the records of logs the queue offsets a copying apply assigned them (results),
// as the leader's sequencer would, and an AppendedAt, as Raft's leader would.
func stampLike(t testing.TB, logs []*raft.Log, results []interface{}) []*raft.Log {
	t.Helper()
	out := make([]*raft.Log, len(logs))
	for i, l := range logs {
		c := *l
		c.AppendedAt = time.Unix(1_700_000_000, int64(i)*1000)
		if r, ok := results[i].(*ApplyResult); ok {
			appends, err := DecodeMessages(l.Data)
			if err != nil {
				t.Fatal(err)
			}
			for a, recs := range appends {
				if r.Appends[a].Err != nil {
					t.Fatalf("entry %d append %d refused by the copying apply: %v", l.Index, a, r.Appends[a].Err)
				}
				for j := range recs {
					cp := append([]byte(nil), recs[j]...)
					v, err := message.ParseView(cp)
					if err != nil {
						t.Fatal(err)
					}
					v.SetQueueOffset(r.Appends[a].Results[j].QueueOffset)
					recs[j] = cp
				}
			}
			c.Data = EncodeMessages(appends)
		}
		out[i] = &c
	}
	return out
}

// storeEntries writes logs into f's entry log a few at a time, as Raft would.
func storeEntries(t testing.TB, f *FSM, logs []*raft.Log) {
	t.Helper()
	for len(logs) > 0 {
		n := min(len(logs), 7)
		if err := f.entries.StoreLogs(logs[:n]); err != nil {
			t.Fatal(err)
		}
		logs = logs[n:]
	}
}

// queueRecords reads every record of every queue (PHYSICALOFFSET zeroed: the two stores lay
// them out differently).
func queueRecords(t testing.TB, f *FSM) map[string][][]byte {
	t.Helper()
	st, release, err := f.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	out := map[string][][]byte{}
	for _, topic := range st.Topics() {
		for _, q := range st.QueueIDs(topic) {
			r := st.GetMessages(topic, q, st.MinOffset(topic, q), 1<<20, 1<<30, nil)
			for _, m := range r.Records {
				cp := append([]byte(nil), m...)
				v, err := message.ParseView(cp)
				if err != nil {
					t.Fatal(err)
				}
				v.SetPhysicalOffset(0)
				out[fmt.Sprintf("%s-%d", topic, q)] = append(out[fmt.Sprintf("%s-%d", topic, q)], cp)
			}
		}
	}
	return out
}

// TestEntryLogAppliesAsCopying: entries written once into the commitlog and dispatched in place
// give the same consume queues, records, results and metadata as the copying apply; Raft reads
// back exactly the entries it stored; two replicas fed the same entries are byte-identical.
func TestEntryLogAppliesAsCopying(t *testing.T) {
	logs := workload(t, 160)
	refMeta := newFakeMeta()
	ref := newFSM(t, vfs.NewMemFS(), refMeta)
	defer ref.Close()
	refRes := applyAll(ref, logs)
	stamped := stampLike(t, logs, refRes)

	var images []map[string][]byte
	for replica := 0; replica < 2; replica++ {
		fs := vfs.NewMemFS()
		meta := newFakeMeta()
		f := newEntryFSM(t, fs, meta)
		storeEntries(t, f, stamped)
		for i, l := range stamped {
			var got raft.Log
			if err := f.entries.GetLog(l.Index, &got); err != nil {
				t.Fatalf("GetLog(%d): %v", l.Index, err)
			}
			if got.Index != l.Index || got.Term != l.Term || got.Type != l.Type || !bytes.Equal(got.Data, l.Data) || !got.AppendedAt.Equal(l.AppendedAt) {
				t.Fatalf("entry %d read back differs (data equal: %v)", i+1, bytes.Equal(got.Data, l.Data))
			}
		}
		st, release, err := f.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if end := st.CommitLogMaxOffset(); end != 0 {
			t.Fatalf("written entries visible before they are applied: dispatched end %d", end)
		}
		release()
		res := applyAll(f, stamped)
		for i := range res {
			a, b := res[i], refRes[i]
			if ar, ok := a.(*ApplyResult); ok {
				br := b.(*ApplyResult)
				for k := range ar.Appends {
					if ar.Appends[k].Err != nil || len(ar.Appends[k].Results) != len(br.Appends[k].Results) {
						t.Fatalf("entry %d append %d: %v, %d results (copying: %d)", i+1, k, ar.Appends[k].Err, len(ar.Appends[k].Results), len(br.Appends[k].Results))
					}
					for j, r := range ar.Appends[k].Results {
						if r.QueueOffset != br.Appends[k].Results[j].QueueOffset || r.Size != br.Appends[k].Results[j].Size {
							t.Fatalf("entry %d append %d record %d: %+v, copying %+v", i+1, k, j, r, br.Appends[k].Results[j])
						}
					}
				}
				continue
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("entry %d: result %#v, copying %#v", i+1, a, b)
			}
		}
		if a, b := queueState(ref), queueState(f); a != b {
			t.Fatalf("queues differ:\n%s\n%s", a, b)
		}
		if a, b := queueRecords(t, ref), queueRecords(t, f); !reflect.DeepEqual(a, b) {
			t.Fatalf("queue contents differ (%d vs %d queues)", len(a), len(b))
		}
		if refMeta.dump() != meta.dump() {
			t.Fatalf("metadata differs:\n%s\n%s", refMeta.dump(), meta.dump())
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		images = append(images, commitlogImage(t, fs))
	}
	sameImage(t, "replicas", images[0], images[1])
}

// TestEntryLogStaleSendRefused: a send whose queue offsets are not its queues' next is refused
// on apply (storage.ErrQueueOffsetStale) and never visible; the next current one is stored.
func TestEntryLogStaleSendRefused(t *testing.T) {
	f := newEntryFSM(t, vfs.NewMemFS(), nil)
	defer f.Close()
	mk := func(idx uint64, qoffs ...int64) *raft.Log {
		var appends [][][]byte
		for i, q := range qoffs {
			r := rec(t, "S", 0, fmt.Sprint("m", idx, i), 1_700_000_000_000)
			v, _ := message.ParseView(r)
			v.SetQueueOffset(q)
			appends = append(appends, [][]byte{r})
		}
		return &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: EncodeMessages(appends)}
	}
	logs := []*raft.Log{mk(1, 0, 1), mk(2, 5, 2), mk(3, 3)}
	storeEntries(t, f, logs)
	res := applyAll(f, logs)
	r2 := res[1].(*ApplyResult)
	if !errors.Is(r2.Appends[0].Err, storage.ErrQueueOffsetStale) || r2.Appends[1].Err != nil {
		t.Fatalf("entry 2: %v / %v, want stale then stored", r2.Appends[0].Err, r2.Appends[1].Err)
	}
	if r3 := res[2].(*ApplyResult); r3.Appends[0].Err != nil {
		t.Fatalf("entry 3: %v", r3.Appends[0].Err)
	}
	if got := queueState(f); got != "S-0:4 " {
		t.Fatalf("queue %q, want S-0:4", got)
	}
}

// TestEntryLogCutSuffix: Raft cuts an uncommitted suffix and writes the new leader's entries in
// its place; applied entries are never cut (a range starting at them is compaction).
func TestEntryLogCutSuffix(t *testing.T) {
	logs := workload(t, 40)
	ref := newFSM(t, vfs.NewMemFS(), newFakeMeta())
	defer ref.Close()
	stamped := stampLike(t, logs, applyAll(ref, logs))

	fs := vfs.NewMemFS()
	f := newEntryFSM(t, fs, newFakeMeta())
	defer f.Close()
	storeEntries(t, f, stamped[:20])
	applyAll(f, stamped[:10])
	// a deposed leader's entries 21-30: another term, other bytes
	var other []*raft.Log
	for i := 0; i < 10; i++ {
		c := *stamped[i]
		c.Index, c.Term = uint64(21+i), 99
		other = append(other, &c)
	}
	storeEntries(t, f, other)
	if err := f.entries.DeleteRange(21, 30); err != nil {
		t.Fatal(err)
	}
	if last, _ := f.entries.LastIndex(); last != 20 {
		t.Fatalf("last after cut %d", last)
	}
	if err := f.entries.DeleteRange(1, 20); err != nil { // compaction: kept
		t.Fatal(err)
	}
	if first, _ := f.entries.FirstIndex(); first != 1 {
		t.Fatalf("first after compaction %d, want 1 (retention decides)", first)
	}
	storeEntries(t, f, stamped[20:])
	applyAll(f, stamped[10:])
	if a, b := queueState(ref), queueState(f); a != b {
		t.Fatalf("queues differ:\n%s\n%s", a, b)
	}
	var got raft.Log
	if err := f.entries.GetLog(40, &got); err != nil || !bytes.Equal(got.Data, stamped[39].Data) {
		t.Fatalf("entry 40 after the rewrite: %v", err)
	}
}

// TestEntryLogReplayAfterKill: killed with entries written (and some applied) past the applied
// marker, a node reopens with its whole Raft log (the map rebuilt from the headers), its
// consume queues rolled back to the marker, and Raft's replay gives the state of a node that
// never crashed, byte for byte.
func TestEntryLogReplayAfterKill(t *testing.T) {
	logs := workload(t, 160)
	ref := newFSM(t, vfs.NewMemFS(), newFakeMeta())
	defer ref.Close()
	stamped := stampLike(t, logs, applyAll(ref, logs))
	cleanFS := vfs.NewMemFS()
	clean := newEntryFSM(t, cleanFS, newFakeMeta())
	storeEntries(t, clean, stamped)
	applyAll(clean, stamped)
	clean.Close()

	for _, c := range []struct{ cut, crashAt int }{{0, 79}, {37, 79}, {81, 120}, {120, 160}} {
		t.Run(fmt.Sprint(c.cut, "-", c.crashAt), func(t *testing.T) {
			fs := vfs.NewMemFS()
			f := newEntryFSM(t, fs, newFakeMeta())
			storeEntries(t, f, stamped)
			applyAll(f, stamped[:c.cut])
			if err := f.syncApplied(nil, applied{}); err != nil {
				t.Fatal(err)
			}
			applyAll(f, stamped[c.cut:c.crashAt])
			crashed := fs.CrashKeeping(func(string, int) bool { return true })
			f.Close()

			meta := newFakeMeta()
			g := newEntryFSM(t, crashed, meta)
			defer g.Close()
			if g.AppliedIndex() != uint64(c.cut) {
				t.Fatalf("applied index after restart %d, want %d", g.AppliedIndex(), c.cut)
			}
			if last, _ := g.entries.LastIndex(); last != uint64(len(stamped)) {
				t.Fatalf("raft log ends at %d after restart, want %d", last, len(stamped))
			}
			applyAll(g, stamped)
			if a, b := queueState(ref), queueState(g); a != b {
				t.Fatalf("queues differ:\n%s\n%s", a, b)
			}
			g.Close()
			sameImage(t, "after replay", commitlogImage(t, cleanFS), commitlogImage(t, crashed))
		})
	}
}

// TestEntryLogTornTail: a power loss that keeps only part of the last entries' pages ends the
// Raft log at the last whole entry; the next start cuts the torn rest.
func TestEntryLogTornTail(t *testing.T) {
	logs := workload(t, 60)
	ref := newFSM(t, vfs.NewMemFS(), newFakeMeta())
	defer ref.Close()
	stamped := stampLike(t, logs, applyAll(ref, logs))
	fs := vfs.NewMemFS()
	f := newEntryFSM(t, fs, newFakeMeta())
	storeEntries(t, f, stamped[:40])
	applyAll(f, stamped[:20])
	if err := f.syncApplied(nil, applied{}); err != nil {
		t.Fatal(err)
	}
	// the leader's way: written, the fsync still to come
	if err := f.entries.StoreLogsUnsynced(stamped[40:]); err != nil {
		t.Fatal(err)
	}
	st, release, _ := f.Acquire(t.Context())
	written := st.WrittenEnd()
	release()
	// drop the last written page of the newest commitlog file
	lastPage := int((written%(64<<10))-1) / 4096
	crashed := fs.CrashKeeping(func(name string, page int) bool {
		return !(bytes.HasSuffix([]byte(name), []byte(fmt.Sprintf("%020d", written-written%(64<<10)))) && page == lastPage)
	})
	f.Close()
	g := newEntryFSM(t, crashed, newFakeMeta())
	defer g.Close()
	last, _ := g.entries.LastIndex()
	if last >= 60 || last < 40 {
		t.Fatalf("raft log ends at %d after losing the last page, want 40 <= last < 60", last)
	}
	for i := uint64(1); i <= last; i++ {
		var got raft.Log
		if err := g.entries.GetLog(i, &got); err != nil || !bytes.Equal(got.Data, stamped[i-1].Data) {
			t.Fatalf("entry %d after the torn tail: %v", i, err)
		}
	}
	storeEntries(t, g, stamped[last:])
	applyAll(g, stamped)
	if a, b := queueState(ref), queueState(g); a != b {
		t.Fatalf("queues differ:\n%s\n%s", a, b)
	}
}

// TestEntryLogSnapshotInstall: a follower installs a leader's snapshot into a store that is also
// its Raft log: the log store re-reads its map from the restored commitlog (the leader's entries
// up to the snapshot), the log resumes after the snapshot's index, and the entries after it give
// the leader's state.
func TestEntryLogSnapshotInstall(t *testing.T) {
	logs := workload(t, 200)
	ref := newFSM(t, vfs.NewMemFS(), newFakeMeta())
	defer ref.Close()
	stamped := stampLike(t, logs, applyAll(ref, logs))

	srcFS := vfs.NewMemFS()
	src := newEntryFSM(t, srcFS, newFakeMeta())
	defer src.Close()
	storeEntries(t, src, stamped)
	applyAll(src, stamped[:150])
	snap := snapshotBytes(t, src)

	fs := vfs.NewMemFS()
	meta := newFakeMeta()
	dst := newEntryFSM(t, fs, meta)
	defer dst.Close()
	storeEntries(t, dst, stamped[:30]) // behind, with a tail the snapshot replaces
	applyAll(dst, stamped[:20])
	if err := dst.Restore(reader(snap)); err != nil {
		t.Fatal(err)
	}
	if dst.AppliedIndex() != 150 {
		t.Fatalf("applied %d after the install", dst.AppliedIndex())
	}
	if last, _ := dst.entries.LastIndex(); last > 150 {
		t.Fatalf("the restored raft log ends at %d, past the snapshot", last)
	}
	var got raft.Log
	if err := dst.entries.GetLog(150, &got); err != nil || !bytes.Equal(got.Data, stamped[149].Data) {
		t.Fatalf("entry 150 from the restored commitlog: %v", err)
	}
	// Raft resumes the log after the snapshot.
	if err := dst.entries.StoreLogs(stamped[150:]); err != nil {
		t.Fatal(err)
	}
	applyAll(src, stamped[150:])
	applyAll(dst, stamped[150:])
	if a, b := queueState(ref), queueState(dst); a != b {
		t.Fatalf("queues differ:\n%s\n%s", a, b)
	}
	if a, b := queueRecords(t, ref), queueRecords(t, dst); !reflect.DeepEqual(a, b) {
		t.Fatal("queue contents differ after the install")
	}
	src.Close()
	dst.Close()
	sameImage(t, "installed replica", commitlogImage(t, srcFS), commitlogImage(t, fs))
}

// A snapshot says which kind of Raft log store its node ran, and a node of the other kind refuses
// to install it (a group must not mix stores): a commitlog-store node's commitlog holds entry
// headers a raft-wal node's does not. A snapshot that does not say (written before the header
// byte) is installed as before.
func TestSnapshotRefusedAcrossLogStores(t *testing.T) {
	logs := workload(t, 40)
	walSrc := newFSM(t, vfs.NewMemFS(), newFakeMeta())
	defer walSrc.Close()
	stamped := stampLike(t, logs, applyAll(walSrc, logs))
	entrySrc := newEntryFSM(t, vfs.NewMemFS(), newFakeMeta())
	defer entrySrc.Close()
	storeEntries(t, entrySrc, stamped)
	applyAll(entrySrc, stamped)

	walSnap, entrySnap := snapshotBytes(t, walSrc), snapshotBytes(t, entrySrc)
	for _, c := range []struct {
		name    string
		dst     *FSM
		snap    []byte
		refused bool
	}{
		{"wal snapshot on a commitlog-store node", newEntryFSM(t, vfs.NewMemFS(), newFakeMeta()), walSnap, true},
		{"commitlog-store snapshot on a wal node", newFSM(t, vfs.NewMemFS(), newFakeMeta()), entrySnap, true},
		{"wal snapshot on a wal node", newFSM(t, vfs.NewMemFS(), newFakeMeta()), walSnap, false},
		{"commitlog-store snapshot on a commitlog-store node", newEntryFSM(t, vfs.NewMemFS(), newFakeMeta()), entrySnap, false},
		{"an older wal snapshot (kind not recorded) on a wal node", newFSM(t, vfs.NewMemFS(), newFakeMeta()), withoutStoreKind(t, walSnap), false},
	} {
		err := c.dst.Restore(reader(c.snap))
		if refused := err != nil && strings.Contains(err.Error(), "same raft log store"); refused != c.refused {
			t.Errorf("%s: %v, want refused %v", c.name, err, c.refused)
		}
		if !c.refused && c.dst.AppliedIndex() != 40 {
			t.Errorf("%s: applied %d after the install, want 40", c.name, c.dst.AppliedIndex())
		}
		c.dst.Close()
	}
}

// withoutStoreKind rewrites a snapshot's header as written before the store-kind byte existed.
func withoutStoreKind(t *testing.T, snap []byte) []byte {
	t.Helper()
	out := bytes.Clone(snap)
	h, err := decodeHeader(out[:snapHeaderSize])
	if err != nil {
		t.Fatal(err)
	}
	h.Store = 0
	copy(out, h.encode())
	return out
}

// TestEntryLogMessageCounts: the apply's record counts per append, read from each stored entry's
// header, are those of the entry's own Data; other forms have none; an entry not stored is an
// error, not a guess.
func TestEntryLogMessageCounts(t *testing.T) {
	logs := workload(t, 120)
	ref := newFSM(t, vfs.NewMemFS(), newFakeMeta())
	defer ref.Close()
	stamped := stampLike(t, logs, applyAll(ref, logs))
	f := newEntryFSM(t, vfs.NewMemFS(), newFakeMeta())
	defer f.Close()
	storeEntries(t, f, stamped)
	messages := 0
	for _, l := range stamped {
		end, form, counts, err := f.entries.messageCounts(l.Index)
		if err != nil {
			t.Fatalf("entry %d: %v", l.Index, err)
		}
		if wantEnd, wantForm, _ := f.entries.entrySpan(l.Index); end != wantEnd || form != wantForm {
			t.Fatalf("entry %d: end %d form %d, entrySpan says %d %d", l.Index, end, form, wantEnd, wantForm)
		}
		if form != formMessages {
			if counts != nil {
				t.Fatalf("entry %d of form %d has counts %v", l.Index, form, counts)
			}
			continue
		}
		messages++
		appends, err := DecodeMessages(l.Data)
		if err != nil {
			t.Fatal(err)
		}
		if want := recordCounts(appends); !reflect.DeepEqual(counts, want) {
			t.Fatalf("entry %d: counts %v, its Data holds %v", l.Index, counts, want)
		}
	}
	if messages == 0 {
		t.Fatal("the workload stored no message entry")
	}
	last := stamped[len(stamped)-1].Index
	if _, _, _, err := f.entries.messageCounts(last + 1); err == nil {
		t.Fatalf("entry %d, never stored, has counts", last+1)
	}
}

// GetLogHeader answers from an entry's header record what GetLog answers, Data included for an
// entry whose header holds it (opaque: configuration changes, metadata, here one whose header
// record is longer than the first read) and left out, reported, for message entries.
func TestEntryLogHeaderReads(t *testing.T) {
	logs := workload(t, 60)
	ref := newFSM(t, vfs.NewMemFS(), newFakeMeta())
	defer ref.Close()
	stamped := stampLike(t, logs, applyAll(ref, logs))
	big := bytes.Repeat([]byte("c"), 3*headerReadSize)
	stamped = append(stamped, &raft.Log{Index: stamped[len(stamped)-1].Index + 1, Term: 2, Type: raft.LogConfiguration, Data: big, Extensions: []byte("x")})
	f := newEntryFSM(t, vfs.NewMemFS(), newFakeMeta())
	defer f.Close()
	storeEntries(t, f, stamped)
	var opaque, messages int
	for _, l := range stamped {
		var whole, head raft.Log
		if err := f.entries.GetLog(l.Index, &whole); err != nil {
			t.Fatal(err)
		}
		omitted, err := f.entries.GetLogHeader(l.Index, &head)
		if err != nil {
			t.Fatalf("GetLogHeader(%d): %v", l.Index, err)
		}
		if head.Index != whole.Index || head.Term != whole.Term || head.Type != whole.Type ||
			!bytes.Equal(head.Extensions, whole.Extensions) || !head.AppendedAt.Equal(whole.AppendedAt) {
			t.Fatalf("entry %d: header read %+v, whole read %+v", l.Index, head, whole)
		}
		isMessages := len(l.Data) > 0 && l.Data[0] == KindMessages
		switch {
		case isMessages && (!omitted || head.Data != nil):
			t.Fatalf("message entry %d: omitted %v, %d bytes of data", l.Index, omitted, len(head.Data))
		case !isMessages && (omitted || !bytes.Equal(head.Data, whole.Data)):
			t.Fatalf("opaque entry %d: omitted %v, data equal %v", l.Index, omitted, bytes.Equal(head.Data, whole.Data))
		}
		if isMessages {
			messages++
		} else {
			opaque++
		}
	}
	if opaque < 2 || messages == 0 {
		t.Fatalf("workload has %d opaque and %d message entries", opaque, messages)
	}
	var l raft.Log
	if _, err := f.entries.GetLogHeader(stamped[len(stamped)-1].Index+1, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("an entry past the last: %v", err)
	}
}

// TestEntryLogSyncLogsBlocking: SyncLogsBlocking syncs on the calling thread, SyncLogs and
// StoreLogs through Mapping.Sync (the process's io_uring where there is one); each leaves what was
// written durable: a crash right after keeps it.
func TestEntryLogSyncLogsBlocking(t *testing.T) {
	fs := vfs.NewMemFS()
	f := newEntryFSM(t, fs, nil)
	defer f.Close()
	mk := func(idx uint64) *raft.Log {
		r := rec(t, "S", 0, fmt.Sprint("m", idx), 1_700_000_000_000)
		v, _ := message.ParseView(r)
		v.SetQueueOffset(int64(idx - 1))
		return &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: EncodeMessages([][][]byte{{r}})}
	}
	for _, c := range []struct {
		name     string
		store    func(l *raft.Log) error
		blocking bool
	}{
		{"StoreLogs", func(l *raft.Log) error { return f.entries.StoreLogs([]*raft.Log{l}) }, false},
		{"SyncLogs", func(l *raft.Log) error {
			if err := f.entries.StoreLogsUnsynced([]*raft.Log{l}); err != nil {
				return err
			}
			return f.entries.SyncLogs()
		}, false},
		{"SyncLogsBlocking", func(l *raft.Log) error {
			if err := f.entries.StoreLogsUnsynced([]*raft.Log{l}); err != nil {
				return err
			}
			return f.entries.SyncLogsBlocking()
		}, true},
	} {
		last, err := f.entries.LastIndex()
		if err != nil {
			t.Fatal(err)
		}
		blocking, syncs := fs.BlockingSyncs(), fs.Calls(vfs.OpSync)
		if err := c.store(mk(last + 1)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b, s := fs.BlockingSyncs()-blocking, fs.Calls(vfs.OpSync)-syncs
		if s == 0 || (b == s) != c.blocking || (b == 0) == c.blocking {
			t.Fatalf("%s: %d syncs, %d of them blocking; want blocking=%v", c.name, s, b, c.blocking)
		}
		g := newEntryFSM(t, fs.Crash(), nil)
		if got, err := g.entries.LastIndex(); err != nil || got != last+1 {
			t.Fatalf("%s: after a crash the entry log ends at %d (%v), want %d", c.name, got, err, last+1)
		}
		g.Close()
	}
}
