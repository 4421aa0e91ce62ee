package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"rocketraft/storage/vfs"
)

// A failed sync fails the waiting appends with ErrIO, every later append too, and leaves what
// was written readable; after a restart the store is consistent.
func TestSyncFailureRefusesWrites(t *testing.T) {
	fs := vfs.NewMemFS()
	s := openT(t, testConfig(fs))
	for i := 0; i < 5; i++ {
		appendT(t, s, rec(t, "F", 0, "ok", "", ""))
	}
	fs.FailNth(vfs.OpSync, 1)
	if _, err := s.Append(context.Background(), [][]byte{rec(t, "F", 0, "fails", "", "")}); !errors.Is(err, ErrIO) {
		t.Fatalf("append during failed sync: %v", err)
	}
	if _, err := s.Append(context.Background(), [][]byte{rec(t, "F", 0, "later", "", "")}); !errors.Is(err, ErrIO) {
		t.Fatalf("append after failed sync: %v", err)
	}
	if r := s.GetMessages("F", 0, 0, 32, 0, nil); r.Status != Found || len(r.Records) < 5 {
		t.Fatalf("reads after failure: %v %d", r.Status, len(r.Records))
	}
	if !s.Stats().WriteFailed {
		t.Fatal("stats do not report the failure")
	}
	s.Close()
	if _, err := fs.Stat("/store/abort"); err != nil {
		t.Fatal("abort file removed although writes failed")
	}
	fs2 := fs.Crash()
	s2 := openT(t, testConfig(fs2))
	defer s2.Close()
	if c := checkInvariants(t, s2); c["F-0"] < 5 {
		t.Fatalf("synced records lost: %v", c)
	}
	appendT(t, s2, rec(t, "F", 0, "after restart", "", ""))
}

// A file that cannot be created (commitlog roll, new consume queue) fails the append with
// ErrIO but poisons nothing: no byte was written.
func TestCreateFailureDoesNotCorrupt(t *testing.T) {
	fs := vfs.NewMemFS()
	s := openT(t, testConfig(fs))
	defer s.Close()
	appendT(t, s, rec(t, "C", 0, "x", "", ""))
	fs.FailNth(vfs.OpCreate, 1)
	if _, err := s.Append(context.Background(), [][]byte{rec(t, "NewTopic", 0, "x", "", "")}); !errors.Is(err, ErrIO) {
		t.Fatalf("append needing a new queue: %v", err)
	}
	res := appendT(t, s, rec(t, "NewTopic", 0, "x", "", ""))
	if res[0].QueueOffset != 0 {
		t.Fatalf("offset %d", res[0].QueueOffset)
	}
	checkInvariants(t, s)
}

// Sync-flush timeout: the flusher is blocked, so the append returns its results with
// ErrFlushDiskTimeout.
func TestSyncFlushTimeout(t *testing.T) {
	fs := vfs.NewMemFS()
	cfg := testConfig(fs)
	cfg.SyncFlushTimeout = 50 * time.Millisecond
	s := openT(t, cfg)
	defer s.Close()
	close(s.stop) // no flusher: nothing will sync
	s.wg.Wait()
	s.stop = make(chan struct{})
	res, err := s.Append(context.Background(), [][]byte{rec(t, "S", 0, "x", "", "")})
	if !errors.Is(err, ErrFlushDiskTimeout) || len(res) != 1 {
		t.Fatalf("got %v, %d results", err, len(res))
	}
}

// Over the disk ratio, Clean finds nothing to delete and appends are refused with ErrDiskFull;
// when space comes back they are accepted again. A full disk at file creation is ErrDiskFull.
func TestDiskFull(t *testing.T) {
	fs := vfs.NewMemFS()
	s := openT(t, testConfig(fs))
	defer s.Close()
	appendT(t, s, rec(t, "D", 0, "x", "", ""))
	fs.SetUsage(&vfs.Usage{Total: 100, Used: 90})
	if err := s.Clean(time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(context.Background(), [][]byte{rec(t, "D", 0, "x", "", "")}); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("over ratio: %v", err)
	}
	fs.SetUsage(&vfs.Usage{Total: 100, Used: 10})
	s.Clean(time.Now())
	res := appendT(t, s, rec(t, "D", 0, "x", "", ""))
	if res[0].QueueOffset != 1 {
		t.Fatalf("offset %d", res[0].QueueOffset)
	}
	fs.SetUsage(nil)
	fs.SetFull(true)
	if _, err := s.Append(context.Background(), [][]byte{rec(t, "Other", 0, "x", "", "")}); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("full at create: %v", err)
	}
	fs.SetFull(false)
	s.Clean(time.Now())
	appendT(t, s, rec(t, "Other", 0, "x", "", ""))
	checkInvariants(t, s)
}

