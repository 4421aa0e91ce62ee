package broker

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/clients"
	"rocketraft/broker/meta"
	"rocketraft/config"
	"rocketraft/fsm"
	"rocketraft/protocol"
	"rocketraft/storage"
)

// metaNode is what the metadata tables of one node are made of, wired as New wires them:
// configuration, the tables in a directory, POP's table and a classic place without a store
// (these tests change no consume queues). The field names are Broker's.
type metaNode struct {
	cfg          *config.Broker
	logger       hclog.Logger
	reg          *registrar
	clients      *clients.Manager
	topics       *meta.Topics
	groups       *meta.Groups
	offsets      *meta.Offsets
	delayOffsets *meta.DelayOffsets
	stats        *stats
	pop          *popService
	tables       *tables
	place        place
}

// acquireStore is a store-less node's acquire: nothing to read.
func (n *metaNode) acquireStore() (*storage.Store, func(), error) { return n.place.acquire() }

// metaBroker is a metaNode over tables in dir.
func metaBroker(t *testing.T, dir string) *metaNode {
	t.Helper()
	cfg := config.NewBroker()
	cfg.BrokerClusterName, cfg.BrokerName = "C", "B"
	b := &metaNode{cfg: cfg, logger: hclog.NewNullLogger(), reg: newRegistrar(), clients: clients.NewManager(clients.Config{}), stats: newStats()}
	tb := &tables{cfg: cfg, logger: b.logger, clients: b.clients}
	openTestMeta(t, dir, tb)
	b.topics, b.groups, b.offsets, b.delayOffsets = tb.topics, tb.groups, tb.offsets, tb.delays
	var err error
	if b.pop, err = newPopService(popDeps{cfg: cfg, topics: b.topics, stats: b.stats, acquire: b.acquireStore}, dir, false); err != nil {
		t.Fatal(err)
	}
	tb.popTable, tb.applyPop, tb.topicsChanged = b.pop.table, b.pop.apply, b.reg.trigger
	b.tables = tb
	b.place = &classicPlace{cfg: cfg, apply: b.tables.applyChange, offsets: b.offsets, delays: b.delayOffsets, logger: b.logger}
	b.tables.place = b.place
	b.pop.popDeps = brokerPopDeps(b)
	return b
}

type metaState struct {
	Topics  protocol.TopicConfigSerializeWrapper
	Groups  protocol.SubscriptionGroupWrapper
	Offsets protocol.ConsumerOffsetSerializeWrapper
	Locks   []clients.LockRecord
}

func stateOf(b *metaNode) metaState {
	return metaState{b.topics.Wrapper(), b.groups.Wrapper(), b.offsets.Wrapper(), b.clients.LockRecords()}
}

func topicCfg(name string, queues int32) *protocol.TopicConfig {
	tc := protocol.NewTopicConfig(name)
	tc.ReadQueueNums, tc.WriteQueueNums = queues, queues
	return tc
}

