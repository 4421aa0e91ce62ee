package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"rocketraft/storage"
	"rocketraft/storage/vfs"
)

// TestReplicasIdentical: two FSMs fed the same entries end with byte-identical commitlogs,
// identical results, queue offsets and metadata.
func TestReplicasIdentical(t *testing.T) {
	logs := workload(t, 200)
	fa, fb := vfs.NewMemFS(), vfs.NewMemFS()
	ma, mb := newFakeMeta(), newFakeMeta()
	a, b := newFSM(t, fa, ma), newFSM(t, fb, mb)
	defer a.Close()
	defer b.Close()
	ra, rb := applyAll(a, logs), applyAll(b, logs)
	if !reflect.DeepEqual(ra, rb) {
		t.Fatal("apply results differ")
	}
	for i, r := range ra {
		if res, ok := r.(*ApplyResult); ok {
			for j, o := range res.Appends {
				if o.Err != nil || len(o.Results) == 0 {
					t.Fatalf("entry %d append %d: %+v", i+1, j, o)
				}
			}
		}
	}
	sameImage(t, "replicas", commitlogImage(t, fa), commitlogImage(t, fb))
	if len(commitlogImage(t, fa)) < 3 {
		t.Fatal("workload should span several commitlog files")
	}
	if qa, qb := queueState(a), queueState(b); qa != qb || qa == "" {
		t.Fatalf("queues differ:\n%s\n%s", qa, qb)
	}
	if ma.dump() != mb.dump() {
		t.Fatal("metadata differs")
	}
	if a.AppliedIndex() != 200 {
		t.Fatalf("applied index %d", a.AppliedIndex())
	}
}

// TestDeterministicResults: results carry the offsets assigned in log order.
func TestDeterministicResults(t *testing.T) {
	f := newFSM(t, vfs.NewMemFS(), nil)
	defer f.Close()
	r1 := rec(t, "A", 0, "one", 1_700_000_000_001)
	r2 := rec(t, "A", 0, "two", 1_700_000_000_002)
	res := f.Apply(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: EncodeMessages([][][]byte{{r1}, {r2, r1}})}).(*ApplyResult)
	if len(res.Appends) != 2 || len(res.Appends[1].Results) != 2 {
		t.Fatalf("%+v", res)
	}
	got := []int64{res.Appends[0].Results[0].QueueOffset, res.Appends[1].Results[0].QueueOffset, res.Appends[1].Results[1].QueueOffset}
	if fmt.Sprint(got) != "[0 1 2]" {
		t.Fatalf("queue offsets %v", got)
	}
	if p := res.Appends[1].Results[0]; p.PhysicalOffset != int64(len(r1)) || p.StoreTimestamp != 1_700_000_000_002 {
		t.Fatalf("second append %+v", p)
	}
	// an append without store time is refused identically everywhere, the others go on
	bad := rec(t, "A", 0, "x", 1)
	v := bad[56:64] // STORETIMESTAMP for IPv4 hosts
	clear(v)
	res = f.Apply(&raft.Log{Index: 2, Term: 1, Type: raft.LogCommand, Data: EncodeMessages([][][]byte{{bad}, {r1}})}).(*ApplyResult)
	if !errors.Is(res.Appends[0].Err, storage.ErrMessageIllegal) || res.Appends[1].Err != nil || res.Appends[1].Results[0].QueueOffset != 3 {
		t.Fatalf("%+v", res)
	}
	// empty appends, empty and garbage records: refused per append, never a panic
	res = f.Apply(&raft.Log{Index: 3, Term: 1, Type: raft.LogCommand, Data: EncodeMessages([][][]byte{{}, {{}}, {[]byte("garbage")}, {r2}})}).(*ApplyResult)
	for i := 0; i < 3; i++ {
		if !errors.Is(res.Appends[i].Err, storage.ErrMessageIllegal) {
			t.Fatalf("append %d: %+v", i, res.Appends[i])
		}
	}
	if res.Appends[3].Err != nil || res.Appends[3].Results[0].QueueOffset != 4 || f.AppliedIndex() != 3 {
		t.Fatalf("%+v", res)
	}
	// refusals by the store (a body over maxMessageSize) and by Apply (no store time) between
	// stored appends: each outcome stays with its append
	big := rec(t, "A", 0, strings.Repeat("b", 20<<10), 1_700_000_000_003)
	res = f.Apply(&raft.Log{Index: 4, Term: 1, Type: raft.LogCommand, Data: EncodeMessages([][][]byte{{r1}, {big}, {bad}, {r2}})}).(*ApplyResult)
	if res.Appends[0].Err != nil || res.Appends[0].Results[0].QueueOffset != 5 ||
		!errors.Is(res.Appends[1].Err, storage.ErrMessageIllegal) || !strings.Contains(res.Appends[1].Err.Error(), "maxMessageSize") ||
		!errors.Is(res.Appends[2].Err, storage.ErrMessageIllegal) || !strings.Contains(res.Appends[2].Err.Error(), "STORETIMESTAMP") ||
		res.Appends[3].Err != nil || res.Appends[3].Results[0].QueueOffset != 6 {
		t.Fatalf("%+v", res)
	}
}

