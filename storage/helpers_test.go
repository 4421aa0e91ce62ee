package storage

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"rocketraft/message"
	"rocketraft/storage/vfs"
)

// testConfig is a small store on fs: 64 KiB commitlog files, 100-unit consume-queue files,
// a 64-slot / 200-entry index, SYNC_FLUSH.
func testConfig(fs vfs.FS) Config {
	cfg := DefaultConfig("/store")
	cfg.FS = fs
	cfg.MappedFileSizeCommitLog = 64 << 10
	cfg.MappedFileSizeConsumeQueue = 100 * ConsumeQueueUnitSize
	cfg.MaxHashSlotNum = 64
	cfg.MaxIndexNum = 200
	cfg.FlushDiskType = SyncFlush
	cfg.MaxMessageSize = 16 << 10
	return cfg
}

func openT(t testing.TB, cfg Config) *Store {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

var testStoreHost = netip.MustParseAddrPort("127.0.0.1:10911")

// rec encodes a record for topic/qid with a body and optional tags and keys.
func rec(t testing.TB, topic string, qid int32, body string, tags, keys string) []byte {
	t.Helper()
	props := map[string]string{}
	if tags != "" {
		props[message.PropertyTags] = tags
	}
	if keys != "" {
		props[message.PropertyKeys] = keys
	}
	b, err := message.EncodeRecord(&message.Message{
		Topic: topic, QueueID: qid, BornTimestamp: 1, Body: []byte(body),
		BornHost: netip.MustParseAddrPort("10.0.0.1:1234"), StoreHost: testStoreHost,
		Properties: message.FormatProperties(props),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func appendT(t testing.TB, s *Store, records ...[]byte) []AppendResult {
	t.Helper()
	res, err := s.Append(context.Background(), records)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return res
}

// checkInvariants verifies that the consume queues and the commitlog agree exactly: every unit
// points at a record carrying that queue offset, and every dispatchable record in the
// commitlog has exactly its unit (no duplicate, no hole). It returns the records per queue.
func checkInvariants(t testing.TB, s *Store) map[string]int64 {
	t.Helper()
	counts := checkQueues(t, s)
	checkCommitLogDispatched(t, s, counts)
	return counts
}

// checkQueues verifies that every consume-queue unit points at a record carrying that queue
// offset, topic and queue id, in increasing commitlog order, and returns each queue's max.
func checkQueues(t testing.TB, s *Store) map[string]int64 {
	t.Helper()
	counts := map[string]int64{}
	for _, q := range s.allQueues() {
		key := fmt.Sprintf("%s-%d", q.topic, q.qid)
		prev := int64(-1)
		for i := q.min.Load(); i < q.max.Load(); i++ {
			u, ok := q.unit(i)
			if !ok {
				t.Fatalf("%s: unit %d unreadable", key, i)
			}
			if u.phys <= prev {
				t.Fatalf("%s: unit %d phys %d not after %d", key, i, u.phys, prev)
			}
			prev = u.phys
			b, err := s.ReadRecord(u.phys)
			if err != nil {
				t.Fatalf("%s: unit %d: %v", key, i, err)
			}
			v, _ := message.ParseView(b)
			if v.QueueOffset() != i || string(v.Topic()) != q.topic || v.QueueID() != q.qid || int32(v.Size()) != u.size {
				t.Fatalf("%s: unit %d points at record with offset %d topic %s qid %d", key, i, v.QueueOffset(), v.Topic(), v.QueueID())
			}
		}
		counts[key] = q.max.Load()
	}
	return counts
}

// checkCommitLogDispatched verifies that every dispatchable record in the commitlog has its
// unit: no record beyond its queue's end, and offsets dense per queue.
func checkCommitLogDispatched(t testing.TB, s *Store, counts map[string]int64) {
	t.Helper()
	clMin := s.cl.minOffset()
	seen := map[string]int64{}
	start := clMin
	_, err := s.cl.walk(start, func(phys int64, v message.View) error {
		if !message.IsDispatchable(v.SysFlag()) {
			return nil
		}
		key := fmt.Sprintf("%s-%d", v.Topic(), v.QueueID())
		q := s.queueByName(string(v.Topic()), v.QueueID())
		if q == nil {
			t.Fatalf("record at %d for %s: no queue", phys, key)
		}
		if v.QueueOffset() >= q.max.Load() {
			t.Fatalf("record at %d for %s has offset %d >= max %d (hole/lost unit)", phys, key, v.QueueOffset(), q.max.Load())
		}
		if u, ok := q.unit(v.QueueOffset()); ok && v.QueueOffset() >= q.min.Load() && u.phys != phys {
			t.Fatalf("record at %d for %s offset %d: unit says %d", phys, key, v.QueueOffset(), u.phys)
		}
		if last, ok := seen[key]; ok && v.QueueOffset() != last+1 {
			t.Fatalf("record at %d for %s offset %d after %d: not dense", phys, key, v.QueueOffset(), last)
		}
		seen[key] = v.QueueOffset()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key, last := range seen {
		if counts[key] != last+1 {
			t.Fatalf("%s: queue max %d, last record offset %d", key, counts[key], last)
		}
	}
}

// eventually polls cond until it returns nil or timeout passes.
func eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", timeout, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
