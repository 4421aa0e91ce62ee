package broker

import (
	"reflect"
	"testing"

	"rocketraft/broker/pop"
	"rocketraft/fsm"
	"rocketraft/remoting"
)

// brokerPopDeps wires a POP service to node n as New does: its changes go through n's tables and
// classic place, which forwards nothing.
func brokerPopDeps(n *metaNode) popDeps {
	return popDeps{cfg: n.cfg, topics: n.topics, stats: n.stats, acquire: n.acquireStore, commit: n.tables.changeMeta,
		forwardOrRefuse: func(*remoting.Conn, *remoting.Command) *remoting.Command { return nil },
		groupOrCreate:   n.tables.groupOrCreate, committedOffset: n.tables.committedOffset,
		commitOffset: n.tables.commitOffset, stop: make(chan struct{})}
}

// TestPopApplierAndSnapshot: POP ops applied through the metadata applier give the same table
// on two replicas, survive a snapshot restore, and are cleared by topic and group deletes.
func TestPopApplierAndSnapshot(t *testing.T) {
	src, replica := metaBroker(t, t.TempDir()), metaBroker(t, t.TempDir())
	ops := []*fsm.MetaOp{
		{Op: fsm.OpPopMessages, Now: 1000, Pop: &fsm.PopOp{Group: "G", Topic: "T", QueueID: 0, From: 0, Next: 4, Offsets: []int64{0, 1, 3}, PopTime: 1000, InvisibleTime: 100}},
		{Op: fsm.OpPopMessages, Now: 1000, Pop: &fsm.PopOp{Group: "G2", Topic: "T2", QueueID: 1, From: 7, Next: 8, Offsets: []int64{7}, PopTime: 1000, InvisibleTime: 100}},
		{Op: fsm.OpPopAck, Now: 1001, Pop: &fsm.PopOp{Group: "G", Topic: "T", QueueID: 0, Offsets: []int64{0}, PopTime: 1000}},
		{Op: fsm.OpPopChange, Now: 1002, Pop: &fsm.PopOp{Group: "G", Topic: "T", QueueID: 0, Offsets: []int64{1}, PopTime: 1000, InvisibleTime: 500}},
		{Op: fsm.OpPopMessages, Now: 1200, Pop: &fsm.PopOp{Group: "G", Topic: "T", QueueID: 0, Next: 4, Offsets: []int64{}, Dropped: []int64{3}, PopTime: 1200, InvisibleTime: 100}},
	}
	for _, op := range ops {
		for _, b := range []*metaNode{src, replica} {
			if err := b.tables.ApplyMeta(op); err != nil {
				t.Fatalf("%s: %v", op.Op, err)
			}
		}
	}
	k := pop.Key{Group: "G", Topic: "T", QueueID: 0}
	if s, n, _ := src.pop.table.Offsets(k); s != 1 || n != 4 {
		t.Fatalf("offsets %d %d, want 1 4 (0 acked, 1 in flight, 2 filtered, 3 dropped)", s, n)
	}
	if e, _ := src.pop.table.Get(k, 1); e.PopTime != 1002 || e.Deadline != 1502 {
		t.Fatalf("changed entry %+v", e)
	}
	if !reflect.DeepEqual(src.pop.table.Records(), replica.pop.table.Records()) {
		t.Fatal("replicas differ")
	}
	files, err := src.tables.SnapshotMeta()
	if err != nil {
		t.Fatal(err)
	}
	dst := metaBroker(t, t.TempDir())
	dst.pop.table.Pop(pop.Key{Group: "stale", Topic: "X"}, 0, 1, []int64{0}, 1, 1) // replaced, not merged
	if err := dst.tables.RestoreMeta(files); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(src.pop.table.Records(), dst.pop.table.Records()) {
		t.Fatalf("restored %+v, want %+v", dst.pop.table.Records(), src.pop.table.Records())
	}
	for _, op := range []*fsm.MetaOp{{Op: fsm.OpDeleteTopic, Now: 2000, Name: "T"}, {Op: fsm.OpDeleteGroup, Now: 2001, Name: "G2"}} {
		if err := dst.tables.ApplyMeta(op); err != nil {
			t.Fatal(err)
		}
	}
	if r := dst.pop.table.Records(); len(r) != 0 {
		t.Fatalf("after deleting the topic and the group: %+v", r)
	}
	if err := dst.tables.ApplyMeta(&fsm.MetaOp{Op: fsm.OpPopAck, Now: 1}); err == nil {
		t.Fatal("POP op without its fields applied")
	}
}

// TestPopClassicPersist: classic mode saves the table and a new service loads it.
func TestPopClassicPersist(t *testing.T) {
	dir := t.TempDir()
	b := metaBroker(t, dir)
	s, err := newPopService(brokerPopDeps(b), dir, true)
	if err != nil {
		t.Fatal(err)
	}
	b.pop = s // a change reaches the broker's POP state through its place
	op := &fsm.MetaOp{Op: fsm.OpPopMessages, Now: 1, Pop: &fsm.PopOp{Group: "G", Topic: "T", Next: 2, Offsets: []int64{0, 1}, PopTime: 1, InvisibleTime: 10}}
	if err := s.commit(op); err != nil {
		t.Fatal(err)
	}
	if err := s.persist(); err != nil {
		t.Fatal(err)
	}
	s2, err := newPopService(brokerPopDeps(b), dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.table.Records(), s2.table.Records()) {
		t.Fatalf("reloaded %+v, want %+v", s2.table.Records(), s.table.Records())
	}
}
