package broker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/config"
	"rocketraft/fsm"
	"rocketraft/protocol"
)

// classicTestPlace is metaBroker's classic place (tables in dir, no store) for role brokerRole.
func classicTestPlace(t *testing.T, dir, brokerRole string) (*metaNode, *classicPlace) {
	t.Helper()
	b := metaBroker(t, dir)
	b.cfg.BrokerRole, b.cfg.BrokerID = brokerRole, 0
	if brokerRole == config.RoleSlave {
		b.cfg.BrokerID = 1
	}
	return b, b.place.(*classicPlace)
}

// TestClassicPlaceRole: a classic master decides, delivers and takes writes under its configured
// id; a slave still changes its own tables but takes no write; neither forwards, and neither has
// a Raft group.
func TestClassicPlaceRole(t *testing.T) {
	_, m := classicTestPlace(t, t.TempDir(), config.RoleSyncMaster)
	if !m.decides() || !m.master() || m.forwardsWrites() || !m.registers() || m.haPart() != haMaster {
		t.Fatal("master: wrong capabilities")
	}
	if ok, _ := m.writable(); !ok || m.brokerID() != 0 || m.roleName() != config.RoleSyncMaster {
		t.Fatalf("master: writable %v id %d role %s", ok, m.brokerID(), m.roleName())
	}
	if !m.leaderSince().IsZero() {
		t.Fatal("a classic node takes over expired locks at once: leaderSince must be zero")
	}
	if _, err := m.raft(); !errors.Is(err, errNotRaft) {
		t.Fatalf("raft() = %v", err)
	}
	if id, self := m.leaderID(); id != "" || self != "" {
		t.Fatalf("leaderID %q %q", id, self)
	}
	_, s := classicTestPlace(t, t.TempDir(), config.RoleSlave)
	if !s.decides() || s.master() || s.haPart() != haSlave || s.brokerID() != 1 {
		t.Fatal("slave: wrong capabilities")
	}
	if ok, remark := s.writable(); ok || !strings.Contains(remark, "SLAVE") {
		t.Fatalf("slave writable %v %q", ok, remark)
	}
}

