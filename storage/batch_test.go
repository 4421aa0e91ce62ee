package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"rocketraft/message"
	"rocketraft/storage/vfs"
)

// entryAppends is a Raft entry's worth of appends: 40 sends over three queues, some of two
// records, bodies of 300-2,000 bytes, so that a batch crosses the 64 KiB test files.
func entryAppends(t *testing.T, round int) [][][]byte {
	var out [][][]byte
	for i := 0; i < 40; i++ {
		n := 1 + i%2
		var recs [][]byte
		for j := 0; j < n; j++ {
			r := rec(t, "B", int32((i+j)%3), strings.Repeat("b", 300+(round*40+i)*37%1700), "tag", fmt.Sprintf("k%d-%d-%d", round, i, j))
			setStoreTS(r, int64(1_700_000_000_000+round))
			recs = append(recs, r)
		}
		out = append(out, recs)
	}
	return out
}

// A batch stores exactly what the same appends made one at a time store: the same results and
// byte-identical commitlog, consume-queue and index files, across file rolls, whether the bytes
// reached the files through WriteAt (replicated appends, one by one or batched) or through the
// mapping (small classic appends with ASYNC_FLUSH).
func TestAppendReplicatedBatchSameAsOneByOne(t *testing.T) {
	fsOne, fsBatch, fsMapped := vfs.NewMemFS(), vfs.NewMemFS(), vfs.NewMemFS()
	cfg := func(fs vfs.FS) Config {
		c := testConfig(fs)
		c.Now = func() time.Time { return time.UnixMilli(1_700_000_100_000) } // same index file names
		return c
	}
	mappedCfg := cfg(fsMapped)
	mappedCfg.FlushDiskType = AsyncFlush
	one, batch, mapped := openT(t, cfg(fsOne)), openT(t, cfg(fsBatch)), openT(t, mappedCfg)
	big := 0 // classic appends of writeThroughMin bytes or more: through the file even so
	for round := 0; round < 6; round++ {
		appends := entryAppends(t, round)
		out, err := batch.AppendReplicatedBatch(appends)
		if err != nil {
			t.Fatalf("round %d: batch: %v", round, err)
		}
		for i, recs := range appends {
			res, err := one.AppendReplicated(recs)
			if err != nil || out[i].Err != nil {
				t.Fatalf("round %d append %d: one by one %v, batch %v", round, i, err, out[i].Err)
			}
			if fmt.Sprint(res) != fmt.Sprint(out[i].Results) {
				t.Fatalf("round %d append %d: one by one %v, batch %v", round, i, res, out[i].Results)
			}
			size := 0
			for _, r := range recs {
				size += len(r)
			}
			if size >= writeThroughMin {
				big++
			}
			if res, err := mapped.Append(context.Background(), recs); err != nil || fmt.Sprint(res) != fmt.Sprint(out[i].Results) {
				t.Fatalf("round %d append %d: classic %v %v, batch %v", round, i, res, err, out[i].Results)
			}
		}
	}
	if one.CommitLogMaxOffset() != batch.CommitLogMaxOffset() || batch.CommitLogMaxOffset() < 5*testConfig(fsOne).MappedFileSizeCommitLog {
		t.Fatalf("ends %d vs %d: want equal and past five files", one.CommitLogMaxOffset(), batch.CommitLogMaxOffset())
	}
	if fsBatch.Calls(vfs.OpWriteAt) == 0 || fsOne.Calls(vfs.OpWriteAt) == 0 {
		t.Fatal("replicated appends did not go through WriteAt")
	}
	if n := fsMapped.Calls(vfs.OpWriteAt); n != big || big > 120 {
		t.Fatalf("ASYNC_FLUSH appends went through WriteAt %d times, want only the %d big ones of 240", n, big)
	}
	checkInvariants(t, batch)
	one.Close()
	batch.Close()
	mapped.Close()
	for _, dir := range []string{"/store/commitlog", "/store/consumequeue/B/0", "/store/consumequeue/B/2", "/store/index"} {
		sameImage(t, dir, fileImage(t, fsOne, dir), fileImage(t, fsBatch, dir))
		sameImage(t, dir+" (mapped)", fileImage(t, fsOne, dir), fileImage(t, fsMapped, dir))
	}
}

// An illegal append is refused alone; the others around it are stored with dense queue offsets.
func TestAppendReplicatedBatchRefusesIllegalAlone(t *testing.T) {
	s := openT(t, testConfig(vfs.NewMemFS()))
	defer s.Close()
	good := func(body string) [][]byte { return [][]byte{rec(t, "I", 0, body, "", "")} }
	tooBig := [][]byte{rec(t, "I", 0, strings.Repeat("x", 20<<10), "", "")} // over MaxMessageSize
	out, err := s.AppendReplicatedBatch([][][]byte{good("a"), tooBig, {}, good("b")})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(out[1].Err, ErrMessageIllegal) || !errors.Is(out[2].Err, ErrMessageIllegal) || out[1].Results != nil {
		t.Fatalf("illegal appends: %+v / %+v", out[1], out[2])
	}
	if out[0].Err != nil || out[3].Err != nil || out[0].Results[0].QueueOffset != 0 || out[3].Results[0].QueueOffset != 1 {
		t.Fatalf("legal appends: %+v / %+v", out[0], out[3])
	}
	for i, body := range []string{"a", "b"} {
		r := s.GetMessages("I", 0, int64(i), 1, 0, nil)
		if r.Status != Found {
			t.Fatalf("offset %d: %v", i, r.Status)
		}
		v, _ := message.ParseView(r.Records[0])
		if string(v.Body()) != body {
			t.Fatalf("offset %d: body %q, want %q", i, v.Body(), body)
		}
	}
	checkInvariants(t, s)
}