// Apply ops -> snapshot -> restore into fresh tables: identical tables (and DataVersions), the
// files saved; and the same ops applied on two replicas give identical tables.
func TestTablesRoundTrip(t *testing.T) {
	src := metaBroker(t, t.TempDir())
	a := src.tables
	if err := a.RestoreMeta(nil); err != nil { // what fsm.New does
		t.Fatal(err)
	}
	for _, name := range []string{"SELF_TEST_TOPIC", "TBW102", "B", "C"} {
		if src.topics.Get(name) == nil {
			t.Fatalf("system topic %s missing after RestoreMeta(nil)", name)
		}
	}
	g := protocol.NewSubscriptionGroupConfig("G1")
	g.RetryMaxTimes = 3
	mq0 := protocol.MessageQueue{BrokerName: "B", QueueID: 0, Topic: "T1"}
	mq1 := protocol.MessageQueue{BrokerName: "B", QueueID: 1, Topic: "T1"}
	ops := []*fsm.MetaOp{
		{Op: fsm.OpPutTopic, Now: 1000, Topic: topicCfg("T1", 8)},
		{Op: fsm.OpPutTopic, Now: 1001, Topic: topicCfg("T2", 2)},
		{Op: fsm.OpPutTopic, Now: 1002, Topic: topicCfg("T1", 4)}, // replaces
		{Op: fsm.OpPutGroup, Now: 1003, Group: g},
		{Op: fsm.OpPutGroup, Now: 1004, Group: protocol.NewSubscriptionGroupConfig("G2")},
		{Op: fsm.OpCommitOffsets, Now: 1005, Offsets: []fsm.OffsetCommit{
			{Group: "G1", Topic: "T1", QueueID: 0, Offset: 10}, {Group: "G1", Topic: "T1", QueueID: 3, Offset: 7},
			{Group: "G2", Topic: "T2", QueueID: 1, Offset: 5}, {Group: "G1", Topic: "T2", QueueID: 0, Offset: 1},
		}},
		{Op: fsm.OpCommitOffsets, Now: 1006, Offsets: []fsm.OffsetCommit{{Group: "G1", Topic: "T1", QueueID: 0, Offset: 12}}},
		{Op: fsm.OpDeleteTopic, Now: 1007, Name: "T2"},   // and its offsets
		{Op: fsm.OpDeleteGroup, Now: 1008, Name: "G2"},   // and its offsets
		{Op: fsm.OpDeleteGroup, Now: 1009, Name: "nope"}, // absent: no change
		{Op: fsm.OpLockQueues, Now: 1010, Lock: &fsm.QueueLock{Group: "G1", ClientID: "c1", Queues: []protocol.MessageQueue{mq0, mq1}}},
		{Op: fsm.OpLockQueues, Now: 1011, Lock: &fsm.QueueLock{Group: "G1", ClientID: "c2", Queues: []protocol.MessageQueue{mq1}}},   // the leader's decision: takes it
		{Op: fsm.OpUnlockQueues, Now: 1012, Lock: &fsm.QueueLock{Group: "G1", ClientID: "c2", Queues: []protocol.MessageQueue{mq0}}}, // not c2's: no change
	}
	replica := metaBroker(t, t.TempDir())
	if err := replica.tables.RestoreMeta(nil); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if err := a.ApplyMeta(op); err != nil {
			t.Fatalf("%s: %v", op.Op, err)
		}
		if err := replica.tables.ApplyMeta(op); err != nil {
			t.Fatal(err)
		}
	}
	if tc := src.topics.Get("T1"); tc == nil || tc.WriteQueueNums != 4 {
		t.Fatalf("T1 = %+v", tc)
	}
	if src.topics.Get("T2") != nil || src.groups.Get("G2") != nil || src.groups.Get("G1").RetryMaxTimes != 3 {
		t.Fatal("deletes or group config not applied")
	}
	if off, ok := src.offsets.Query("G1", "T1", 0); !ok || off != 12 {
		t.Fatalf("G1/T1/0 = %d %v", off, ok)
	}
	if _, ok := src.offsets.Query("G1", "T2", 0); ok {
		t.Fatal("offsets of a deleted topic survive")
	}
	wantLocks := []clients.LockRecord{{Group: "G1", ClientID: "c1", Queue: mq0, LastUpdate: 1010}, {Group: "G1", ClientID: "c2", Queue: mq1, LastUpdate: 1011}}
	if got := src.clients.LockRecords(); !reflect.DeepEqual(got, wantLocks) {
		t.Fatalf("locks %+v, want %+v", got, wantLocks)
	}
	if v := src.topics.DataVersion(); v.Timestamp != 1007 {
		t.Fatalf("topic data version %+v: not the last op's time", v)
	}
	// Replicas that applied the same ops agree, DataVersion counters and times included... once
	// they started from the same state: their start-up versions differ (local clock), so compare
	// the tables.
	sa, ra := stateOf(src), stateOf(replica)
	if !reflect.DeepEqual(sa.Topics.TopicConfigTable, ra.Topics.TopicConfigTable) || !reflect.DeepEqual(sa.Groups.SubscriptionGroupTable, ra.Groups.SubscriptionGroupTable) || !reflect.DeepEqual(sa.Offsets, ra.Offsets) {
		t.Fatal("two replicas applying the same ops differ")
	}

	files, err := a.SnapshotMeta()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dst := metaBroker(t, dir)
	dst.offsets.Commit("stale", "X", 0, 99) // restore replaces, never merges
	if err := dst.topics.Put(topicCfg("stale", 1)); err != nil {
		t.Fatal(err)
	}
	if err := dst.tables.RestoreMeta(files); err != nil {
		t.Fatal(err)
	}
	if want, got := stateOf(src), stateOf(dst); !reflect.DeepEqual(want, got) {
		t.Fatalf("restored tables differ:\nwant %+v\n got %+v", want, got)
	}
	// A second snapshot of the restored tables is byte-identical.
	again, err := dst.tables.SnapshotMeta()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(files, again) {
		t.Fatal("snapshot of the restored tables differs")
	}
	// Persistence semantics: topics and groups were saved by the restore, offsets by Persist.
	if err := dst.offsets.Persist(); err != nil {
		t.Fatal(err)
	}
	reopened := metaBroker(t, dir)
	want := stateOf(src)
	want.Locks = nil // queue locks live in Raft snapshots and entries only, never in config files
	if got := stateOf(reopened); !reflect.DeepEqual(want, got) {
		t.Fatalf("tables reopened from the restored files differ:\nwant %+v\n got %+v", want, got)
	}
}

