package storage

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"rocketraft/message"
	"rocketraft/storage/vfs"
)

// crashCopy returns what a power loss would leave of fs, after the store's goroutines are
// stopped so nothing races with the copy.
func crashCopy(t *testing.T, s *Store, fs *vfs.MemFS) *vfs.MemFS {
	t.Helper()
	close(s.stop)
	s.wg.Wait()
	return fs.Crash()
}

// overwrite replaces bytes of a file in fs and syncs them (a torn or garbage write that did
// reach the disk).
func overwrite(t *testing.T, fs *vfs.MemFS, name string, size int64, off int64, data []byte) {
	t.Helper()
	m, err := fs.Map(name, size)
	if err != nil {
		t.Fatal(err)
	}
	copy(m.Bytes()[off:], data)
	if err := m.Sync(int(off), len(data)); err != nil {
		t.Fatal(err)
	}
}

// TestRecoverTornLastRecordEveryByte cuts the last record at every byte position, both with
// zeros and with garbage after the cut, and with its consume-queue unit and index entry
// already durable. Recovery must drop exactly that record, keep everything before it, and
// continue with dense offsets.
func TestRecoverTornLastRecordEveryByte(t *testing.T) {
	base := vfs.NewMemFS()
	cfg := testConfig(base)
	s := openT(t, cfg)
	for i := 0; i < 12; i++ {
		appendT(t, s, rec(t, "T", int32(i%3), fmt.Sprintf("body-%d", i), "tag", fmt.Sprintf("k%d", i)))
	}
	last := appendT(t, s, rec(t, "T", 1, "the last one", "tag", "klast"))[0]
	if err := s.flushLogics(); err != nil { // the last unit and index entry are durable too
		t.Fatal(err)
	}
	crashed := crashCopy(t, s, base)
	clName := "/store/commitlog/00000000000000000000"
	for cut := 0; cut < int(last.Size); cut++ {
		for _, fill := range []byte{0, 0xA5} {
			fs := crashed.Crash()
			tail := make([]byte, int(last.Size)-cut+16)
			for i := range tail {
				tail[i] = fill
			}
			overwrite(t, fs, clName, cfg.MappedFileSizeCommitLog, last.PhysicalOffset+int64(cut), tail)
			s2, err := Open(testConfig(fs))
			if err != nil {
				t.Fatalf("cut %d fill %#x: open: %v", cut, fill, err)
			}
			if got := s2.CommitLogMaxOffset(); got != last.PhysicalOffset {
				t.Fatalf("cut %d fill %#x: end %d, want %d", cut, fill, got, last.PhysicalOffset)
			}
			if got := s2.MaxOffset("T", 1); got != last.QueueOffset {
				t.Fatalf("cut %d: queue max %d, want %d", cut, got, last.QueueOffset)
			}
			if got, _, _ := s2.QueryByKey("T", "klast", 5, 0, 1<<62); len(got) != 0 {
				t.Fatalf("cut %d: torn record still indexed", cut)
			}
			if got, _, _ := s2.QueryByKey("T", "k4", 5, 0, 1<<62); len(got) != 1 {
				t.Fatalf("cut %d: earlier record lost from index", cut)
			}
			res := appendT(t, s2, rec(t, "T", 1, "again", "", ""))
			if res[0].PhysicalOffset != last.PhysicalOffset || res[0].QueueOffset != last.QueueOffset {
				t.Fatalf("cut %d: next append at %d/%d", cut, res[0].PhysicalOffset, res[0].QueueOffset)
			}
			c := checkInvariants(t, s2)
			if c["T-0"] != 4 || c["T-1"] != 5 || c["T-2"] != 4 {
				t.Fatalf("cut %d: counts %v", cut, c)
			}
			s2.Close()
		}
	}
}

