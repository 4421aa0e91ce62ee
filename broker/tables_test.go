package broker

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/clients"
	"rocketraft/broker/meta"
	"rocketraft/broker/pop"
	"rocketraft/config"
	"rocketraft/dledger"
	"rocketraft/fsm"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// fakeCommit is one offset commit a fakePlace was asked to record.
type fakeCommit struct {
	c     fsm.OffsetCommit
	ahead bool
}

// fakePlace is a place for unit tests: changes are recorded and applied through apply at once
// (as a classic place does, without a store), offsets are recorded, and the decisions the
// types under test ask for are fields. The methods a test does not expect are the embedded nil
// interface's, so calling one panics.
type fakePlace struct {
	place

	apply      func(op *fsm.MetaOp) (saveErr, err error)
	follower   bool           // decides() is false
	since      time.Time      // leaderSince
	changeErr  error          // returned by change instead of applying
	commitErr  error          // returned by the wait of every commit
	acquireErr error          // returned by acquire when there is no store
	store      *storage.Store // what acquire returns (internal/storetest), if set

	mu      sync.Mutex
	ops     []*fsm.MetaOp
	commits []fakeCommit
	latest  map[offsetKey]int64
}

func (p *fakePlace) change(_ context.Context, op *fsm.MetaOp) error {
	p.mu.Lock()
	p.ops = append(p.ops, op)
	p.mu.Unlock()
	if p.changeErr != nil {
		return p.changeErr
	}
	if op.Now == 0 {
		op.Now = time.Now().UnixMilli()
	}
	saveErr, err := p.apply(op)
	return errors.Join(saveErr, err)
}

func (p *fakePlace) decides() bool          { return !p.follower }
func (p *fakePlace) leaderSince() time.Time { return p.since }

func (p *fakePlace) commitOffset(o fsm.OffsetCommit, ahead bool) func(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.commits = append(p.commits, fakeCommit{o, ahead})
	if p.latest == nil {
		p.latest = map[offsetKey]int64{}
	}
	p.latest[offsetKey{o.Group, o.Topic, o.QueueID}] = o.Offset
	err := p.commitErr
	return func(context.Context) error { return err }
}

func (p *fakePlace) latestOffset(group, topic string, qid int32) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	off, ok := p.latest[offsetKey{group, topic, qid}]
	return off, ok
}

func (p *fakePlace) queryOffset(group, topic string, qid int32) (int64, bool) {
	return p.latestOffset(group, topic, qid)
}

func (p *fakePlace) acquire() (*storage.Store, func(), error) {
	if p.store != nil {
		return p.store, noRelease, nil
	}
	if p.acquireErr == nil {
		panic("fakePlace holds no store")
	}
	return nil, noRelease, p.acquireErr
}

// opsOf returns the kinds of the changes p was asked to make, in order.
func (p *fakePlace) opsOf() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.ops))
	for _, op := range p.ops {
		out = append(out, op.Op)
	}
	return out
}

func (p *fakePlace) commitsMade() []fakeCommit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]fakeCommit(nil), p.commits...)
}

// testTables are tables over files in a temporary directory and a fakePlace, with no Broker:
// popOps and registers count what went to the POP applier and the registration trigger.
type testTables struct {
	*tables
	fp        *fakePlace
	popOps    []string
	registers int
}

// openTestMeta opens the topic, group, offset and delay tables of tb in dir.
func openTestMeta(t *testing.T, dir string, tb *tables) {
	t.Helper()
	var err error
	if tb.topics, err = meta.OpenTopics(filepath.Join(dir, "topics.json"), nil); err != nil {
		t.Fatal(err)
	}
	if tb.groups, err = meta.OpenGroups(filepath.Join(dir, "subscriptionGroup.json"), nil); err != nil {
		t.Fatal(err)
	}
	if tb.offsets, err = meta.OpenOffsets(filepath.Join(dir, "consumerOffset.json"), nil); err != nil {
		t.Fatal(err)
	}
	if tb.delays, err = meta.OpenDelayOffsets(filepath.Join(dir, "delayOffset.json"), nil); err != nil {
		t.Fatal(err)
	}
}

