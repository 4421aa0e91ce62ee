package fsm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/storage"
	"rocketraft/storage/vfs"
)

const root = "/data/store"

// storeConfig is a small store: 64 KiB commitlog files, 100-unit consume-queue files.
func storeConfig(fs vfs.FS) storage.Config { return storeConfigAt(fs, root) }

func storeConfigAt(fs vfs.FS, root string) storage.Config {
	cfg := storage.DefaultConfig(root)
	cfg.FS = fs
	cfg.MappedFileSizeCommitLog = 64 << 10
	cfg.MappedFileSizeConsumeQueue = 100 * storage.ConsumeQueueUnitSize
	cfg.MaxHashSlotNum = 64
	cfg.MaxIndexNum = 200
	cfg.MaxMessageSize = 16 << 10
	cfg.FlushIntervalCommitLog = time.Hour // tests decide what is synced
	cfg.FlushIntervalConsumeQueue = time.Hour
	return cfg
}

func newFSM(t testing.TB, fs vfs.FS, meta MetaApplier) *FSM {
	t.Helper()
	f, err := New(Config{Store: storeConfig(fs), Meta: meta})
	if err != nil {
		t.Fatalf("new fsm: %v", err)
	}
	return f
}

// rec encodes a record as a leader would: store time and hosts stamped.
func rec(t testing.TB, topic string, qid int32, body string, ts int64) []byte {
	t.Helper()
	b, err := message.EncodeRecord(&message.Message{
		Topic: topic, QueueID: qid, BornTimestamp: ts - 1, StoreTimestamp: ts, Body: []byte(body),
		BornHost: netip.MustParseAddrPort("10.0.0.1:1234"), StoreHost: netip.MustParseAddrPort("10.0.0.9:10911"),
		Properties: message.FormatProperties(map[string]string{message.PropertyKeys: fmt.Sprintf("key%d", ts), message.PropertyTags: "tg"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// workload returns n entries from index 1: mostly message entries (several appends, some
// batches), with metadata entries mixed in, one topic deletion, and records for it afterwards.
func workload(t testing.TB, n int) []*raft.Log {
	var logs []*raft.Log
	for i := 1; i <= n; i++ {
		l := &raft.Log{Index: uint64(i), Term: uint64(1 + i/40), Type: raft.LogCommand}
		switch {
		case i == n/2:
			l.Data = mustMeta(t, &MetaOp{Op: OpDeleteTopic, Name: "B", Now: int64(i)})
		case i%7 == 0:
			l.Data = mustMeta(t, &MetaOp{Op: OpPutTopic, Now: int64(1000 + i), Topic: &protocol.TopicConfig{TopicName: fmt.Sprintf("T%d", i%3), ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}})
		case i%11 == 0:
			l.Data = mustMeta(t, &MetaOp{Op: OpCommitOffsets, Now: int64(1000 + i), Offsets: []OffsetCommit{{Group: "g", Topic: "A", QueueID: int32(i % 2), Offset: int64(i)}, {Group: "g2", Topic: "B", QueueID: 0, Offset: int64(i * 2)}}})
		default:
			var appends [][][]byte
			for a := 0; a < 1+i%4; a++ {
				var recs [][]byte
				for r := 0; r < 1+(i+a)%3; r++ {
					topic := []string{"A", "B"}[(i+a+r)%2]
					recs = append(recs, rec(t, topic, int32((i+r)%3), strings.Repeat(string(rune('a'+i%26)), 200+(i*31+a*7)%900), int64(1_700_000_000_000+i)))
				}
				appends = append(appends, recs)
			}
			l.Data = EncodeMessages(appends)
		}
		logs = append(logs, l)
	}
	return logs
}

func mustMeta(t testing.TB, op *MetaOp) []byte {
	b, err := EncodeMetadata(op)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func applyAll(f *FSM, logs []*raft.Log) []interface{} {
	var out []interface{}
	for _, l := range logs {
		out = append(out, f.Apply(l))
	}
	return out
}

// commitlogImage returns every commitlog file's current bytes.
func commitlogImage(t testing.TB, fs *vfs.MemFS) map[string][]byte {
	t.Helper()
	dir := root + "/commitlog"
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

func sameImage(t testing.TB, what string, a, b map[string][]byte) {
	t.Helper()
	if len(a) != len(b) || len(a) == 0 {
		t.Fatalf("%s: %d files vs %d", what, len(a), len(b))
	}
	for n, x := range a {
		if !bytes.Equal(x, b[n]) {
			t.Fatalf("%s: commitlog file %s differs", what, n)
		}
	}
}

// queueState lists every queue's max offset.
func queueState(f *FSM) string {
	st, release, err := f.Acquire(context.Background())
	if err != nil {
		return "acquire: " + err.Error()
	}
	defer release()
	var sb strings.Builder
	for _, topic := range st.Topics() {
		for _, q := range st.QueueIDs(topic) {
			fmt.Fprintf(&sb, "%s-%d:%d ", topic, q, st.MaxOffset(topic, q))
		}
	}
	return sb.String()
}

// fakeMeta is a MetaApplier whose state includes a mutation counter, so applying an operation
// twice (or skipping one) shows.
type fakeMeta struct {
	State struct {
		Topics  map[string]*protocol.TopicConfig
		Offsets map[string]int64
		Groups  map[string]bool
		Counter int64
		LastNow int64
	}
}

func newFakeMeta() *fakeMeta { m := &fakeMeta{}; m.reset(); return m }

func (m *fakeMeta) reset() {
	m.State.Topics, m.State.Offsets, m.State.Groups = map[string]*protocol.TopicConfig{}, map[string]int64{}, map[string]bool{}
	m.State.Counter, m.State.LastNow = 0, 0
}

func (m *fakeMeta) ApplyMeta(op *MetaOp) error {
	m.State.Counter++
	m.State.LastNow = op.Now
	switch op.Op {
	case OpPutTopic:
		m.State.Topics[op.Topic.TopicName] = op.Topic
	case OpDeleteTopic:
		delete(m.State.Topics, op.Name)
	case OpPutGroup:
		m.State.Groups[op.Group.GroupName] = true
	case OpDeleteGroup:
		delete(m.State.Groups, op.Name)
	case OpCommitOffsets:
		for _, o := range op.Offsets {
			m.State.Offsets[fmt.Sprintf("%s@%s@%d", o.Topic, o.Group, o.QueueID)] = o.Offset
		}
	}
	return nil
}

func (m *fakeMeta) SnapshotMeta() ([]MetaFile, error) {
	b, err := json.Marshal(m.State)
	return []MetaFile{{Name: "state.json", Data: b}}, err
}

func (m *fakeMeta) RestoreMeta(files []MetaFile) error {
	m.reset()
	for _, f := range files {
		if err := json.Unmarshal(f.Data, &m.State); err != nil {
			return err
		}
	}
	return nil
}

func (m *fakeMeta) dump() string {
	fs, _ := m.SnapshotMeta()
	return string(fs[0].Data)
}

// memSink is a raft.SnapshotSink into memory.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { s.closed = true; return nil }

func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	if !sink.closed || sink.cancelled {
		t.Fatal("sink not closed")
	}
	return expand(t, f, sink.Bytes())
}

// expand is what a node's snapshot store hands Raft for a persisted snapshot: the full stream,
// whose length must be the one ExpandSnapshot announces.
func expand(t testing.TB, f *FSM, stored []byte) []byte {
	t.Helper()
	rc, size, err := f.ExpandSnapshot(reader(stored), int64(len(stored)))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	full, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(full)) != size {
		t.Fatalf("expanded snapshot has %d bytes, ExpandSnapshot announced %d", len(full), size)
	}
	return full
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

func reader(b []byte) nopCloser { return nopCloser{bytes.NewReader(b)} }

func sortedKeys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func mustPanic(t *testing.T, what string, fn func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatalf("%s: no panic", what)
		}
	}()
	fn()
}

// eventually waits until cond returns nil, failing the test with its last error after timeout.
func eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(time.Millisecond)
	}
}