// TestRecoverDropsUnsynced: appends after the last sync vanish in a power loss; synced ones
// survive, whether or not their consume-queue units were synced.
func TestRecoverDropsUnsynced(t *testing.T) {
	for _, syncLogics := range []bool{false, true} {
		t.Run(fmt.Sprintf("logicsSynced=%v", syncLogics), func(t *testing.T) {
			fs := vfs.NewMemFS()
			cfg := testConfig(fs)
			cfg.FlushDiskType = AsyncFlush
			cfg.FlushIntervalCommitLog = 1 << 40
			cfg.FlushIntervalConsumeQueue = 1 << 40
			s := openT(t, cfg)
			body := make([]byte, 3000) // spans several commitlog and CQ files
			for i := 0; i < 60; i++ {
				appendT(t, s, rec(t, "U", int32(i%2), string(body), "", fmt.Sprintf("a%d", i)))
			}
			if err := s.flushCommitLog(); err != nil {
				t.Fatal(err)
			}
			if syncLogics {
				if err := s.flushLogics(); err != nil {
					t.Fatal(err)
				}
			}
			durableEnd := s.CommitLogMaxOffset()
			for i := 0; i < 30; i++ {
				appendT(t, s, rec(t, "U", int32(i%2), string(body), "", fmt.Sprintf("b%d", i)))
			}
			fs2 := crashCopy(t, s, fs)
			s2 := openT(t, testConfig(fs2))
			defer s2.Close()
			if s2.CommitLogMaxOffset() != durableEnd {
				t.Fatalf("end %d, want %d", s2.CommitLogMaxOffset(), durableEnd)
			}
			c := checkInvariants(t, s2)
			if c["U-0"] != 30 || c["U-1"] != 30 {
				t.Fatalf("counts %v", c)
			}
			if got, _, _ := s2.QueryByKey("U", "a59", 5, 0, 1<<62); len(got) != 1 {
				t.Fatal("synced record not indexed after recovery")
			}
			if got, _, _ := s2.QueryByKey("U", "b0", 5, 0, 1<<62); len(got) != 0 {
				t.Fatal("lost record still indexed")
			}
		})
	}
}

// TestRecoverShortNewestSegment: a power loss between creating the newest commitlog file and
// making its preallocated length durable leaves a file holding only the pages written back
// (seen on lazyfs: 28,672 bytes of a 1 MiB segment). The store opens, keeps every record the
// short file still holds whole, and ends the log there.
func TestRecoverShortNewestSegment(t *testing.T) {
	fs := vfs.NewMemFS()
	cfg := testConfig(fs)
	s := openT(t, cfg)
	body := make([]byte, 3000)
	for i := 0; i < 60; i++ { // about three 64 KiB commitlog files
		appendT(t, s, rec(t, "S", int32(i%2), string(body), "", fmt.Sprintf("k%d", i)))
	}
	end := s.CommitLogMaxOffset()
	fs2 := crashCopy(t, s, fs)
	size := cfg.MappedFileSizeCommitLog
	newest := end / size * size
	name := "/store/commitlog/" + fmt.Sprintf("%020d", newest)
	data, err := fs2.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	const kept = 7 * vfs.PageSize
	if end-newest <= kept {
		t.Fatalf("the newest file holds %d bytes, the test needs more than %d", end-newest, kept)
	}
	if err := fs2.WriteFile(name, data[:kept]); err != nil {
		t.Fatal(err)
	}
	s2 := openT(t, testConfig(fs2))
	defer s2.Close()
	got := s2.CommitLogMaxOffset()
	if got < newest || got > newest+kept {
		t.Fatalf("end %d after the cut, want within [%d, %d]", got, newest, newest+kept)
	}
	c := checkInvariants(t, s2)
	if c["S-0"]+c["S-1"] == 0 || c["S-0"]+c["S-1"] >= 60 {
		t.Fatalf("counts %v: want the records before the cut", c)
	}
}