// TestReplayAfterKill: the process dies with the commitlog ahead of the marker (the marker write
// of the last entries lost, the store's writes all in the page cache); at restart the store is
// truncated to the marker and Raft's replay (from index 1: no snapshot) writes the same bytes:
// nothing duplicated, nothing lost, metadata applied exactly once.
func TestReplayAfterKill(t *testing.T) {
	logs := workload(t, 160)
	refFS := vfs.NewMemFS()
	refMeta := newFakeMeta()
	ref := newFSM(t, refFS, refMeta)
	applyAll(ref, logs)
	defer ref.Close()

	// Entry 80 deletes a topic, which makes the marker durable first: the marker can never go
	// back past it, so crashes before it stop before it.
	for _, c := range []struct{ cut, crashAt int }{{0, 79}, {1, 60}, {37, 79}, {80, 160}, {81, 120}, {159, 160}} {
		cut := c.cut
		t.Run(fmt.Sprint(c.cut, "-", c.crashAt), func(t *testing.T) {
			fs := vfs.NewMemFS()
			f := newFSM(t, fs, newFakeMeta())
			applyAll(f, logs[:cut])
			if err := f.syncApplied(nil, applied{}); err != nil {
				t.Fatal(err)
			}
			old, err := fs.ReadFile(root + "/" + markerName)
			if err != nil {
				t.Fatal(err)
			}
			applyAll(f, logs[cut:c.crashAt])
			// kill -9: every write survives (page cache), except that the marker is put back
			// to what it was after entry cut.
			crashed := fs.CrashKeeping(func(string, int) bool { return true })
			if err := crashed.WriteFile(root+"/"+markerName, old); err != nil {
				t.Fatal(err)
			}
			f.Close() // releases the old FS only

			meta := newFakeMeta()
			g := newFSM(t, crashed, meta)
			defer g.Close()
			if g.AppliedIndex() != uint64(cut) {
				t.Fatalf("applied index after restart %d, want %d", g.AppliedIndex(), cut)
			}
			for i, r := range applyAll(g, logs) {
				if i < cut && r != nil {
					if _, isMeta := r.(*MetaResult); !isMeta {
						t.Fatalf("entry %d re-applied to the store: %v", i+1, r)
					}
				}
			}
			sameImage(t, "after replay", commitlogImage(t, refFS), commitlogImage(t, crashed))
			if a, b := queueState(ref), queueState(g); a != b {
				t.Fatalf("queues differ:\n%s\n%s", a, b)
			}
			if refMeta.dump() != meta.dump() {
				t.Fatalf("metadata differs:\n%s\n%s", refMeta.dump(), meta.dump())
			}
		})
	}
}

// TestCleanRestartSkipsEverything: after Close and New, replayed entries are all skipped.
func TestCleanRestartSkipsEverything(t *testing.T) {
	logs := workload(t, 60)
	fs := vfs.NewMemFS()
	f := newFSM(t, fs, nil)
	applyAll(f, logs)
	img := commitlogImage(t, fs)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g := newFSM(t, fs, nil)
	defer g.Close()
	if g.AppliedIndex() != 60 {
		t.Fatalf("applied %d", g.AppliedIndex())
	}
	for i, r := range applyAll(g, logs) {
		if _, ok := r.(*MetaResult); r != nil && !ok {
			t.Fatalf("entry %d applied again: %v", i+1, r)
		}
	}
	sameImage(t, "restart", img, commitlogImage(t, fs))
}