func TestTablesRejects(t *testing.T) {
	b := metaBroker(t, t.TempDir())
	a := b.tables
	if err := a.ApplyMeta(&fsm.MetaOp{Op: "bogus", Now: 1}); err == nil {
		t.Fatal("unknown op accepted")
	}
	if err := a.RestoreMeta([]fsm.MetaFile{{Name: metaTopicsFile, Data: []byte("{")}}); err == nil {
		t.Fatal("a corrupt snapshot file restored")
	}
}

// fakeProposer records proposals; block, when set, holds each proposal until released.
type fakeProposer struct {
	mu      sync.Mutex
	entries [][]fsm.OffsetCommit
	block   chan struct{}
	entered chan struct{}
	err     error
}

func (p *fakeProposer) propose(ctx context.Context, offs []fsm.OffsetCommit) error {
	if p.entered != nil {
		p.entered <- struct{}{}
	}
	if p.block != nil {
		<-p.block
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.entries = append(p.entries, offs)
	return p.err
}

func (p *fakeProposer) got() [][]fsm.OffsetCommit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]fsm.OffsetCommit(nil), p.entries...)
}

func TestOffsetBatcherCoalesces(t *testing.T) {
	p := &fakeProposer{}
	ob := newOffsetBatcher(p.propose, time.Hour, 1000, nil) // flushes only on close here
	for i := range 100 {
		ob.commit("G", "T", int32(i%4), int64(i))
	}
	ob.commit("A", "T", 0, 5)
	if off, ok := ob.query("G", "T", 1); !ok || off != 97 {
		t.Fatalf("pending query = %d %v", off, ok)
	}
	if _, ok := ob.query("G", "T", 9); ok {
		t.Fatal("query of an uncommitted queue")
	}
	ob.close()
	entries := p.got()
	if len(entries) != 1 {
		t.Fatalf("%d entries, want 1", len(entries))
	}
	want := []fsm.OffsetCommit{{Group: "A", Topic: "T", QueueID: 0, Offset: 5},
		{Group: "G", Topic: "T", QueueID: 0, Offset: 96}, {Group: "G", Topic: "T", QueueID: 1, Offset: 97},
		{Group: "G", Topic: "T", QueueID: 2, Offset: 98}, {Group: "G", Topic: "T", QueueID: 3, Offset: 99}}
	if !reflect.DeepEqual(entries[0], want) {
		t.Fatalf("entry %+v, want %+v", entries[0], want)
	}
	if _, ok := ob.query("G", "T", 1); ok {
		t.Fatal("applied commits still overlay the table")
	}
}