// TestRecoverRandomCrashes crashes at random points of a random workload, dropping a random
// subset of the unsynced consume-queue and index writes, and checks after each restart that
// every acknowledged SYNC_FLUSH append survived and the queues are dense and duplicate-free.
func TestRecoverRandomCrashes(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	fs := vfs.NewMemFS()
	type ack struct{ body, topic, key string }
	acked := map[int64]ack{} // phys -> acknowledged (synced) append
	for round := 0; round < 40; round++ {
		cfg := testConfig(fs)
		cfg.FlushIntervalConsumeQueue = 1 << 40
		s := openT(t, cfg)
		for phys, a := range acked {
			b, err := s.ReadRecord(phys)
			if err != nil {
				t.Fatalf("round %d: acknowledged record at %d lost: %v", round, phys, err)
			}
			v, _ := message.ParseView(b)
			if string(v.Body()) != a.body {
				t.Fatalf("round %d: record at %d changed", round, phys)
			}
			found := false
			got, _, _ := s.QueryByKey(a.topic, a.key, 1<<20, 0, 1<<62)
			for _, r := range got {
				if v, _ := message.ParseView(r); v.PhysicalOffset() == phys {
					found = true
				}
			}
			if !found {
				t.Fatalf("round %d: record at %d not found by key %s", round, phys, a.key)
			}
		}
		checkInvariants(t, s)
		n := rng.Intn(40) + 1
		for i := 0; i < n; i++ {
			body := fmt.Sprintf("r%d-%d-%s", round, i, make([]byte, rng.Intn(2000)))
			var batch [][]byte
			var acks []ack
			for j := rng.Intn(3); j >= 0; j-- {
				a := ack{body, fmt.Sprintf("T%d", rng.Intn(3)), fmt.Sprintf("k%d", rng.Intn(50))}
				batch = append(batch, rec(t, a.topic, int32(rng.Intn(2)), body, "x", a.key))
				acks = append(acks, a)
			}
			res := appendT(t, s, batch...)
			for j, r := range res {
				acked[r.PhysicalOffset] = acks[j]
			}
			if rng.Intn(10) == 0 {
				if err := s.flushLogics(); err != nil {
					t.Fatal(err)
				}
			}
		}
		// an unsynced tail: appends that are never synced
		s.cfg.FlushDiskType = AsyncFlush
		for i := rng.Intn(5); i > 0; i-- {
			appendT(t, s, rec(t, "T0", 0, "unsynced", "", ""))
		}
		close(s.stop)
		s.wg.Wait()
		fs = fs.CrashKeeping(func(string, int) bool { return rng.Intn(2) == 0 })
	}
}

// FuzzWalkSegment: the commitlog walker never panics and never reads past the segment, stops
// at the first invalid byte, and re-walking the valid prefix followed by zeros gives the same
// end and the same records.
func FuzzWalkSegment(f *testing.F) {
	seg := make([]byte, 4096)
	off := 0
	for i := 0; i < 3; i++ {
		b, _ := message.EncodeRecord(&message.Message{Topic: "T", Body: []byte(fmt.Sprint(i)), PhysicalOffset: int64(off)})
		off += copy(seg[off:], b)
	}
	f.Add(seg[:1024])
	f.Add(seg[:off+3])
	blank := append([]byte(nil), seg[:512]...)
	copy(blank[off:], []byte{0, 0, 1, byte(512 - off - 256), 0xCB, 0xD4, 0x31, 0x94})
	f.Add(blank)
	f.Fuzz(func(t *testing.T, b []byte) {
		var offs []int64
		end, res, err := walkSegment(b, 0, 0, func(phys int64, v message.View) error {
			offs = append(offs, phys)
			if _, _, err := message.DecodeRecord(v.Bytes()); err != nil {
				t.Fatalf("walker accepted an undecodable record at %d: %v", phys, err)
			}
			return nil
		})
		if err != nil || end < 0 || end > len(b) {
			t.Fatalf("end %d of %d, err %v", end, len(b), err)
		}
		if res == walkBlank {
			return
		}
		again := make([]byte, len(b))
		copy(again, b[:end])
		var offs2 []int64
		end2, _, _ := walkSegment(again, 0, 0, func(phys int64, v message.View) error {
			offs2 = append(offs2, phys)
			return nil
		})
		if end2 != end || len(offs2) != len(offs) {
			t.Fatalf("re-walk: end %d vs %d, %d vs %d records", end2, end, len(offs2), len(offs))
		}
	})
}