// A failed write of the staged bytes makes none of them readable (no unit points at them, the
// commitlog end does not move) and poisons the store, as a failed sync does.
func TestAppendReplicatedBatchWriteFailure(t *testing.T) {
	fs := vfs.NewMemFS()
	s := openT(t, testConfig(fs))
	defer s.Close()
	if _, err := s.AppendReplicatedBatch(entryAppends(t, 0)[:3]); err != nil {
		t.Fatal(err)
	}
	end := s.CommitLogMaxOffset()
	before := checkQueues(t, s)
	fs.FailAll(vfs.OpWriteAt)
	_, err := s.AppendReplicatedBatch(entryAppends(t, 1)[:20])
	var be *BatchWriteError
	if !errors.Is(err, ErrIO) || !errors.Is(err, vfs.ErrInjected) || !errors.As(err, &be) || be.At != 0 {
		t.Fatalf("batch with a failing write: %v", err)
	}
	if s.CommitLogMaxOffset() != end || fmt.Sprint(checkQueues(t, s)) != fmt.Sprint(before) {
		t.Fatalf("failed batch became readable: end %d -> %d, queues %v -> %v", end, s.CommitLogMaxOffset(), before, checkQueues(t, s))
	}
	fs.ClearFaults()
	if _, err := s.AppendReplicated(entryAppends(t, 2)[0]); !errors.Is(err, ErrIO) {
		t.Fatalf("append after a failed write: %v (want the store poisoned)", err)
	}
	checkInvariants(t, s)
}

// A file that cannot be created in the middle of a batch stops it there: the appends before it
// are stored and readable, the error names the append, and nothing after it is stored.
func TestAppendReplicatedBatchCreateFailureMidway(t *testing.T) {
	fs := vfs.NewMemFS()
	s := openT(t, testConfig(fs))
	defer s.Close()
	appends := [][][]byte{
		{rec(t, "M", 0, "first", "", "")},
		{rec(t, "M", 0, "second", "", "")},
		{rec(t, "NewQueue", 0, "needs a file", "", "")},
		{rec(t, "M", 0, "never", "", "")},
	}
	if _, err := s.AppendReplicated(appends[0]); err != nil { // M-0's file exists
		t.Fatal(err)
	}
	fs.FailAll(vfs.OpCreate)
	_, err := s.AppendReplicatedBatch(appends[1:])
	var be *BatchWriteError
	if !errors.As(err, &be) || be.At != 1 || !errors.Is(err, ErrIO) {
		t.Fatalf("batch with a failing create: %v", err)
	}
	fs.ClearFaults()
	if r := s.GetMessages("M", 0, 0, 10, 0, nil); len(r.Records) != 2 {
		t.Fatalf("M-0 holds %d records, want the two before the failure", len(r.Records))
	}
	if q := s.queueByName("NewQueue", 0); q != nil && q.max.Load() != 0 {
		t.Fatalf("NewQueue got %d units", q.max.Load())
	}
	checkInvariants(t, s)
}

// With FlushCommitLogBytes an ASYNC_FLUSH store flushes once that much is unflushed, long before
// its (here hour-long) interval: a DLedger node's flushes stay small.
func TestFlushCommitLogBytes(t *testing.T) {
	for _, c := range []struct {
		name  string
		bytes int64
		want  bool // flushed before the interval
	}{{"bounded", 4 << 10, true}, {"interval only", 0, false}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(vfs.NewMemFS())
			cfg.FlushDiskType = AsyncFlush
			cfg.FlushIntervalCommitLog = time.Hour
			cfg.FlushCommitLogBytes = c.bytes
			s := openT(t, cfg)
			defer s.Close()
			body := strings.Repeat("x", 1000)
			for i := 0; i < 6; i++ { // ~6 KiB, more than the bound
				appendT(t, s, rec(t, "T", 0, body, "", ""))
			}
			end := s.CommitLogMaxOffset()
			wait := 5 * time.Second
			if !c.want {
				wait = 200 * time.Millisecond // long enough for a kick to have been acted on
			}
			deadline := time.Now().Add(wait)
			for s.CommitLogFlushedOffset() < 4<<10 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			got := s.CommitLogFlushedOffset()
			if c.want && got < 4<<10 {
				t.Fatalf("flushed %d of %d within %v, want at least 4096", got, end, wait)
			}
			if !c.want && got != 0 {
				t.Fatalf("flushed %d of %d with no byte bound, want 0 before the interval", got, end)
			}
		})
	}
}
