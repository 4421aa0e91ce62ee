package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"rocketraft/message"
	"rocketraft/storage/vfs"
)

func TestAppendAndGetMessages(t *testing.T) {
	s := openT(t, testConfig(vfs.NewMemFS()))
	defer s.Close()
	var dispatched []int64
	s.cfg.OnDispatch = func(topic string, qid int32, off int64, tags int64) { dispatched = append(dispatched, off) }
	for i := 0; i < 10; i++ {
		tag := "TagA"
		if i%2 == 1 {
			tag = "TagB"
		}
		res := appendT(t, s, rec(t, "T", 1, fmt.Sprintf("m%d", i), tag, ""))
		if res[0].QueueOffset != int64(i) {
			t.Fatalf("queue offset %d, want %d", res[0].QueueOffset, i)
		}
		b, err := s.ReadRecord(res[0].PhysicalOffset)
		if err != nil {
			t.Fatal(err)
		}
		m, _, err := message.DecodeRecord(b)
		if err != nil || m.PhysicalOffset != res[0].PhysicalOffset || m.QueueOffset != int64(i) || m.StoreTimestamp == 0 {
			t.Fatalf("stored record %+v, %v", m, err)
		}
	}
	if len(dispatched) != 10 {
		t.Fatalf("OnDispatch called %d times", len(dispatched))
	}
	r := s.GetMessages("T", 1, 0, 32, 0, nil)
	if r.Status != Found || len(r.Records) != 10 || r.NextBeginOffset != 10 || r.MaxOffset != 10 || r.MinOffset != 0 {
		t.Fatalf("get all: %v %d next %d", r.Status, len(r.Records), r.NextBeginOffset)
	}
	tagA := message.TagsCode("TagA")
	r = s.GetMessages("T", 1, 0, 3, 0, func(c int64) bool { return c == tagA })
	if r.Status != Found || len(r.Records) != 3 || r.NextBeginOffset != 5 {
		t.Fatalf("filtered: %v %d next %d", r.Status, len(r.Records), r.NextBeginOffset)
	}
	r = s.GetMessages("T", 1, 0, 32, 0, func(int64) bool { return false })
	if r.Status != NoMatchedMessage || r.NextBeginOffset != 10 {
		t.Fatalf("none matched: %v next %d", r.Status, r.NextBeginOffset)
	}
	r = s.GetMessages("T", 1, 0, 32, 1, nil)
	if r.Status != Found || len(r.Records) != 1 || r.NextBeginOffset != 1 {
		t.Fatalf("maxBytes: %v %d", r.Status, len(r.Records))
	}
	cases := []struct {
		topic  string
		qid    int32
		offset int64
		status GetStatus
		next   int64
	}{
		{"nope", 0, 0, NoMatchedLogicQueue, 0},
		{"T", 1, 10, OffsetOverflowOne, 10},
		{"T", 1, 11, OffsetOverflowBadly, 10},
	}
	for _, c := range cases {
		r := s.GetMessages(c.topic, c.qid, c.offset, 32, 0, nil)
		if r.Status != c.status || r.NextBeginOffset != c.next {
			t.Errorf("%s-%d@%d: %v next %d, want %v next %d", c.topic, c.qid, c.offset, r.Status, r.NextBeginOffset, c.status, c.next)
		}
	}
	if s.MaxOffset("T", 1) != 10 || s.MinOffset("T", 1) != 0 || s.MaxOffset("T", 2) != 0 {
		t.Fatal("min/max offsets")
	}
	checkInvariants(t, s)
}