// The interval flushes; a commit stays visible while its entry is in flight; commits made
// meanwhile go into the next entry; maxEntries distinct queues flush at once.
func TestOffsetBatcherIntervalInflightAndMax(t *testing.T) {
	p := &fakeProposer{block: make(chan struct{}), entered: make(chan struct{}, 10)}
	ob := newOffsetBatcher(p.propose, 20*time.Millisecond, 3, nil)
	defer func() { close(p.block); ob.close() }()
	ob.commit("G", "T", 0, 1)
	select {
	case <-p.entered:
	case <-time.After(2 * time.Second):
		t.Fatal("no flush after the interval")
	}
	if off, ok := ob.query("G", "T", 0); !ok || off != 1 {
		t.Fatalf("in-flight commit invisible: %d %v", off, ok)
	}
	ob.commit("G", "T", 0, 2) // newer than the in-flight one: pending wins
	if off, _ := ob.query("G", "T", 0); off != 2 {
		t.Fatalf("query = %d, want the newest 2", off)
	}
	p.block <- struct{}{} // release the first entry
	select {
	case <-p.entered: // the second (pending 2) goes next
	case <-time.After(2 * time.Second):
		t.Fatal("second entry not proposed")
	}
	p.block <- struct{}{}
	// Max entries: three distinct queues kick a flush long before a slow interval would.
	ob2p := &fakeProposer{entered: make(chan struct{}, 10)}
	ob2 := newOffsetBatcher(ob2p.propose, time.Hour, 3, nil)
	defer ob2.close()
	for q := range 3 {
		ob2.commit("G", "T", int32(q), 1)
	}
	select {
	case <-ob2p.entered:
	case <-time.After(2 * time.Second):
		t.Fatal("maxEntries did not flush")
	}
}

func TestOffsetBatcherFailureDrops(t *testing.T) {
	p := &fakeProposer{err: errors.New("not leader")}
	ob := newOffsetBatcher(p.propose, time.Hour, 100, nil)
	ob.commit("G", "T", 0, 1)
	ob.close()
	if len(p.got()) != 1 {
		t.Fatal("not proposed")
	}
	if _, ok := ob.query("G", "T", 0); ok {
		t.Fatal("a failed commit stays visible")
	}
	ob2 := newOffsetBatcher(p.propose, time.Hour, 100, nil)
	ob2.commit("G", "T", 0, 1)
	ob2.drop()
	if _, ok := ob2.query("G", "T", 0); ok {
		t.Fatal("drop kept a commit")
	}
	ob2.close()
}

// waitSettled: a query waits for the commits queued before it (kicking a flush long before a
// slow interval), gives up when its context ends while the entry is stuck, and is released by
// a drop (leadership lost) as well as by an applied entry.
func TestOffsetBatcherWaitSettled(t *testing.T) {
	p := &fakeProposer{block: make(chan struct{}), entered: make(chan struct{}, 10)}
	ob := newOffsetBatcher(p.propose, time.Hour, 1000, nil)
	defer ob.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !ob.waitSettled(ctx) {
		t.Fatal("nothing queued, yet the wait did not return at once")
	}
	ob.commit("G", "T", 0, 1)
	settled := make(chan bool, 1)
	go func() { settled <- ob.waitSettled(ctx) }()
	select {
	case <-p.entered: // the wait kicked a flush; the hour-long interval did not
	case <-time.After(3 * time.Second):
		t.Fatal("waitSettled did not kick a flush")
	}
	select {
	case <-settled:
		t.Fatal("waitSettled returned while the entry was still in flight")
	case <-time.After(50 * time.Millisecond):
	}
	ob.commit("G", "T", 0, 2) // queued after the waiter: not waited for
	p.block <- struct{}{}
	if ok := <-settled; !ok {
		t.Fatal("waitSettled gave up although the entry was applied")
	}

	// A stuck entry: the waiter (whose kick proposes the entry holding 2) gives up when its
	// context ends.
	short, cancelShort := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelShort()
	if ob.waitSettled(short) {
		t.Fatal("waitSettled reported settled while the entry was stuck")
	}
	select {
	case <-p.entered:
	case <-time.After(3 * time.Second):
		t.Fatal("the second wait did not kick a flush")
	}
	p.block <- struct{}{}

	// A drop settles what it discards.
	ob3 := newOffsetBatcher((&fakeProposer{}).propose, time.Hour, 1000, nil)
	defer ob3.close()
	ob3.commit("G", "T", 0, 1)
	ob3.drop()
	if !ob3.waitSettled(ctx) {
		t.Fatal("dropped commits never settled")
	}
}