// TestOSKillAndRecover runs the real file system: the store is abandoned as kill -9 would
// leave it (no flush, abort file present, lock dropped by the OS), then reopened.
func TestOSKillAndRecover(t *testing.T) {
	cfg := testConfig(vfs.OS{})
	cfg.StorePathRootDir = t.TempDir()
	cfg.FlushDiskType = AsyncFlush
	s := openT(t, cfg)
	for i := 0; i < 200; i++ {
		appendT(t, s, rec(t, "K", int32(i%4), fmt.Sprintf("%0900d", i), "t", fmt.Sprintf("key%d", i)))
	}
	close(s.stop)
	s.wg.Wait()
	s.release() // the kernel keeps the page cache: like kill -9
	s2 := openT(t, cfg)
	defer s2.Close()
	c := checkInvariants(t, s2)
	for q := 0; q < 4; q++ {
		if n := c[fmt.Sprintf("K-%d", q)]; n != 50 {
			t.Fatalf("queue %d: %d records", q, n)
		}
	}
	if got, _, _ := s2.QueryByKey("K", "key199", 5, 0, 1<<62); len(got) != 1 {
		t.Fatal("index not rebuilt")
	}
	if res := appendT(t, s2, rec(t, "K", 0, "next", "", "")); res[0].QueueOffset != 50 {
		t.Fatalf("next offset %d", res[0].QueueOffset)
	}
}

// TestRecoverTornAtFileRoll tears the blank end-of-file marker and the first record of the
// next file at every byte: recovery ends the log at the marker or at the file boundary, and
// appending goes on.
func TestRecoverTornAtFileRoll(t *testing.T) {
	base := vfs.NewMemFS()
	cfg := testConfig(base)
	s := openT(t, cfg)
	var last AppendResult
	count := int64(0)
	for {
		last = appendT(t, s, rec(t, "F", 0, string(make([]byte, 3000)), "t", ""))[0]
		count++
		if last.PhysicalOffset >= cfg.MappedFileSizeCommitLog {
			break
		}
	}
	// the marker follows the last record of file 0
	pv, _ := message.ParseView(s.GetMessages("F", 0, count-2, 1, 0, nil).Records[0])
	blankAt := pv.PhysicalOffset() + int64(pv.Size())
	crashed := crashCopy(t, s, base)
	file0, file1 := "/store/commitlog/00000000000000000000", "/store/commitlog/00000000000000065536"
	check := func(name string, fs *vfs.MemFS, wantEnd, wantMax int64) {
		s2, err := Open(testConfig(fs))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer s2.Close()
		if s2.CommitLogMaxOffset() != wantEnd || s2.MaxOffset("F", 0) != wantMax {
			t.Fatalf("%s: end %d max %d, want %d %d", name, s2.CommitLogMaxOffset(), s2.MaxOffset("F", 0), wantEnd, wantMax)
		}
		res := appendT(t, s2, rec(t, "F", 0, string(make([]byte, 3000)), "t", ""))
		if res[0].QueueOffset != wantMax || res[0].PhysicalOffset != cfg.MappedFileSizeCommitLog {
			t.Fatalf("%s: next append %+v", name, res[0])
		}
		checkInvariants(t, s2)
	}
	for cut := 0; cut < 8; cut++ {
		fs := crashed.Crash()
		overwrite(t, fs, file1, cfg.MappedFileSizeCommitLog, 0, make([]byte, last.Size))
		overwrite(t, fs, file0, cfg.MappedFileSizeCommitLog, blankAt+int64(cut), make([]byte, 8-cut))
		check(fmt.Sprintf("blank cut %d", cut), fs, blankAt, count-1)
	}
	for cut := 0; cut < int(last.Size); cut++ {
		fs := crashed.Crash()
		overwrite(t, fs, file1, cfg.MappedFileSizeCommitLog, int64(cut), make([]byte, int(last.Size)-cut))
		check(fmt.Sprintf("record cut %d", cut), fs, cfg.MappedFileSizeCommitLog, count-1)
	}
}