func TestAppendBatchContiguousAcrossFiles(t *testing.T) {
	s := openT(t, testConfig(vfs.NewMemFS()))
	defer s.Close()
	body := strings.Repeat("x", 1000)
	var total int
	for i := 0; i < 40; i++ {
		batch := [][]byte{rec(t, "B", 0, body, "", ""), rec(t, "B", 0, body, "", ""), rec(t, "C", 2, body, "", "")}
		res := appendT(t, s, batch...)
		if res[1].PhysicalOffset != res[0].PhysicalOffset+int64(res[0].Size) || res[2].PhysicalOffset != res[1].PhysicalOffset+int64(res[1].Size) {
			t.Fatalf("batch not contiguous: %+v", res)
		}
		if res[0].PhysicalOffset/(64<<10) != res[2].PhysicalOffset/(64<<10) {
			t.Fatalf("batch spans files: %+v", res)
		}
		if res[1].QueueOffset != res[0].QueueOffset+1 || res[2].QueueOffset != int64(i) {
			t.Fatalf("queue offsets %+v", res)
		}
		total += 3
	}
	if s.CommitLogMaxOffset() <= 64<<10 {
		t.Fatal("expected several commitlog files")
	}
	names, _ := s.fs.ReadDir("/store/commitlog")
	if names[0] != "00000000000000000000" || names[1] != "00000000000000065536" {
		t.Fatalf("file names %v", names)
	}
	c := checkInvariants(t, s)
	if c["B-0"] != 80 || c["C-2"] != 40 {
		t.Fatalf("counts %v", c)
	}
	// consume-queue files roll every 100 units
	if names, _ := s.fs.ReadDir("/store/consumequeue/B/0"); len(names) != 1 {
		t.Fatalf("cq files %v", names)
	}
	r := s.GetMessages("B", 0, 0, 1000, 0, nil)
	if len(r.Records) != 80 || r.NextBeginOffset != 80 {
		t.Fatalf("read back %d next %d", len(r.Records), r.NextBeginOffset)
	}
}

func TestConsumeQueueFileRoll(t *testing.T) {
	s := openT(t, testConfig(vfs.NewMemFS()))
	defer s.Close()
	for i := 0; i < 250; i++ {
		appendT(t, s, rec(t, "R", 0, "b", "", ""))
	}
	names, _ := s.fs.ReadDir("/store/consumequeue/R/0")
	if strings.Join(names, ",") != "00000000000000000000,00000000000000002000,00000000000000004000" {
		t.Fatalf("cq files %v", names)
	}
	// one pull never crosses a consume-queue file
	r := s.GetMessages("R", 0, 90, 32, 0, nil)
	if len(r.Records) != 10 || r.NextBeginOffset != 100 {
		t.Fatalf("got %d next %d", len(r.Records), r.NextBeginOffset)
	}
	checkInvariants(t, s)
}

func TestTransactionTypesNotDispatched(t *testing.T) {
	s := openT(t, testConfig(vfs.NewMemFS()))
	defer s.Close()
	mk := func(tt int32, key string) []byte {
		b, _ := message.EncodeRecord(&message.Message{Topic: "TX", SysFlag: tt, Body: []byte("x"), Properties: message.FormatProperties(map[string]string{"KEYS": key})})
		return b
	}
	res := appendT(t, s, mk(message.TransactionPreparedType, "p"), mk(message.TransactionRollbackType, "r"), mk(message.TransactionCommitType, "c"), mk(0, "n"))
	if res[0].QueueOffset != 0 || res[1].QueueOffset != 0 || res[2].QueueOffset != 0 || res[3].QueueOffset != 1 {
		t.Fatalf("offsets %+v", res)
	}
	if s.MaxOffset("TX", 0) != 2 {
		t.Fatalf("max %d", s.MaxOffset("TX", 0))
	}
	for key, want := range map[string]int{"p": 1, "r": 0, "c": 1, "n": 1} {
		got, _, _ := s.QueryByKey("TX", key, 10, 0, 1<<62)
		if len(got) != want {
			t.Errorf("key %s: %d results, want %d", key, len(got), want)
		}
	}
	checkInvariants(t, s)
}