func newTestTables(t *testing.T) *testTables {
	t.Helper()
	dir := t.TempDir()
	cfg := config.NewBroker()
	cfg.BrokerClusterName, cfg.BrokerName = "C", "B"
	tt := &testTables{}
	tb := &tables{cfg: cfg, logger: hclog.NewNullLogger(), clients: clients.NewManager(clients.Config{}), popTable: pop.NewTable(),
		applyPop:      func(op *fsm.MetaOp) error { tt.popOps = append(tt.popOps, op.Op); return nil },
		topicsChanged: func() { tt.registers++ }}
	openTestMeta(t, dir, tb)
	tt.fp = &fakePlace{apply: tb.applyChange}
	tb.place = tt.fp
	tt.tables = tb
	return tt
}

// Each kind of change lands in its table; invalid changes are refused with meta.ErrInvalid or
// an error naming the op, and change nothing.
func TestTablesApplyChangeByKind(t *testing.T) {
	mq := protocol.MessageQueue{Topic: "T", BrokerName: "B", QueueID: 1}
	popKey := pop.Key{Group: "G", Topic: "T", QueueID: 0}
	tests := []struct {
		name      string
		op        *fsm.MetaOp
		invalid   bool                               // err wraps meta.ErrInvalid
		fails     bool                               // some other error
		registers int                                // topicsChanged calls
		has       map[string]bool                    // tablesHave after the op
		check     func(t *testing.T, tt *testTables) // the table after the op
	}{
		{name: "put topic", op: &fsm.MetaOp{Op: fsm.OpPutTopic, Now: 5, Topic: topicCfg("New", 3)}, registers: 1,
			check: func(t *testing.T, tt *testTables) {
				if tc := tt.topics.Get("New"); tc == nil || tc.WriteQueueNums != 3 {
					t.Fatalf("topic New = %+v", tc)
				}
				if v := tt.topics.DataVersion(); v.Timestamp != 5 {
					t.Fatalf("data version %+v: not the op's time", v)
				}
			}},
		{name: "put topic without config", op: &fsm.MetaOp{Op: fsm.OpPutTopic, Now: 5}, invalid: true},
		{name: "put topic without name", op: &fsm.MetaOp{Op: fsm.OpPutTopic, Now: 5, Topic: &protocol.TopicConfig{}}, invalid: true},
		{name: "delete topic", op: &fsm.MetaOp{Op: fsm.OpDeleteTopic, Now: 5, Name: "T"}, registers: 1,
			has: map[string]bool{"topic T": false, "offset G/T": false, "pop G/T": false, "offset G/U": true}},
		{name: "delete absent topic", op: &fsm.MetaOp{Op: fsm.OpDeleteTopic, Now: 5, Name: "Nope"}, registers: 0,
			has: map[string]bool{"topic T": true, "offset G/T": true}},
		{name: "put group", op: &fsm.MetaOp{Op: fsm.OpPutGroup, Now: 5, Group: protocol.NewSubscriptionGroupConfig("G2")},
			has: map[string]bool{"group G2": true}},
		{name: "put group without name", op: &fsm.MetaOp{Op: fsm.OpPutGroup, Now: 5, Group: &protocol.SubscriptionGroupConfig{}}, invalid: true},
		{name: "delete group", op: &fsm.MetaOp{Op: fsm.OpDeleteGroup, Now: 5, Name: "G"},
			has: map[string]bool{"group G": false, "offset G/U": false, "offset G/T": false, "pop G/T": false, "topic T": true}},
		{name: "delete group keeping offsets", op: &fsm.MetaOp{Op: fsm.OpDeleteGroup, Now: 5, Name: "G", KeepOffsets: true},
			has: map[string]bool{"group G": false, "offset G/U": true, "pop G/T": false}},
		{name: "commit offsets overwrite, even backwards", op: &fsm.MetaOp{Op: fsm.OpCommitOffsets, Now: 5, Offsets: []fsm.OffsetCommit{
			{Group: "G", Topic: "T", QueueID: 0, Offset: 3}, {Group: "G", Topic: "T", QueueID: 9, Offset: 1}}},
			check: func(t *testing.T, tt *testTables) {
				if off, _ := tt.offsets.Query("G", "T", 0); off != 3 {
					t.Fatalf("G/T/0 = %d, want 3 (moved back by the log)", off)
				}
				if off, ok := tt.offsets.Query("G", "T", 9); !ok || off != 1 {
					t.Fatalf("G/T/9 = %d %v", off, ok)
				}
			}},
		{name: "lock queues", op: &fsm.MetaOp{Op: fsm.OpLockQueues, Now: 5, Lock: &fsm.QueueLock{Group: "G", ClientID: "c1", Queues: []protocol.MessageQueue{mq}}},
			check: func(t *testing.T, tt *testTables) {
				want := []clients.LockRecord{{Group: "G", ClientID: "c1", Queue: mq, LastUpdate: 5}}
				if got := tt.clients.LockRecords(); !reflect.DeepEqual(got, want) {
					t.Fatalf("locks %+v, want %+v", got, want)
				}
			}},
		{name: "unlock queues not held", op: &fsm.MetaOp{Op: fsm.OpUnlockQueues, Now: 5, Lock: &fsm.QueueLock{Group: "G", ClientID: "c1", Queues: []protocol.MessageQueue{mq}}},
			check: func(t *testing.T, tt *testTables) {
				if got := tt.clients.LockRecords(); len(got) != 0 {
					t.Fatalf("locks %+v after an unlock of nothing", got)
				}
			}},
		{name: "POP op goes to the POP applier", op: &fsm.MetaOp{Op: fsm.OpPopAck, Now: 5},
			check: func(t *testing.T, tt *testTables) {
				if !reflect.DeepEqual(tt.popOps, []string{fsm.OpPopAck}) {
					t.Fatalf("POP applier got %v", tt.popOps)
				}
			}},
		{name: "unknown op", op: &fsm.MetaOp{Op: "bogus", Now: 5}, fails: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := newTestTables(t)
			// Every case starts from: topics T and U, group G, offsets of G on both topics and POP
			// state of G on T.
			for _, op := range []*fsm.MetaOp{
				{Op: fsm.OpPutTopic, Now: 1, Topic: topicCfg("T", 4)},
				{Op: fsm.OpPutTopic, Now: 1, Topic: topicCfg("U", 4)},
				{Op: fsm.OpPutGroup, Now: 1, Group: protocol.NewSubscriptionGroupConfig("G")},
				{Op: fsm.OpCommitOffsets, Now: 1, Offsets: []fsm.OffsetCommit{{Group: "G", Topic: "T", QueueID: 0, Offset: 10}, {Group: "G", Topic: "U", QueueID: 0, Offset: 7}}},
			} {
				if err := tt.ApplyMeta(op); err != nil {
					t.Fatal(err)
				}
			}
			tt.popTable.Pop(popKey, 0, 1, []int64{0}, 1, 1000)
			tt.registers = 0
			before := stateOfTables(tt.tables)
			_, err := tt.applyChange(tc.op)
			switch {
			case tc.invalid:
				if !errors.Is(err, meta.ErrInvalid) {
					t.Fatalf("err = %v, want meta.ErrInvalid", err)
				}
			case tc.fails:
				if err == nil {
					t.Fatal("accepted")
				}
			case err != nil:
				t.Fatal(err)
			}
			if tc.invalid || tc.fails {
				if after := stateOfTables(tt.tables); !reflect.DeepEqual(before, after) {
					t.Fatal("a refused change changed the tables")
				}
			}
			if tt.registers != tc.registers {
				t.Fatalf("topicsChanged called %d times, want %d", tt.registers, tc.registers)
			}
			for what, want := range tc.has {
				if got := tablesHave(tt, what); got != want {
					t.Errorf("has %q = %v, want %v", what, got, want)
				}
			}
			if tc.check != nil {
				tc.check(t, tt)
			}
		})
	}
}