// TestClassicPlaceChange: a change reaches the tables at once through the shared applier; a
// group deleted without cleanOffset keeps its offsets (RocketMQ's classic behaviour); and a table
// that cannot be saved is reported, not swallowed.
func TestClassicPlaceChange(t *testing.T) {
	dir := t.TempDir()
	b, p := classicTestPlace(t, dir, config.RoleAsyncMaster)
	ctx := context.Background()
	if err := p.change(ctx, &fsm.MetaOp{Op: fsm.OpPutTopic, Topic: topicCfg("T", 4)}); err != nil {
		t.Fatal(err)
	}
	if tc := b.topics.Get("T"); tc == nil || tc.WriteQueueNums != 4 {
		t.Fatalf("topic %+v", tc)
	}
	if err := p.change(ctx, &fsm.MetaOp{Op: fsm.OpPutGroup, Group: protocol.NewSubscriptionGroupConfig("G")}); err != nil {
		t.Fatal(err)
	}
	p.commitOffset(fsm.OffsetCommit{Group: "G", Topic: "T", QueueID: 0, Offset: 9}, false)
	if err := p.change(ctx, &fsm.MetaOp{Op: fsm.OpDeleteGroup, Name: "G", KeepOffsets: true}); err != nil {
		t.Fatal(err)
	}
	if off, ok := p.queryOffset("G", "T", 0); b.groups.Get("G") != nil || !ok || off != 9 {
		t.Fatalf("after delete keeping offsets: group %v offset %d %v", b.groups.Get("G"), off, ok)
	}
	if err := p.change(ctx, &fsm.MetaOp{Op: fsm.OpDeleteGroup, Name: "G"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.queryOffset("G", "T", 0); ok {
		t.Fatal("a delete with cleanOffset kept the offsets")
	}
	if err := p.change(ctx, &fsm.MetaOp{Op: "bogus"}); err == nil {
		t.Fatal("an unknown change was accepted")
	}
	// The table's directory is now a file: the save fails, and the client must hear of it.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := p.change(ctx, &fsm.MetaOp{Op: fsm.OpPutTopic, Topic: topicCfg("U", 1)})
	if err == nil {
		t.Fatal("a failed save of the topic table was not reported")
	}
}

// TestClassicPlaceOffsets: offsets are durable when recorded (no wait), and a pull's commit
// never moves one back.
func TestClassicPlaceOffsets(t *testing.T) {
	_, p := classicTestPlace(t, t.TempDir(), config.RoleAsyncMaster)
	wait := p.commitOffset(fsm.OffsetCommit{Group: "G", Topic: "T", QueueID: 1, Offset: 10}, false)
	if err := wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.commitOffset(fsm.OffsetCommit{Group: "G", Topic: "T", QueueID: 1, Offset: 5}, true)
	if off, _ := p.latestOffset("G", "T", 1); off != 10 {
		t.Fatalf("ahead-only commit moved the offset back to %d", off)
	}
	p.commitOffset(fsm.OffsetCommit{Group: "G", Topic: "T", QueueID: 1, Offset: 5}, false)
	if off, _ := p.queryOffset("G", "T", 1); off != 5 {
		t.Fatalf("a reset commit did not overwrite: %d", off)
	}
}

// TestClassicPlaceDeliver: a delay step without records moves and saves the level's progress.
func TestClassicPlaceDeliver(t *testing.T) {
	dir := t.TempDir()
	b, p := classicTestPlace(t, dir, config.RoleAsyncMaster)
	if err := p.deliver(context.Background(), &fsm.ScheduleDeliver{Level: 3, From: 0, To: 7}); err != nil {
		t.Fatal(err)
	}
	if got := b.delayOffsets.Get(3); got != 7 {
		t.Fatalf("progress %d", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "delayOffset.json")); err != nil {
		t.Fatalf("progress not saved: %v", err)
	}
}

// testRaftPlace is a Raft place over a state machine on an in-memory file system, without a Raft
// node: what does not talk to Raft can be tested without processes. Its offsets are proposed to
// propose.
func testRaftPlace(t *testing.T, propose func(context.Context, []fsm.OffsetCommit) error) (*metaNode, *raftPlace) {
	t.Helper()
	b := metaBroker(t, t.TempDir())
	f := memFSM(t, nil)
	b.cfg.BrokerName = "broker-r"
	rg := &raftGroup{fsm: f, selfID: "n2", group: "broker-r", index: 2}
	rg.readCtx, rg.stopReads = context.WithCancel(context.Background())
	t.Cleanup(rg.stopReads)
	p := newRaftPlace(rg, b.cfg, b.offsets, hclog.NewNullLogger())
	p.offsetBatch.close()
	p.offsetBatch = newOffsetBatcher(propose, 10*time.Millisecond, offsetBatchMaxEntries, hclog.NewNullLogger())
	t.Cleanup(p.offsetBatch.close)
	b.place = p
	return b, p
}

// TestRaftPlaceRole: the role Raft decides drives every answer; a role change reaches the
// subscribers only through notify (the role watch), and leadership's start is recorded before
// the role for lock decisions.
func TestRaftPlaceRole(t *testing.T) {
	_, p := testRaftPlace(t, func(context.Context, []fsm.OffsetCommit) error { return nil })
	if p.decides() || p.master() || p.registers() || !p.forwardsWrites() || p.haPart() != haWhileLeader {
		t.Fatal("no role yet: wrong capabilities")
	}
	if p.brokerID() != 3 || p.roleName() != config.RoleSlave {
		t.Fatalf("follower id %d role %s", p.brokerID(), p.roleName())
	}
	var got []int32
	p.onRoleChange(func(r int32) { got = append(got, r) })
	before := time.Now()
	if !p.setRole(roleLeader) || p.setRole(roleLeader) {
		t.Fatal("setRole does not report changes")
	}
	if len(got) != 0 {
		t.Fatal("setRole notified the subscribers itself")
	}
	p.notify(roleLeader)
	if len(got) != 1 || got[0] != roleLeader {
		t.Fatalf("subscribers got %v", got)
	}
	if !p.decides() || !p.master() || !p.registers() || p.brokerID() != 0 || p.roleName() != config.RoleSyncMaster {
		t.Fatal("leader: wrong answers")
	}
	if ok, _ := p.writable(); !ok {
		t.Fatal("the leader refuses writes")
	}
	if p.leaderSince().Before(before) {
		t.Fatal("leadership start not recorded")
	}
	if rp, err := p.raft(); err != nil || rp != p {
		t.Fatalf("raft() = %v %v", rp, err)
	}
	p.leave()
	if p.decides() || p.registers() {
		t.Fatal("a node that left still decides or registers")
	}
	if ok, remark := p.writable(); ok || !strings.Contains(remark, "DISK FAILURE") {
		t.Fatalf("after leave: %v %q", ok, remark)
	}
}

// TestRaftPlaceOffsets: the leader queues commits (its latest view sees them at once) and an
// answered commit waits until its entry is proposed; a follower drops them; leadership lost
// drops what was queued.
func TestRaftPlaceOffsets(t *testing.T) {
	proposed := make(chan []fsm.OffsetCommit, 8)
	_, p := testRaftPlace(t, func(_ context.Context, offs []fsm.OffsetCommit) error {
		proposed <- offs
		return nil
	})
	o := fsm.OffsetCommit{Group: "G", Topic: "T", QueueID: 0, Offset: 4}
	p.commitOffset(o, false) // no role: dropped
	if _, ok := p.latestOffset("G", "T", 0); ok {
		t.Fatal("a follower queued an offset")
	}
	p.setRole(roleLeader)
	wait := p.commitOffset(o, false)
	if off, ok := p.latestOffset("G", "T", 0); !ok || off != 4 {
		t.Fatalf("latest %d %v", off, ok)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := wait(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case offs := <-proposed:
		if len(offs) != 1 || offs[0] != o {
			t.Fatalf("proposed %+v", offs)
		}
	case <-ctx.Done():
		t.Fatal("nothing proposed")
	}
	// Ahead-only: a smaller offset than the replicated one is not even queued.
	p.offsets.Commit("G", "T", 0, 4)
	if err := p.commitOffset(fsm.OffsetCommit{Group: "G", Topic: "T", QueueID: 0, Offset: 2}, true)(ctx); err != nil {
		t.Fatal(err)
	}
	if off, _ := p.latestOffset("G", "T", 0); off != 4 {
		t.Fatalf("ahead-only commit moved the offset back to %d", off)
	}
}