// waitCommitted tells an applied commit from one whose entry failed or that a drop discarded.
func TestOffsetBatcherWaitCommitted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p := &fakeProposer{}
	ob := newOffsetBatcher(p.propose, time.Hour, 1000, nil)
	defer ob.close()
	if err := ob.waitCommitted(ctx, ob.commit("G", "T", 0, 1)); err != nil {
		t.Fatalf("applied commit: %v", err)
	}
	p.mu.Lock()
	p.err = errors.New("not leader")
	p.mu.Unlock()
	if err := ob.waitCommitted(ctx, ob.commit("G", "T", 0, 2)); !errors.Is(err, errOffsetNotReplicated) {
		t.Fatalf("commit whose entry failed: %v, want errOffsetNotReplicated", err)
	}
	p.mu.Lock()
	p.err = nil
	p.mu.Unlock()
	if err := ob.waitCommitted(ctx, ob.commit("G", "T", 0, 3)); err != nil {
		t.Fatalf("commit after a failed entry: %v", err)
	}
	seq := ob.commit("G", "T", 1, 4)
	ob.drop()
	if err := ob.waitCommitted(ctx, seq); !errors.Is(err, errOffsetNotReplicated) {
		t.Fatalf("dropped commit: %v, want errOffsetNotReplicated", err)
	}
	if got := len(p.got()); got != 3 {
		t.Fatalf("%d entries proposed, want 3 (the dropped commit never proposed)", got)
	}
}

// commitAhead compares against the queued value, then the one in flight, then the replicated
// table, and never queues a step back; commit still overwrites.
func TestOffsetBatcherCommitAhead(t *testing.T) {
	p := &fakeProposer{block: make(chan struct{}), entered: make(chan struct{}, 10)}
	ob := newOffsetBatcher(p.propose, time.Hour, 1000, nil)
	defer func() { close(p.block); ob.close() }()
	table := map[int32]int64{0: 50}
	replicated := func(q int32) func() (int64, bool) {
		return func() (int64, bool) { off, ok := table[q]; return off, ok }
	}
	if ob.commitAhead("G", "T", 0, 40, replicated(0)) {
		t.Fatal("queued 40 below the replicated 50")
	}
	if !ob.commitAhead("G", "T", 0, 60, replicated(0)) || !ob.commitAhead("G", "T", 1, 3, replicated(1)) {
		t.Fatal("refused a step forward (or a queue with no offset yet)")
	}
	if ob.commitAhead("G", "T", 0, 55, replicated(0)) {
		t.Fatal("queued 55 below the queued 60")
	}
	if seq, ok := ob.commitAheadSeq("G", "T", 0, 45, replicated(0)); ok || seq != 0 {
		t.Fatalf("commitAheadSeq queued 45 below the queued 60 (seq %d)", seq)
	}
	if seq, ok := ob.commitAheadSeq("G", "T", 1, 4, replicated(1)); !ok || seq == 0 {
		t.Fatalf("commitAheadSeq refused a step forward (seq %d, %v)", seq, ok)
	}
	ob.kickFlush()
	select {
	case <-p.entered: // 60 is now in flight, the table still says 50
	case <-time.After(2 * time.Second):
		t.Fatal("no flush")
	}
	if ob.commitAhead("G", "T", 0, 58, replicated(0)) {
		t.Fatal("queued 58 below the 60 in flight")
	}
	ob.commit("G", "T", 0, 10) // an explicit update (a reset) goes back
	if off, _ := ob.query("G", "T", 0); off != 10 {
		t.Fatalf("after an explicit commit of 10 the queued value is %d", off)
	}
	if !ob.commitAhead("G", "T", 0, 12, replicated(0)) {
		t.Fatal("refused 12 after the reset to 10")
	}
}