func TestQueryByKeyAcrossIndexFiles(t *testing.T) {
	s := openT(t, testConfig(vfs.NewMemFS()))
	defer s.Close()
	var want []int64
	for i := 0; i < 300; i++ { // 200-entry index files: several files
		keys := fmt.Sprintf("k%d common", i)
		res := appendT(t, s, rec(t, "Q", 0, "b", "", keys))
		want = append(want, res[0].PhysicalOffset)
	}
	names, _ := s.fs.ReadDir("/store/index")
	if len(names) < 3 {
		t.Fatalf("index files %v", names)
	}
	got, _, lastPhys := s.QueryByKey("Q", "k150", 10, 0, 1<<62)
	if len(got) != 1 || lastPhys != want[299] {
		t.Fatalf("k150: %d results, lastPhys %d", len(got), lastPhys)
	}
	if v, _ := message.ParseView(got[0]); v.PhysicalOffset() != want[150] {
		t.Fatalf("k150 at %d", v.PhysicalOffset())
	}
	got, _, _ = s.QueryByKey("Q", "common", 50, 0, 1<<62)
	if len(got) != 50 {
		t.Fatalf("common: %d", len(got))
	}
	if v, _ := message.ParseView(got[0]); v.PhysicalOffset() != want[299] {
		t.Fatal("not newest first")
	}
	if got, _, _ := s.QueryByKey("Other", "common", 50, 0, 1<<62); len(got) != 0 {
		t.Fatal("other topic matched")
	}
	if got, _, _ := s.QueryByKey("Q", "common", 50, 0, 0); len(got) != 0 {
		t.Fatal("time range ignored")
	}
}

func TestTimestampsAndSearch(t *testing.T) {
	cfg := testConfig(vfs.NewMemFS())
	s := openT(t, cfg)
	defer s.Close()
	if s.EarliestMsgStoreTime("S", 0) != -1 {
		t.Fatal("earliest of unknown queue")
	}
	for i := 0; i < 10; i++ {
		m := &message.Message{Topic: "S", StoreTimestamp: int64(1000 * (i + 1)), Body: []byte("x")}
		b, _ := message.EncodeRecord(m)
		appendT(t, s, b)
	}
	if s.EarliestMsgStoreTime("S", 0) != 1000 {
		t.Fatal("earliest")
	}
	for _, c := range []struct {
		ts    int64
		upper bool
		want  int64
	}{{500, false, 0}, {1000, false, 0}, {1500, false, 1}, {99999, false, 10}, {500, true, 0}, {1000, true, 0}, {1500, true, 0}, {2000, true, 1}, {99999, true, 9}} {
		if got := s.SearchOffsetByTimestamp("S", 0, c.ts, c.upper); got != c.want {
			t.Errorf("search %d upper=%v: %d, want %d", c.ts, c.upper, got, c.want)
		}
	}
}