// TestStoreBehindMarkerRestartsFromFloor: the marker on disk names commitlog bytes the disk no
// longer holds (it lost synced data; the marker is only ever written after what it names is
// durable, so nothing else can do this). The node restarts from the marker's floor, the state
// the last snapshot made durable, and Raft's replay brings it back to the same bytes as a
// replica that never crashed. If even the floor is beyond the store, it refuses to start and
// says to rebuild it from its group.
func TestStoreBehindMarkerRestartsFromFloor(t *testing.T) {
	logs := workload(t, 40)
	refFS := vfs.NewMemFS()
	ref := newFSM(t, refFS, nil)
	applyAll(ref, logs)
	defer ref.Close()

	for _, floorToo := range []bool{false, true} {
		t.Run(fmt.Sprint("floorBeyondStore=", floorToo), func(t *testing.T) {
			fs := vfs.NewMemFS()
			f := newFSM(t, fs, nil)
			applyAll(f, logs[:20])
			f.mu.Lock()
			floor := f.cur
			f.mu.Unlock()
			if err := f.syncApplied(nil, floor); err != nil { // what a snapshot's Persist does
				t.Fatal(err)
			}
			applyAll(f, logs[20:30])
			if err := f.syncApplied(nil, applied{}); err != nil {
				t.Fatal(err)
			}
			m, _ := f.mk.state()
			m.Cur.Index, m.Cur.End = m.Cur.Index+5, m.Cur.End+4096
			if floorToo {
				m.Floor.Index, m.Floor.End = m.Floor.Index+100, m.Cur.End+8192
			}
			if err := f.mk.writeSync(m); err != nil {
				t.Fatal(err)
			}
			crashed := fs.Crash()
			f.Close()
			g, err := New(Config{Store: storeConfig(crashed)})
			if floorToo {
				if !errors.Is(err, ErrStoreBehindMarker) {
					t.Fatalf("got %v, want ErrStoreBehindMarker", err)
				}
				t.Log(err)
				return
			}
			if err != nil {
				t.Fatalf("restart from the floor: %v", err)
			}
			defer g.Close()
			if g.AppliedIndex() != floor.Index {
				t.Fatalf("applied index after restart %d, want the floor's %d", g.AppliedIndex(), floor.Index)
			}
			applyAll(g, logs)
			sameImage(t, "restarted from the floor", commitlogImage(t, refFS), commitlogImage(t, crashed))
			if a, b := queueState(ref), queueState(g); a != b {
				t.Fatalf("queues differ:\n%s\n%s", a, b)
			}
			i1, d1, _ := ref.Digest()
			i2, d2, ok := g.Digest()
			if i1 != i2 || d1 != d2 || !ok {
				t.Fatalf("digest after replay (%d, %016x, known %v), want (%d, %016x)", i2, d2, ok, i1, d1)
			}
		})
	}
}

// TestPowerLossBothLost: neither the marker nor the commitlog was synced: both go back to the
// last synced state together and replay restores the rest.
func TestPowerLossBothLost(t *testing.T) {
	logs := workload(t, 30)
	refFS := vfs.NewMemFS()
	ref := newFSM(t, refFS, nil)
	applyAll(ref, logs)
	defer ref.Close()
	fs := vfs.NewMemFS()
	f := newFSM(t, fs, nil)
	applyAll(f, logs)
	crashed := fs.Crash()
	f.Close()
	g := newFSM(t, crashed, nil)
	defer g.Close()
	applyAll(g, logs)
	sameImage(t, "power loss", commitlogImage(t, refFS), commitlogImage(t, crashed))
}

