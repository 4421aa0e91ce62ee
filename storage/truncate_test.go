package storage

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"rocketraft/message"
	"rocketraft/storage/vfs"
)

// fileImage returns the current contents of every file under dir (file name -> bytes).
func fileImage(t *testing.T, fs *vfs.MemFS, dir string) map[string][]byte {
	t.Helper()
	names, err := fs.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, n := range names {
		b, err := fs.ReadFile(dir + "/" + n)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = b
	}
	return out
}

func sameImage(t *testing.T, what string, a, b map[string][]byte) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d files vs %d", what, len(a), len(b))
	}
	for n, x := range a {
		if !bytes.Equal(x, b[n]) {
			t.Fatalf("%s: file %s differs", what, n)
		}
	}
}

// batchFor returns the i-th test append: records over three queues, unique keys.
func batchFor(t *testing.T, i int) [][]byte {
	var recs [][]byte
	for j := 0; j < 1+i%3; j++ {
		r := rec(t, "T", int32((i+j)%3), strings.Repeat("x", 700+i*13%500), "tag", fmt.Sprintf("k%d-%d", i, j))
		setStoreTS(r, int64(1_700_000_000_000+i))
		recs = append(recs, r)
	}
	return recs
}

// TestTruncateToReplaysIdentically: cut a store back to a record boundary (several files back),
// append the same batches again, and get the bytes of a store that never went further.
func TestTruncateToReplaysIdentically(t *testing.T) {
	cfg := testConfig(vfs.NewMemFS())
	cfg.FlushDiskType = AsyncFlush
	s := openT(t, cfg)
	var ends []int64
	for i := 0; i < 300; i++ {
		res := appendT(t, s, batchFor(t, i)...)
		last := res[len(res)-1]
		ends = append(ends, last.PhysicalOffset+int64(last.Size))
	}
	want := fileImage(t, cfg.FS.(*vfs.MemFS), "/store/commitlog")
	if len(want) < 3 {
		t.Fatalf("want several commitlog files, got %d", len(want))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cut := 120
	cfg.Truncate, cfg.TruncateTo = true, ends[cut-1]
	s = openT(t, cfg)
	if got := s.CommitLogMaxOffset(); got != ends[cut-1] {
		t.Fatalf("end after truncate %d, want %d", got, ends[cut-1])
	}
	checkInvariants(t, s)
	if recs, _, _ := s.QueryByKey("T", fmt.Sprintf("k%d-0", cut+5), 10, 0, 1<<62); len(recs) != 0 {
		t.Fatalf("index still finds a truncated record")
	}
	if recs, _, _ := s.QueryByKey("T", fmt.Sprintf("k%d-0", cut-5), 10, 0, 1<<62); len(recs) != 1 {
		t.Fatalf("index lost a kept record: %d", len(recs))
	}
	for i := cut; i < 300; i++ {
		appendT(t, s, batchFor(t, i)...)
	}
	checkInvariants(t, s)
	sameImage(t, "commitlog after truncate+replay", want, fileImage(t, cfg.FS.(*vfs.MemFS), "/store/commitlog"))
	s.Close()
}

func TestTruncateToErrors(t *testing.T) {
	cfg := testConfig(vfs.NewMemFS())
	s := openT(t, cfg)
	res := appendT(t, s, batchFor(t, 0)...)
	appendT(t, s, batchFor(t, 1)...)
	end := s.CommitLogMaxOffset()
	s.Close()
	for _, c := range []struct {
		to   int64
		want error
	}{
		{end + 1, ErrTruncateBeyondEnd},
		{res[0].PhysicalOffset + 5, ErrTruncateInvalid},
		{-1, ErrTruncateInvalid},
	} {
		cfg.Truncate, cfg.TruncateTo = true, c.to
		if _, err := Open(cfg); !errors.Is(err, c.want) {
			t.Fatalf("truncate to %d: got %v, want %v", c.to, err, c.want)
		}
	}
	cfg.TruncateTo = end // a no-op
	s = openT(t, cfg)
	if s.CommitLogMaxOffset() != end {
		t.Fatal("no-op truncate moved the end")
	}
	s.Close()
}

// TestTruncateAfterCrashBeyondDurable: after a power loss the commitlog is shorter than an
// unsynced marker said; Open must refuse rather than guess.
func TestTruncateAfterCrashBeyondDurable(t *testing.T) {
	fs := vfs.NewMemFS()
	cfg := testConfig(fs)
	cfg.FlushDiskType = AsyncFlush
	cfg.FlushIntervalCommitLog = time.Hour
	cfg.FlushIntervalConsumeQueue = time.Hour
	s := openT(t, cfg)
	for i := 0; i < 10; i++ {
		appendT(t, s, batchFor(t, i)...)
	}
	end := s.CommitLogMaxOffset()
	cfg.FS = fs.Crash()
	cfg.Truncate, cfg.TruncateTo = true, end
	if _, err := Open(cfg); !errors.Is(err, ErrTruncateBeyondEnd) {
		t.Fatalf("got %v, want ErrTruncateBeyondEnd", err)
	}
}

// TestSnapshotInstall: a manifest copied file by file into an installer gives a store with the
// same commitlog bytes and queue maxima (including a deleted topic's restarted queue, which a
// rebuild from the commitlog alone would get wrong), whose next appends match the source's.
func TestSnapshotInstall(t *testing.T) {
	srcFS := vfs.NewMemFS()
	cfg := testConfig(srcFS)
	cfg.FlushDiskType = AsyncFlush
	src := openT(t, cfg)
	for i := 0; i < 100; i++ {
		appendT(t, src, batchFor(t, i)...)
	}
	if err := src.DeleteTopic("T"); err != nil {
		t.Fatal(err)
	}
	for i := 100; i < 150; i++ {
		appendT(t, src, batchFor(t, i)...)
	}
	man, err := src.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	dstFS := vfs.NewMemFS()
	dcfg := testConfig(dstFS)
	dcfg.FlushDiskType = AsyncFlush
	dcfg.StorePathRootDir = "/stage"
	in, err := NewInstaller(dcfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range man.Files {
		var buf bytes.Buffer
		if err := src.CopyFile(&buf, f); err != nil {
			t.Fatal(err)
		}
		if err := in.WriteFile(SnapshotFile{Path: f.Path, Size: f.Size, Len: f.Len}, &buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := in.Finish(man.CommitLogMin, man.CommitLogEnd); err != nil {
		t.Fatal(err)
	}
	if err := dstFS.Rename("/stage", "/store"); err != nil {
		t.Fatal(err)
	}
	dcfg.StorePathRootDir = "/store"
	dst := openT(t, dcfg)
	checkQueues(t, dst)
	for _, qid := range []int32{0, 1, 2} {
		if a, b := src.MaxOffset("T", qid), dst.MaxOffset("T", qid); a != b {
			t.Fatalf("queue %d: max %d vs %d", qid, a, b)
		}
	}
	if recs, _, _ := dst.QueryByKey("T", "k3-0", 10, 0, 1<<62); len(recs) != 1 {
		t.Fatalf("index not rebuilt: %d", len(recs))
	}
	for i := 150; i < 200; i++ {
		a := appendT(t, src, batchFor(t, i)...)
		b := appendT(t, dst, batchFor(t, i)...)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("append %d: %v vs %v", i, a, b)
		}
	}
	sameImage(t, "commitlog", fileImage(t, srcFS, "/store/commitlog"), fileImage(t, dstFS, "/store/commitlog"))
	src.Close()
	dst.Close()
}

func TestInstallerRejectsBadPaths(t *testing.T) {
	cfg := testConfig(vfs.NewMemFS())
	cfg.StorePathRootDir = "/stage"
	in, err := NewInstaller(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"commitlog/../../etc", "consumequeue/../x/0/00000000000000000000", "consumequeue/T/-1/00000000000000000000", "index/1", "commitlog/123"} {
		if err := in.WriteFile(SnapshotFile{Path: p, Size: cfg.MappedFileSizeCommitLog}, bytes.NewReader(nil)); err == nil {
			t.Fatalf("%q accepted", p)
		}
	}
	if err := in.WriteFile(SnapshotFile{Path: "commitlog/00000000000000000000", Size: 4096}, bytes.NewReader(nil)); err == nil {
		t.Fatal("wrong file size accepted")
	}
}

// setStoreTS stamps a record's STORETIMESTAMP, as a Raft leader does.
func setStoreTS(r []byte, ts int64) {
	v, err := message.ParseView(r)
	if err != nil {
		panic(err)
	}
	v.SetStoreTimestamp(ts)
}

// TestTruncateBeforeRoll: a truncation point where the data ends right before a segment roll
// (a blank marker starts there, the next record began the next file) is valid: the store cuts
// there and replaying the same appends gives the same bytes. The Raft state machine truncates
// to the end of its last durable entry, which is such a point whenever the next entry rolled.
func TestTruncateBeforeRoll(t *testing.T) {
	cfg := testConfig(vfs.NewMemFS())
	cfg.FlushDiskType = AsyncFlush
	s := openT(t, cfg)
	var ends, starts []int64
	for i := 0; i < 300; i++ {
		res := appendT(t, s, batchFor(t, i)...)
		starts = append(starts, res[0].PhysicalOffset)
		last := res[len(res)-1]
		ends = append(ends, last.PhysicalOffset+int64(last.Size))
	}
	want := fileImage(t, cfg.FS.(*vfs.MemFS), "/store/commitlog")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cut := -1
	for i := 100; i+1 < len(starts); i++ {
		if starts[i+1] != ends[i] { // batch i+1 began in the next file
			cut = i + 1
			break
		}
	}
	if cut < 0 {
		t.Fatal("no roll between batches: the test needs smaller files")
	}
	cfg.Truncate, cfg.TruncateTo = true, ends[cut-1]
	s = openT(t, cfg)
	if got := s.CommitLogMaxOffset(); got != ends[cut-1] {
		t.Fatalf("end after truncating before a roll: %d, want %d", got, ends[cut-1])
	}
	for i := cut; i < 300; i++ {
		appendT(t, s, batchFor(t, i)...)
	}
	checkInvariants(t, s)
	sameImage(t, "commitlog after truncating before a roll and replaying", want, fileImage(t, cfg.FS.(*vfs.MemFS), "/store/commitlog"))
	s.Close()
}