func TestAppendRejectsIllegal(t *testing.T) {
	s := openT(t, testConfig(vfs.NewMemFS()))
	defer s.Close()
	good := rec(t, "T", 0, "x", "", "")
	bad := append([]byte(nil), good...)
	bad[len(bad)-20] ^= 0xFF // structure ok? flip in body/topic area
	bad2 := append([]byte(nil), good...)
	bad2[88] ^= 1 // body byte: CRC mismatch
	big := rec(t, "T", 0, strings.Repeat("x", 17<<10), "", "")
	for name, r := range map[string][]byte{"crc": bad2, "truncated": good[:50], "trailing": append(append([]byte(nil), good...), 0), "too big": big} {
		if _, err := s.Append(context.Background(), [][]byte{good, r}); !errors.Is(err, ErrMessageIllegal) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if s.CommitLogMaxOffset() != 0 {
		t.Fatal("illegal batch partly appended")
	}
}

func TestReopenContinues(t *testing.T) {
	fs := vfs.NewMemFS()
	s := openT(t, testConfig(fs))
	for i := 0; i < 5; i++ {
		appendT(t, s, rec(t, "T", 0, "x", "", fmt.Sprintf("key%d", i)))
	}
	if _, err := Open(testConfig(fs)); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(context.Background(), [][]byte{rec(t, "T", 0, "x", "", "")}); !errors.Is(err, ErrStoreClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if _, err := fs.Stat("/store/abort"); err == nil {
		t.Fatal("abort file left after clean close")
	}
	s = openT(t, testConfig(fs))
	defer s.Close()
	res := appendT(t, s, rec(t, "T", 0, "x", "", ""))
	if res[0].QueueOffset != 5 {
		t.Fatalf("after reopen offset %d", res[0].QueueOffset)
	}
	if got, _, _ := s.QueryByKey("T", "key3", 5, 0, 1<<62); len(got) != 1 {
		t.Fatal("index lost over reopen")
	}
	checkInvariants(t, s)
}

func TestDeleteTopic(t *testing.T) {
	s := openT(t, testConfig(vfs.NewMemFS()))
	defer s.Close()
	appendT(t, s, rec(t, "D", 0, "x", "", ""), rec(t, "D", 1, "x", "", ""), rec(t, "E", 0, "x", "", ""))
	if got := s.Topics(); strings.Join(got, ",") != "D,E" {
		t.Fatalf("topics %v", got)
	}
	if got := s.QueueIDs("D"); len(got) != 2 {
		t.Fatalf("queues %v", got)
	}
	if err := s.DeleteTopic("D"); err != nil {
		t.Fatal(err)
	}
	if s.GetMessages("D", 0, 0, 1, 0, nil).Status != NoMatchedLogicQueue {
		t.Fatal("deleted topic still readable")
	}
	if res := appendT(t, s, rec(t, "D", 0, "x", "", "")); res[0].QueueOffset != 0 {
		t.Fatal("recreated topic does not restart at 0")
	}
}

func TestReadCommitLog(t *testing.T) {
	s := openT(t, testConfig(vfs.NewMemFS()))
	defer s.Close()
	res := appendT(t, s, rec(t, "T", 0, "x", "", ""), rec(t, "T", 0, "y", "", ""))
	b, err := s.ReadCommitLog(0, 1<<20)
	if err != nil || int64(len(b)) != s.CommitLogMaxOffset() {
		t.Fatalf("read %d bytes, %v", len(b), err)
	}
	ms, err := message.DecodeRecords(b)
	if err != nil || len(ms) != 2 || ms[1].PhysicalOffset != res[1].PhysicalOffset {
		t.Fatalf("decode raw: %v", err)
	}
}

// A slave fed with ReadCommitLog chunks through AppendRaw ends byte-identical to its master,
// with the same consume queues.
func TestAppendRawReplicates(t *testing.T) {
	master := openT(t, testConfig(vfs.NewMemFS()))
	defer master.Close()
	slave := openT(t, testConfig(vfs.NewMemFS()))
	defer slave.Close()
	for i := 0; i < 60; i++ {
		appendT(t, master, rec(t, "H", int32(i%2), strings.Repeat("z", 2500), "", fmt.Sprintf("k%d", i)))
	}
	for off := slave.CommitLogMaxOffset(); off < master.CommitLogMaxOffset(); off = slave.CommitLogMaxOffset() {
		chunk, err := master.ReadCommitLog(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if err := slave.AppendRaw(off, chunk); err != nil {
			t.Fatalf("append raw at %d: %v", off, err)
		}
	}
	a, _ := master.ReadCommitLog(0, 1<<30)
	b, _ := slave.ReadCommitLog(0, 1<<30)
	if !bytes.Equal(a, b) {
		t.Fatal("first files differ")
	}
	if master.CommitLogMaxOffset() != slave.CommitLogMaxOffset() || slave.MaxOffset("H", 1) != 30 {
		t.Fatalf("slave end %d max %d", slave.CommitLogMaxOffset(), slave.MaxOffset("H", 1))
	}
	if got, _, _ := slave.QueryByKey("H", "k7", 5, 0, 1<<62); len(got) != 1 {
		t.Fatal("slave index")
	}
	checkInvariants(t, slave)
	if err := slave.AppendRaw(0, a[:200]); !errors.Is(err, ErrOffsetMismatch) {
		t.Fatalf("wrong offset: %v", err)
	}
}

// The append path reads each record's properties once (tags code, index keys, WAIT), for
// Append and for the replicated batch alike.
func TestAppendScansPropertiesOnce(t *testing.T) {
	s := openT(t, testConfig(vfs.NewMemFS()))
	defer s.Close()
	r := rec(t, "T", 0, "body", "tg", "k1 k2")
	appendT(t, s, r) // creates the queue and index files outside the count
	before := message.PropertyScans()
	appendT(t, s, r)
	if n := message.PropertyScans() - before; n != 1 {
		t.Fatalf("Append of one record scanned its properties %d times, want 1", n)
	}
	before = message.PropertyScans()
	if _, err := s.AppendReplicatedBatch([][][]byte{{r, r}, {r}}); err != nil {
		t.Fatal(err)
	}
	if n := message.PropertyScans() - before; n != 3 {
		t.Fatalf("a replicated batch of 3 records scanned properties %d times, want 3", n)
	}
}