func TestNoMarkerWithData(t *testing.T) {
	fs := vfs.NewMemFS()
	st, err := storage.Open(storeConfig(fs))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(t.Context(), [][]byte{rec(t, "A", 0, "x", 5)}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := New(Config{Store: storeConfig(fs)}); !errors.Is(err, ErrNoMarker) {
		t.Fatalf("got %v", err)
	}
}

// TestUndecodablePanics: an entry the FSM cannot decode stops it; it is never skipped.
func TestUndecodablePanics(t *testing.T) {
	f := newFSM(t, vfs.NewMemFS(), newFakeMeta())
	defer f.Close()
	good := EncodeMessages([][][]byte{{rec(t, "A", 0, "x", 5)}})
	corrupt := append([]byte(nil), good...)
	corrupt[10] ^= 1
	for name, data := range map[string][]byte{
		"empty":         {},
		"unknown kind":  {9, 1, 2, 3},
		"bad crc":       corrupt,
		"truncated":     good[:len(good)-5],
		"bad json":      {KindMetadata, '{'},
		"unknown op":    append([]byte{KindMetadata}, `{"op":"dropAll","now":1}`...),
		"unknown field": append([]byte{KindMetadata}, `{"op":"deleteGroup","name":"g","now":1,"x":1}`...),
		"no time":       append([]byte{KindMetadata}, `{"op":"deleteGroup","name":"g"}`...),
	} {
		mustPanic(t, name, func() { f.Apply(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: data}) })
	}
	if f.AppliedIndex() != 0 {
		t.Fatal("a bad entry advanced the applied index")
	}
	// non-command entries are not the FSM's
	if r := f.Apply(&raft.Log{Index: 1, Type: raft.LogNoop}); r != nil {
		t.Fatal(r)
	}
}

// TestSnapshotRestore: a snapshot of one FSM restored into an empty one (and into a stale one)
// gives the same commitlog bytes, queue offsets, metadata and applied index, and then both
// apply the rest identically.
func TestSnapshotRestore(t *testing.T) {
	logs := workload(t, 240)
	srcFS := vfs.NewMemFS()
	srcMeta := newFakeMeta()
	src := newFSM(t, srcFS, srcMeta)
	defer src.Close()
	applyAll(src, logs[:150])
	snap := snapshotBytes(t, src)

	for _, stale := range []int{0, 40} {
		t.Run(fmt.Sprint("stale", stale), func(t *testing.T) {
			fs := vfs.NewMemFS()
			meta := newFakeMeta()
			dst := newFSM(t, fs, meta)
			defer dst.Close()
			applyAll(dst, logs[:stale])
			if err := dst.Restore(reader(snap)); err != nil {
				t.Fatal(err)
			}
			if dst.AppliedIndex() != 150 {
				t.Fatalf("applied %d", dst.AppliedIndex())
			}
			// Raft replays entries after the snapshot on both.
			for _, l := range logs[150:] {
				a, b := src.Apply(l), dst.Apply(l)
				if stale == 0 && !reflect.DeepEqual(a, b) {
					t.Fatalf("entry %d: results differ", l.Index)
				}
			}
			sameImage(t, "restored", commitlogImage(t, srcFS), commitlogImage(t, fs))
			if a, b := queueState(src), queueState(dst); a != b {
				t.Fatalf("queues differ:\n%s\n%s", a, b)
			}
			if srcMeta.dump() != meta.dump() {
				t.Fatal("metadata differs")
			}
			// and src rolls back for the next subtest
			if stale == 0 {
				src.Close()
				srcFS2 := vfs.NewMemFS()
				src2 := newFSM(t, srcFS2, newFakeMeta())
				applyAll(src2, logs[:150])
				src, srcFS, srcMeta = src2, srcFS2, src2.cfg.Meta.(*fakeMeta)
			}
		})
	}
}

// TestRestoreOwnSnapshotAtStart: Raft restores its latest snapshot at every start; when the
// store is already past it, only the metadata is restored and the store is kept.
func TestRestoreOwnSnapshotAtStart(t *testing.T) {
	logs := workload(t, 120)
	fs := vfs.NewMemFS()
	f := newFSM(t, fs, newFakeMeta())
	applyAll(f, logs[:70])
	snap := snapshotBytes(t, f)
	applyAll(f, logs[70:])
	want := f.cfg.Meta.(*fakeMeta).dump()
	img := commitlogImage(t, fs)
	f.Close()

	meta := newFakeMeta()
	g := newFSM(t, fs, meta)
	defer g.Close()
	if err := g.Restore(reader(snap)); err != nil {
		t.Fatal(err)
	}
	if g.AppliedIndex() != 120 {
		t.Fatalf("store replaced: applied %d", g.AppliedIndex())
	}
	applyAll(g, logs[70:]) // Raft replays after the snapshot
	sameImage(t, "kept", img, commitlogImage(t, fs))
	if meta.dump() != want {
		t.Fatalf("metadata:\n%s\nwant\n%s", meta.dump(), want)
	}
}