// tablesHave reports whether the tables hold what: "topic NAME", "group NAME", "offset GROUP/TOPIC"
// (queue 0) or "pop GROUP/TOPIC" (queue 0's POP state).
func tablesHave(tt *testTables, what string) bool {
	kind, name, _ := strings.Cut(what, " ")
	group, topic, _ := strings.Cut(name, "/")
	switch kind {
	case "topic":
		return tt.topics.Get(name) != nil
	case "group":
		return tt.groups.Get(name) != nil
	case "offset":
		_, ok := tt.offsets.Query(group, topic, 0)
		return ok
	case "pop":
		return tt.popTable.Known(pop.Key{Group: group, Topic: topic, QueueID: 0})
	}
	panic("tablesHave: unknown kind " + kind)
}

// stateOfTables is stateOf for tables without a Broker.
func stateOfTables(tb *tables) metaState {
	return metaState{tb.topics.Wrapper(), tb.groups.Wrapper(), tb.offsets.Wrapper(), tb.clients.LockRecords()}
}

// A restore adds the broker's system topics, drops unknown files with a warning, tells the
// registration, and the delay progress is the fsm.ScheduleApplier's.
func TestTablesRestoreAndDelayProgress(t *testing.T) {
	tt := newTestTables(t)
	if err := tt.RestoreMeta([]fsm.MetaFile{{Name: "future.json", Data: []byte("?")}}); err != nil {
		t.Fatalf("an unknown snapshot file failed the restore: %v", err)
	}
	for _, tc := range tt.systemTopics() {
		if tt.topics.Get(tc.TopicName) == nil {
			t.Fatalf("system topic %s missing after a restore", tc.TopicName)
		}
	}
	if tt.registers != 1 {
		t.Fatalf("topicsChanged called %d times by a restore, want 1", tt.registers)
	}
	tt.ApplyDelayOffset(3, 42)
	if got := tt.DelayOffset(3); got != 42 {
		t.Fatalf("DelayOffset(3) = %d, want 42", got)
	}
	if got := tt.delays.Get(3); got != 42 {
		t.Fatalf("delay table holds %d, want 42", got)
	}
}