// FuzzRecover models a crash: the first k records are durable (synced, checkpointed), and the
// commitlog after them holds arbitrary bytes (a torn or garbage unsynced write). Recovery must
// not panic, must keep the k records, and every consume-queue unit must point at the record it
// claims. (A crafted record after the durable prefix that passes every check but carries an
// out-of-sequence queue offset stays in the log undispatched, so the reverse check is not
// applied here.)
func FuzzRecover(f *testing.F) {
	const n = 4
	var states [n]*vfs.MemFS
	var ends [n]int64
	var tail []byte
	for k := 0; k < n; k++ {
		base := vfs.NewMemFS()
		s, err := Open(testConfig(base))
		if err != nil {
			f.Fatal(err)
		}
		for i := 0; i <= k; i++ {
			r := rec(f, "Z", int32(i%2), fmt.Sprintf("body%d", i), "t", fmt.Sprintf("k%d", i))
			res, err := s.Append(context.Background(), [][]byte{r})
			if err != nil {
				f.Fatal(err)
			}
			ends[k] = res[0].PhysicalOffset + int64(res[0].Size)
		}
		if err := s.flushLogics(); err != nil {
			f.Fatal(err)
		}
		if k == 0 {
			r := rec(f, "Z", 1, "body1", "t", "k1")
			s.Append(context.Background(), [][]byte{r})
			tail, _ = s.ReadCommitLog(ends[0], 1<<20)
		}
		close(s.stop)
		s.wg.Wait()
		states[k] = base.Crash()
	}
	f.Add(uint8(0), tail)
	f.Add(uint8(0), tail[:len(tail)/2])
	f.Add(uint8(1), []byte{0, 0, 0, 91, 0xDA, 0xA3, 0x20, 0xA7})
	f.Fuzz(func(t *testing.T, keep uint8, data []byte) {
		k := int(keep) % n
		if len(data) > 8192 {
			data = data[:8192]
		}
		fs := states[k].Crash()
		junk := make([]byte, 8192+512)
		copy(junk, data)
		cfg := testConfig(fs)
		overwrite(t, fs, "/store/commitlog/00000000000000000000", cfg.MappedFileSizeCommitLog, ends[k], junk)
		s2, err := Open(cfg)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer s2.Close()
		if s2.CommitLogMaxOffset() < ends[k] {
			t.Fatalf("end %d before the durable prefix %d", s2.CommitLogMaxOffset(), ends[k])
		}
		c := checkQueues(t, s2)
		if c["Z-0"]+c["Z-1"] < int64(k+1) {
			t.Fatalf("durable records lost: %v", c)
		}
		if _, err := s2.Append(context.Background(), [][]byte{rec(t, "Z", 0, "next", "", "")}); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
		checkQueues(t, s2)
	})
}

// After an abnormal shutdown, recovery syncs every commitlog segment and consume-queue file,
// written to or not, so that a writeback error the failed process left unseen fails the start
// (Linux reports it once, to the next fsync of the file) rather than a write in service later;
// a start that fails so leaves the store to open on the next start.
func TestAbnormalRecoverySyncsEveryFile(t *testing.T) {
	fs := vfs.NewMemFS()
	s := openT(t, testConfig(fs))
	for q := int32(0); q < 3; q++ {
		appendT(t, s, rec(t, "R", q, "x", "", ""))
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	crashed := crashCopy(t, s, fs)
	before := crashed.Calls(vfs.OpSync)
	s2 := openT(t, testConfig(crashed))
	// One commitlog segment and three queue files at least, none of them written by recovery
	// (the checkpoint covered everything).
	if n := crashed.Calls(vfs.OpSync) - before; n < 4 {
		t.Fatalf("recovery synced %d files, want every commitlog and consume-queue file (4)", n)
	}
	s2.Close()

	// The same crash, with a sync failing at start: the open fails with ErrIO, and the next
	// open (the disk fixed) succeeds.
	again := crashCopy(t, openT(t, testConfig(crashed.Crash())), crashed)
	again.FailNth(vfs.OpSync, 1)
	if _, err := Open(testConfig(again)); !errors.Is(err, ErrIO) {
		t.Fatalf("a failing sync at recovery: open gave %v, want ErrIO (a disk failure)", err)
	}
	again.ClearFaults()
	s3 := openT(t, testConfig(again))
	s3.Close()
}