// TestRestoreRejectsCorruptStream: a damaged stream fails and leaves the store in place.
func TestRestoreRejectsCorruptStream(t *testing.T) {
	logs := workload(t, 50)
	src := newFSM(t, vfs.NewMemFS(), nil)
	defer src.Close()
	applyAll(src, logs)
	snap := snapshotBytes(t, src)
	fs := vfs.NewMemFS()
	dst := newFSM(t, fs, nil)
	defer dst.Close()
	applyAll(dst, logs[:10])
	for _, mut := range []func([]byte) []byte{
		func(b []byte) []byte { return b[:len(b)/2] },
		func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b },
		func(b []byte) []byte { b[3] ^= 1; return b },
	} {
		bad := mut(append([]byte(nil), snap...))
		if err := dst.Restore(reader(bad)); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("got %v", err)
		}
		if dst.AppliedIndex() != 10 || queueState(dst) == "" || strings.HasPrefix(queueState(dst), "acquire:") {
			t.Fatal("failed restore changed the store")
		}
	}
	applyAll(dst, logs[10:])
	if dst.AppliedIndex() != 50 {
		t.Fatal("store unusable after failed restores")
	}
}

// TestInterruptedRestoreSwap: a crash between moving the old root away and moving the staged
// store in is finished by New.
func TestInterruptedRestoreSwap(t *testing.T) {
	logs := workload(t, 40)
	src := newFSM(t, vfs.NewMemFS(), nil)
	defer src.Close()
	applyAll(src, logs)
	snap := snapshotBytes(t, src)
	fs := vfs.NewMemFS()
	// Stage as Restore does, then crash after the first rename.
	g := newFSM(t, fs, nil)
	br := reader(snap)
	hb := make([]byte, snapHeaderSize)
	br.Read(hb)
	hdr, err := decodeHeader(hb)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := readMeta(br, int(hdr.MetaFiles))
	if err != nil {
		t.Fatal(err)
	}
	_, dig, err := splitDigestFile(meta, hdr.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.stage(br, hdr, dig); err != nil {
		t.Fatal(err)
	}
	g.closeStore()
	if err := fs.Rename(root, g.replaced); err != nil {
		t.Fatal(err)
	}
	h := newFSM(t, fs, nil)
	defer h.Close()
	if h.AppliedIndex() != 40 {
		t.Fatalf("applied %d after finishing the swap", h.AppliedIndex())
	}
	if _, err := fs.Stat(h.replaced); err == nil {
		t.Fatal("replaced store left behind")
	}
}

// TestExpandWhileApplying: a persisted snapshot is expanded (streamed from the store) while Apply
// goes on (run with -race); the stream restores to exactly the state at Snapshot time.
func TestExpandWhileApplying(t *testing.T) {
	logs := workload(t, 300)
	fs := vfs.NewMemFS()
	f := newFSM(t, fs, newFakeMeta())
	defer f.Close()
	applyAll(f, logs[:100])
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		applyAll(f, logs[100:149]) // 150 deletes a topic: see TestExpandFailsOnTopicDeletion
	}()
	full := expand(t, f, sink.Bytes())
	<-done

	ref := newFSM(t, vfs.NewMemFS(), nil)
	defer ref.Close()
	applyAll(ref, logs[:100])
	refSnap := snapshotBytes(t, ref)
	// same store files, same order: only the metadata frame differs (nil Meta)
	g := newFSM(t, vfs.NewMemFS(), nil)
	defer g.Close()
	if err := g.Restore(reader(full)); err != nil {
		t.Fatal(err)
	}
	h := newFSM(t, vfs.NewMemFS(), nil)
	defer h.Close()
	if err := h.Restore(reader(refSnap)); err != nil {
		t.Fatal(err)
	}
	if g.AppliedIndex() != 100 || queueState(g) != queueState(h) {
		t.Fatalf("restored %d: %s vs %s", g.AppliedIndex(), queueState(g), queueState(h))
	}
	applyAll(g, logs[100:149])
	if queueState(g) != queueState(f) {
		t.Fatal("queues differ after catching up")
	}
}