// Retention deletes expired commitlog files at deleteWhen, then the consume-queue and index
// files below the new min offset; pulls of removed offsets are corrected.
func TestRetention(t *testing.T) {
	fs, s, clk := openForRetention(t)
	defer s.Close()
	before := len(s.cl.segs.snapshot())
	clk.set(clk.now().Add(73 * time.Hour)) // 13:00, not a deleteWhen hour
	if err := s.Clean(clk.now()); err != nil {
		t.Fatal(err)
	}
	if len(s.cl.segs.snapshot()) != before {
		t.Fatal("deleted outside deleteWhen")
	}
	now := clk.now()
	clk.set(time.Date(now.Year(), now.Month(), now.Day()+1, 4, 0, 0, 0, time.Local))
	if err := s.Clean(clk.now()); err != nil {
		t.Fatal(err)
	}
	if n := len(s.cl.segs.snapshot()); n != 1 {
		t.Fatalf("%d commitlog files left, want only the active one", n)
	}
	minOff := s.MinOffset("R", 0)
	if minOff == 0 || s.CommitLogMinOffset() == 0 {
		t.Fatalf("min offsets not advanced: %d %d", minOff, s.CommitLogMinOffset())
	}
	if names, _ := fs.ReadDir("/store/consumequeue/R/0"); len(names) != 1 {
		t.Fatalf("cq files %v", names)
	}
	r := s.GetMessages("R", 0, 0, 32, 0, nil)
	if r.Status != OffsetTooSmall || r.NextBeginOffset != minOff {
		t.Fatalf("old offset: %v next %d", r.Status, r.NextBeginOffset)
	}
	if r := s.GetMessages("R", 0, minOff, 32, 0, nil); r.Status != Found {
		t.Fatalf("min offset: %v", r.Status)
	}
	if got, _, _ := s.QueryByKey("R", "k119", 5, 0, 1<<62); len(got) != 1 {
		t.Fatal("recent key lost")
	}
	if idx, _ := fs.ReadDir("/store/index"); len(idx) >= 120/(200/1) && len(idx) > 1 {
		t.Fatalf("index files not cleaned: %v", idx)
	}
	checkInvariants(t, s)
	appendT(t, s, rec(t, "R", 0, "after", "", ""))
}

// Many concurrent appenders and readers (run with -race): offsets stay dense and every
// append is readable at the offset it was given.
func TestConcurrentAppendAndRead(t *testing.T) {
	for _, mode := range []FlushDiskType{SyncFlush, AsyncFlush} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := testConfig(vfs.NewMemFS())
			cfg.FlushDiskType = mode
			cfg.FlushIntervalCommitLog = time.Millisecond
			cfg.FlushIntervalConsumeQueue = 5 * time.Millisecond
			cfg.MappedFileSizeCommitLog = 256 << 10
			s := openT(t, cfg)
			defer s.Close()
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for r := 0; r < 4; r++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					next := int64(0)
					for {
						select {
						case <-stop:
							return
						default:
						}
						res := s.GetMessages("C", 0, next, 32, 0, nil)
						if res.Status == Found {
							next = res.NextBeginOffset
						}
						s.QueryByKey("C", "k", 4, 0, 1<<62)
					}
				}()
			}
			var aw sync.WaitGroup
			for w := 0; w < 16; w++ {
				aw.Add(1)
				go func(w int) {
					defer aw.Done()
					for i := 0; i < 40; i++ {
						res, err := s.Append(context.Background(), [][]byte{rec(t, "C", int32(i%2), fmt.Sprint(w, i), "", "k")})
						if err != nil {
							t.Error(err)
							return
						}
						b, err := s.ReadRecord(res[0].PhysicalOffset)
						if err != nil || len(b) != int(res[0].Size) {
							t.Errorf("read back: %v", err)
						}
					}
				}(w)
			}
			aw.Wait()
			close(stop)
			wg.Wait()
			c := checkInvariants(t, s)
			if c["C-0"]+c["C-1"] != 16*40 {
				t.Fatalf("counts %v", c)
			}
		})
	}
}