func TestTablesEnsureTopic(t *testing.T) {
	tt := newTestTables(t)
	if _, _, err := tt.ensureTopic(topicCfg("bad topic!", 1)); !errors.Is(err, message.ErrInvalidName) {
		t.Fatal("an invalid topic name was created")
	}
	got, created, err := tt.ensureTopic(topicCfg("T", 4))
	if err != nil || !created || got == nil || got.WriteQueueNums != 4 {
		t.Fatalf("ensureTopic = %+v %v %v", got, created, err)
	}
	// An existing topic is returned as it is: never overwritten, no change made.
	got, created, err = tt.ensureTopic(topicCfg("T", 1))
	if err != nil || created || got.WriteQueueNums != 4 {
		t.Fatalf("second ensureTopic = %+v %v %v", got, created, err)
	}
	if ops := tt.fp.opsOf(); !reflect.DeepEqual(ops, []string{fsm.OpPutTopic}) {
		t.Fatalf("changes %v, want one putTopic", ops)
	}
	// A node that does not decide creates nothing, but still answers an existing topic.
	tt.fp.follower = true
	if _, _, err := tt.ensureTopic(topicCfg("F", 1)); !errors.Is(err, errNotLeaderMeta) {
		t.Fatalf("follower: err = %v, want errNotLeaderMeta", err)
	}
	if got, _, err := tt.ensureTopic(topicCfg("T", 1)); err != nil || got == nil {
		t.Fatalf("follower, existing topic: %+v %v", got, err)
	}
	// A failed change is the caller's error.
	tt.fp.follower, tt.fp.changeErr = false, dledger.ErrNotLeader
	if _, created, err := tt.ensureTopic(topicCfg("L", 1)); !errors.Is(err, dledger.ErrNotLeader) || created {
		t.Fatalf("failed change: %v %v", created, err)
	}
}