// TestExpandFailsOnTopicDeletion: a topic deleted after the snapshot takes its queues out of the
// store (and a send to it afterwards starts a queue file at the same offset with other units), so
// the snapshot can no longer be expanded: that fails cleanly, and Raft's next snapshot will do.
// Persist itself reads each file's first bytes, so a deletion between Snapshot and Persist makes
// Persist fail (the sink is cancelled; Raft retries at its next interval).
func TestExpandFailsOnTopicDeletion(t *testing.T) {
	logs := workload(t, 300) // entry 150 deletes topic B
	f := newFSM(t, vfs.NewMemFS(), nil)
	defer f.Close()
	applyAll(f, logs[:149])
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil || !sink.closed {
		t.Fatalf("persist: %v, closed %v", err, sink.closed)
	}
	if snap, err = f.Snapshot(); err != nil {
		t.Fatal(err)
	}
	applyAll(f, logs[149:160])
	_, _, err = f.ExpandSnapshot(reader(sink.Bytes()), int64(sink.Len()))
	if err == nil || !strings.Contains(err.Error(), "consumequeue/B/") {
		t.Fatalf("expanding a snapshot whose topic was deleted since: %v", err)
	}
	var late memSink
	if err := snap.Persist(&late); err == nil || !strings.Contains(err.Error(), "consumequeue/B/") || !late.cancelled || late.closed {
		t.Fatalf("persist after the deletion: %v, cancelled %v", err, late.cancelled)
	}
	// Nothing holds the store: a restore can still swap it.
	if err := f.Restore(reader(snapshotBytes(t, f))); err != nil {
		t.Fatal(err)
	}
}

// TestReferenceSnapshot: Persist writes names and lengths, not data, and makes the store durable
// first; the stored snapshot restores metadata into the store it came from (Raft's restore at
// start), refuses to rebuild a store that lost its data, and passes a full stream through.
func TestReferenceSnapshot(t *testing.T) {
	logs := workload(t, 300)
	fs := vfs.NewMemFS()
	f := newFSM(t, fs, newFakeMeta())
	applyAll(f, logs[:120])
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	stored := sink.Bytes()
	full := expand(t, f, stored)
	if len(stored) > 4096 || len(full) < 50*len(stored) {
		t.Fatalf("stored snapshot %d bytes, expanded %d: the data was written out", len(stored), len(full))
	}
	if again := expand(t, f, full); !bytes.Equal(again, full) {
		t.Fatal("a full stream did not pass through unchanged")
	}
	// Persist synced the store and the marker: a power loss (only synced bytes survive) after
	// more applies keeps what it names.
	applyAll(f, logs[120:140])
	crashed := fs.Crash()
	f.Close()
	f = newFSM(t, crashed, newFakeMeta())
	defer f.Close()
	if f.AppliedIndex() < 120 {
		t.Fatalf("after a crash the store is at %d, behind the snapshot at 120", f.AppliedIndex())
	}
	if err := f.Restore(reader(stored)); err != nil {
		t.Fatalf("restore of the reference into its own store: %v", err)
	}
	if !bytes.Equal(expand(t, f, stored), full) {
		t.Fatal("expanded differently after the restart")
	}
	empty := newFSM(t, vfs.NewMemFS(), nil)
	defer empty.Close()
	if err := empty.Restore(reader(stored)); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("restore of a reference into an empty store: %v, want ErrBadSnapshot", err)
	}
	if _, _, err := empty.ExpandSnapshot(reader(stored), int64(len(stored))); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("expanding a reference on a store behind it: %v, want ErrBadSnapshot", err)
	}
	if err := empty.Restore(reader(full)); err != nil {
		t.Fatal(err)
	}
}