// Over the ratio, expired files go at once (not waiting for deleteWhen); if usage stays over
// the ratio, appends are refused.
func TestRetentionOverRatio(t *testing.T) {
	fs := vfs.NewMemFS()
	now := time.Date(2026, 1, 1, 13, 0, 0, 0, time.Local)
	fs.SetClock(func() time.Time { return now })
	cfg := testConfig(fs)
	s := openT(t, cfg)
	defer s.Close()
	for i := 0; i < 60; i++ {
		appendT(t, s, rec(t, "O", 0, string(make([]byte, 4000)), "", ""))
	}
	fs.SetUsage(&vfs.Usage{Total: 100, Used: 80})
	if err := s.Clean(now.Add(time.Hour)); err != nil { // not expired yet: nothing deleted
		t.Fatal(err)
	}
	if s.CommitLogMinOffset() != 0 {
		t.Fatal("deleted unexpired files")
	}
	if err := s.Clean(now.Add(73 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	if s.CommitLogMinOffset() == 0 {
		t.Fatal("expired files kept although over the ratio")
	}
	if _, err := s.Append(context.Background(), [][]byte{rec(t, "O", 0, "x", "", "")}); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("still over ratio: %v", err)
	}
	checkInvariants(t, s)
}

// A failed consume-queue/index sync poisons the store like a failed commitlog sync.
func TestLogicsSyncFailure(t *testing.T) {
	fs := vfs.NewMemFS()
	s := openT(t, testConfig(fs))
	defer s.Close()
	appendT(t, s, rec(t, "L", 0, "x", "", "k"))
	fs.FailAll(vfs.OpSync)
	if err := s.flushLogics(); !errors.Is(err, ErrIO) {
		t.Fatalf("logics flush: %v", err)
	}
	fs.ClearFaults()
	if _, err := s.Append(context.Background(), [][]byte{rec(t, "L", 0, "y", "", "")}); !errors.Is(err, ErrIO) {
		t.Fatalf("append after failed logics sync: %v", err)
	}
}

// AppendReplicated never refuses for the usage ratio (a replica must apply what was committed;
// the leader refuses beforehand through CheckDiskSpace), but a real write failure is still an
// error: ENOSPC creating a file, an injected I/O error.
func TestAppendReplicatedIgnoresRatio(t *testing.T) {
	fs := vfs.NewMemFS()
	s := openT(t, testConfig(fs))
	defer s.Close()
	if err := s.CheckDiskSpace(100); err != nil {
		t.Fatalf("room, yet: %v", err)
	}
	fs.SetUsage(&vfs.Usage{Total: 100, Used: 90})
	if err := s.Clean(time.Now()); err != nil {
		t.Fatal(err)
	}
	err := s.CheckDiskSpace(100)
	if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "90.00% is over diskMaxUsedSpaceRatio 75%") {
		t.Fatalf("check over ratio: %v", err)
	}
	if _, err := s.Append(context.Background(), [][]byte{rec(t, "R", 0, "x", "", "")}); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("append over ratio: %v", err)
	}
	res, err := s.AppendReplicated([][]byte{rec(t, "R", 0, "x", "", ""), rec(t, "R", 1, "y", "", "")})
	if err != nil || len(res) != 2 || res[0].QueueOffset != 0 {
		t.Fatalf("replicated append over ratio: %+v %v", res, err)
	}
	// a roll to a new commitlog file is no reason either
	big := rec(t, "R", 0, strings.Repeat("z", 15000), "", "")
	for i := 0; i < 10; i++ {
		if _, err := s.AppendReplicated([][]byte{big}); err != nil {
			t.Fatalf("replicated append %d over ratio: %v", i, err)
		}
	}
	if s.CommitLogMaxOffset() <= testConfig(fs).MappedFileSizeCommitLog {
		t.Fatal("no roll happened")
	}
	fs.SetUsage(nil)
	fs.SetFull(true)
	if _, err := s.AppendReplicated([][]byte{rec(t, "Fresh", 0, "x", "", "")}); !errors.Is(err, ErrDiskFull) || !errors.Is(err, vfs.ErrNoSpace) {
		t.Fatalf("replicated append with no space for a new file: %v", err)
	}
	fs.SetFull(false)
	fs.FailAll(vfs.OpCreate)
	if _, err := s.AppendReplicated([][]byte{rec(t, "Fresh", 0, "x", "", "")}); !errors.Is(err, ErrIO) {
		t.Fatalf("replicated append with a failing create: %v", err)
	}
	fs.ClearFaults()
	checkInvariants(t, s)
}

// testClock is a settable clock for the store and its MemFS.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// openForRetention opens a store on a MemFS at 2026-01-01 12:00 on a settable clock and appends
// 120 records of 4000-byte bodies to R/0: about 8 commitlog files, 2 consume-queue files and
// several index files for retention to remove.
func openForRetention(t *testing.T) (*vfs.MemFS, *Store, *testClock) {
	t.Helper()
	fs := vfs.NewMemFS()
	clk := &testClock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.Local)}
	fs.SetClock(clk.now)
	cfg := testConfig(fs)
	cfg.Now = clk.now
	s := openT(t, cfg)
	body := make([]byte, 4000)
	for i := 0; i < 120; i++ {
		appendT(t, s, rec(t, "R", 0, string(body), "", fmt.Sprintf("k%d", i)))
	}
	return fs, s, clk
}