// Concurrent creations of one topic make one change and all see the same config.
func TestTablesEnsureTopicConcurrentOnce(t *testing.T) {
	tt := newTestTables(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	creators := 0
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, created, err := tt.ensureTopic(topicCfg("Busy", int32(i+1)))
			if err != nil || got == nil {
				t.Errorf("ensureTopic: %+v %v", got, err)
				return
			}
			if created {
				mu.Lock()
				creators++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if creators != 1 || len(tt.fp.opsOf()) != 1 {
		t.Fatalf("%d creators, %d changes; want 1 and 1", creators, len(tt.fp.opsOf()))
	}
}

func TestTablesCreateTopicFromDefault(t *testing.T) {
	tt := newTestTables(t)
	if err := tt.RestoreMeta(nil); err != nil { // the system topics, TBW102 among them
		t.Fatal(err)
	}
	if _, _, err := tt.createTopicFromDefault("bad topic!", protocol.AutoCreateTopicKey, 4, 0); !errors.Is(err, message.ErrInvalidName) {
		t.Fatal("an invalid topic name was created")
	}
	got, created, err := tt.createTopicFromDefault("Auto", protocol.AutoCreateTopicKey, 2, 0)
	if err != nil || !created || got == nil || got.WriteQueueNums != 2 || got.ReadQueueNums != 2 {
		t.Fatalf("createTopicFromDefault = %+v %v %v", got, created, err)
	}
	if protocol.IsInherited(got.Perm) {
		t.Fatal("the created topic inherited the default's inherit bit")
	}
	// Existing: returned, nothing changed.
	before := len(tt.fp.opsOf())
	if again, created, err := tt.createTopicFromDefault("Auto", protocol.AutoCreateTopicKey, 8, 0); err != nil || created || again.WriteQueueNums != 2 {
		t.Fatalf("existing topic: %+v %v %v", again, created, err)
	}
	// No such default topic: nothing may be created, and that is not an error.
	if tc, created, err := tt.createTopicFromDefault("Orphan", "NoDefault", 4, 0); tc != nil || created || err != nil {
		t.Fatalf("missing default: %+v %v %v", tc, created, err)
	}
	if after := len(tt.fp.opsOf()); after != before {
		t.Fatalf("%d changes made for an existing topic or a missing default", after-before)
	}
}

func TestTablesGroupOrCreate(t *testing.T) {
	tt := newTestTables(t)
	if _, err := tt.groupOrCreate("bad group!"); !errors.Is(err, message.ErrInvalidName) {
		t.Fatal("an invalid group name was accepted")
	}
	gc, err := tt.groupOrCreate("G")
	if err != nil || gc == nil || gc.GroupName != "G" || tt.groups.Get("G") == nil {
		t.Fatalf("groupOrCreate = %+v %v", gc, err)
	}
	if gc, err := tt.groupOrCreate("G"); err != nil || gc == nil {
		t.Fatalf("existing group: %+v %v", gc, err)
	}
	if ops := tt.fp.opsOf(); !reflect.DeepEqual(ops, []string{fsm.OpPutGroup}) {
		t.Fatalf("changes %v, want one putGroup", ops)
	}
	// A follower answers the defaults without storing them.
	tt.fp.follower = true
	if gc, err := tt.groupOrCreate("F"); err != nil || gc == nil || gc.GroupName != "F" {
		t.Fatalf("follower: %+v %v", gc, err)
	}
	if tt.groups.Get("F") != nil || len(tt.fp.opsOf()) != 1 {
		t.Fatal("a follower stored a group")
	}
	// A failed change is the caller's error.
	tt.fp.follower, tt.fp.changeErr = false, dledger.ErrNotLeader
	if _, err := tt.groupOrCreate("L"); !errors.Is(err, dledger.ErrNotLeader) {
		t.Fatalf("failed change: %v", err)
	}
	// Without autoCreateSubscriptionGroup an unknown group is nil, and nothing is changed.
	tt.fp.changeErr = nil
	tt.cfg.AutoCreateSubscriptionGroup = false
	if gc, err := tt.groupOrCreate("Off"); gc != nil || err != nil {
		t.Fatalf("auto-create off: %+v %v", gc, err)
	}
}

// Offsets reach the place with the right ahead flag, invalid names never do, and a client's
// older request served after a newer one of the same connection is dropped.
func TestTablesCommitOffsets(t *testing.T) {
	tt := newTestTables(t)
	tt.commitOffset("G", "T", 0, 5)
	tt.commitPullOffset(commitOrigin{}, "G", "T", 1, 6)
	tt.commitOffset("bad group!", "T", 0, 1)
	tt.commitPullOffset(commitOrigin{}, "G", "bad topic!", 0, 1)
	want := []fakeCommit{
		{fsm.OffsetCommit{Group: "G", Topic: "T", QueueID: 0, Offset: 5}, false},
		{fsm.OffsetCommit{Group: "G", Topic: "T", QueueID: 1, Offset: 6}, true},
	}
	if got := tt.fp.commitsMade(); !reflect.DeepEqual(got, want) {
		t.Fatalf("commits %+v, want %+v", got, want)
	}
	if off, ok := tt.committedOffset("G", "T", 1); !ok || off != 6 {
		t.Fatalf("committedOffset = %d %v: not the place's latest view", off, ok)
	}

	// Connection 4: the pull that arrived 2nd is served before the persist that arrived 1st.
	tt.commitPullOffset(commitOrigin{conn: 4, arrival: 2}, "G", "T", 2, 100)
	tt.commitOffsetFrom(commitOrigin{conn: 4, arrival: 1}, "G", "T", 2, 99)
	if off, _ := tt.committedOffset("G", "T", 2); off != 100 {
		t.Fatalf("G/T/2 = %d, want 100 (the older persist dropped)", off)
	}
	wait, ok := tt.commitInOrder(commitOrigin{conn: 4, arrival: 3}, fsm.OffsetCommit{Group: "G", Topic: "T", QueueID: 2, Offset: 50}, false)
	if !ok || wait == nil {
		t.Fatal("a later request of the connection was dropped")
	}
	if err := wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := tt.commitInOrder(commitOrigin{conn: 4, arrival: 1}, fsm.OffsetCommit{Group: "G", Topic: "T", QueueID: 2, Offset: 1}, false); ok {
		t.Fatal("an older request ran after a newer one")
	}
	if off, _ := tt.committedOffset("G", "T", 2); off != 50 {
		t.Fatalf("G/T/2 = %d, want 50", off)
	}
}

// answerChange: SUCCESS, or the failure with the code clients react to.
func TestTablesAnswerChange(t *testing.T) {
	req := remoting.NewRequest(remoting.DeleteTopicInBroker, nil, nil)
	tests := []struct {
		name      string
		op        *fsm.MetaOp
		changeErr error
		code      int32
	}{
		{"applied", &fsm.MetaOp{Op: fsm.OpPutGroup, Group: protocol.NewSubscriptionGroupConfig("G")}, nil, remoting.Success},
		{"invalid", &fsm.MetaOp{Op: fsm.OpPutGroup, Group: &protocol.SubscriptionGroupConfig{}}, nil, remoting.InvalidParameter},
		{"not leader", &fsm.MetaOp{Op: fsm.OpPutGroup}, dledger.ErrNotLeader, remoting.ServiceNotAvailable},
		{"outcome unknown", &fsm.MetaOp{Op: fsm.OpPutGroup}, context.DeadlineExceeded, remoting.SystemError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := newTestTables(t)
			tt.fp.changeErr = tc.changeErr
			resp := tt.answerChange(req, "store subscription group", "group", "G", tc.op)
			if resp.Code != tc.code {
				t.Fatalf("code %d (%s), want %d", resp.Code, resp.Remark, tc.code)
			}
			if tc.code != remoting.Success && !strings.HasPrefix(resp.Remark, "store subscription group: ") {
				t.Fatalf("remark %q does not say what failed", resp.Remark)
			}
			// The name lock is released: taking it again does not block.
			tt.lockName("group", "G")()
		})
	}
}
