package clients

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"rocketraft/message"
	"rocketraft/protocol"
)

func TestParseSubscription(t *testing.T) {
	for _, expr := range []string{"*", "", "  * "} {
		s, err := ParseSubscription("T", expr, "")
		if err != nil || !s.All || !s.Match(0) || !s.Match(12345) {
			t.Fatalf("%q: %+v, %v", expr, s, err)
		}
	}
	s, err := ParseSubscription("T", " A || B ||  || A", protocol.ExpressionTag)
	if err != nil || s.All || !slices.Equal(s.Tags, []string{"A", "B"}) || len(s.Codes) != 2 {
		t.Fatalf("%+v, %v", s, err)
	}
	if !s.Match(message.TagsCode("A")) || !s.Match(message.TagsCode("B")) || s.Match(message.TagsCode("C")) {
		t.Fatal("tag match")
	}
	if s.Match(0) {
		t.Fatal("a message without tags matched a tag subscription")
	}
	if sq, err := ParseSubscription("T", "a > 1", protocol.ExpressionSQL92); err != nil || sq.SQL == nil ||
		!sq.MatchProperties(map[string]string{"a": "2"}) || sq.MatchProperties(map[string]string{"a": "1"}) {
		t.Fatalf("SQL92: %+v %v", sq, err)
	}
	if _, err := ParseSubscription("T", "a >", protocol.ExpressionSQL92); err == nil {
		t.Fatal("a bad SQL92 expression parsed")
	}
	if _, err := ParseSubscription("T", "x", "CLASS"); !errors.Is(err, ErrUnsupportedExpression) {
		t.Fatalf("unknown expression type: %v", err)
	}
	if s, _ := ParseSubscription("T", "||", ""); s.All || s.Match(0) || s.Match(message.TagsCode("")) {
		t.Fatalf("empty tag list must match nothing: %+v", s)
	}
}

func TestMatchComparesIntCode(t *testing.T) {
	s, _ := ParseSubscription("T", "TagA", "")
	code := message.TagsCode("TagA")
	// Java compares (int) tagsCode: high bits of the stored long are ignored.
	if !s.Match(code) || !s.Match(code|1<<40) {
		t.Fatal("int truncation")
	}
	neg, _ := ParseSubscription("T", "标签标签标签", "") // negative hash, sign-extended
	if c := message.TagsCode("标签标签标签"); c >= 0 || !neg.Match(c) {
		t.Fatalf("negative code %d", c)
	}
}

func TestHeartbeatSubscriptionForms(t *testing.T) {
	cases := []struct {
		name string
		d    protocol.SubscriptionData
		all  bool
		tags []string
	}{
		{"star", protocol.SubscriptionData{SubString: "*"}, true, nil},
		{"class filter", protocol.SubscriptionData{SubString: "com.x.Filter", ClassFilterMode: true}, true, nil},
		{"tags from tagsSet", protocol.SubscriptionData{SubString: "ignored", TagsSet: []string{" A ", "B"}, CodeSet: protocol.CodeSet{7}}, false, []string{"A", "B"}},
		{"tags from subString when tagsSet empty", protocol.SubscriptionData{SubString: "A||B"}, false, []string{"A", "B"}},
	}
	for _, c := range cases {
		s := fromData(&c.d)
		if s.All != c.all || !slices.Equal(s.Tags, c.tags) || s.Match(7) != c.all {
			t.Errorf("%s: %+v", c.name, s)
		}
	}
	// SQL92: every consume-queue unit passes (the filter reads properties afterwards).
	sql := fromData(&protocol.SubscriptionData{SubString: "a > 1", ExpressionType: protocol.ExpressionSQL92})
	if sql.IsTag() || !sql.IsSQL() || sql.All || !sql.Match(0) || sql.ParseErr != nil || !sql.MatchProperties(map[string]string{"a": "5"}) {
		t.Errorf("SQL92: %+v", sql)
	}
	if bad := fromData(&protocol.SubscriptionData{SubString: "a >", ExpressionType: protocol.ExpressionSQL92}); bad.ParseErr == nil {
		t.Errorf("bad SQL92 from a heartbeat: %+v", bad)
	}
}

func TestLocks(t *testing.T) {
	m := NewManager(Config{})
	q := func(i int32) protocol.MessageQueue {
		return protocol.MessageQueue{Topic: "T", BrokerName: "b", QueueID: i}
	}
	all := []protocol.MessageQueue{q(0), q(1), q(2)}

	if got := m.LockBatch("G", "c1", all, t0); !slices.Equal(got, all) {
		t.Fatalf("c1 lock = %v", got)
	}
	if got := m.LockBatch("G", "c2", all, t0.Add(time.Second)); len(got) != 0 {
		t.Fatalf("c2 took held locks: %v", got)
	}
	if got := m.LockBatch("G2", "c2", all[:1], t0); len(got) != 1 {
		t.Fatal("locks must be per group")
	}
	// c1 refreshes queue 0 at +50 s; queues 1 and 2 expire at +60 s.
	if got := m.LockBatch("G", "c1", all[:1], t0.Add(50*time.Second)); !slices.Equal(got, all[:1]) {
		t.Fatalf("same-client re-lock = %v", got)
	}
	if !m.IsLocked("G", q(1), t0.Add(60*time.Second)) || m.IsLocked("G", q(1), t0.Add(61*time.Second)) {
		t.Fatal("lock expiry boundary")
	}
	if got := m.LockBatch("G", "c2", all, t0.Add(61*time.Second)); !slices.Equal(got, all[1:]) {
		t.Fatalf("c2 after expiry = %v, want queues 1 and 2", got)
	}
	if h, _ := m.LockHolder("G", q(0), t0.Add(61*time.Second)); h != "c1" {
		t.Fatalf("queue 0 holder %q", h)
	}
	if got := m.LockBatch("G", "c1", all, t0.Add(62*time.Second)); !slices.Equal(got, all[:1]) {
		t.Fatalf("c1 re-lock after losing = %v", got)
	}

	m.UnlockBatch("G", "c1", all) // releases only queue 0
	if m.IsLocked("G", q(0), t0.Add(63*time.Second)) || !m.IsLocked("G", q(1), t0.Add(63*time.Second)) {
		t.Fatal("unlock released another client's lock or kept its own")
	}
	if !m.HasLocks("G", t0.Add(63*time.Second)) || m.HasLocks("G", t0.Add(200*time.Second)) {
		t.Fatal("HasLocks")
	}
	m.UnlockBatch("G", "c2", all)
	if m.HasLocks("G", t0.Add(63*time.Second)) || m.IsLocked("G", q(1), t0.Add(63*time.Second)) {
		t.Fatal("c2's locks kept")
	}
	m.UnlockBatch("none", "c2", all)
}

// The DLedger path: Lockable decides without changing anything (takeOver gates expired locks
// held by others), GrantLocks applies unconditionally, and LockRecords/RestoreLocks round-trip.
func TestReplicatedLockPrimitives(t *testing.T) {
	m := NewManager(Config{})
	q := func(i int32) protocol.MessageQueue {
		return protocol.MessageQueue{Topic: "T", BrokerName: "b", QueueID: i}
	}
	all := []protocol.MessageQueue{q(0), q(1), q(2)}
	if got := m.Lockable("G", "c1", all, t0, false); !slices.Equal(got, all) {
		t.Fatalf("free queues: %v", got)
	}
	if m.HasLocks("G", t0) {
		t.Fatal("Lockable granted something")
	}
	m.GrantLocks("G", "c1", all[:2], t0)
	if got := m.Lockable("G", "c2", all, t0.Add(time.Second), true); !slices.Equal(got, all[2:]) {
		t.Fatalf("c2 while c1 holds 0,1: %v", got)
	}
	if got := m.Lockable("G", "c1", all, t0.Add(time.Second), false); !slices.Equal(got, all) {
		t.Fatalf("c1 renews its own and takes the free one: %v", got)
	}
	late := t0.Add(61 * time.Second)
	if got := m.Lockable("G", "c2", all, late, false); !slices.Equal(got, all[2:]) {
		t.Fatalf("a young leader must not take expired locks over: %v", got)
	}
	if got := m.Lockable("G", "c2", all, late, true); !slices.Equal(got, all) {
		t.Fatalf("expired locks with takeOver: %v", got)
	}
	m.GrantLocks("G", "c2", all[1:2], late) // the leader's decision is applied as is
	if got := m.HeldBy("G", "c1", all); !slices.Equal(got, all[:1]) {
		t.Fatalf("c1 holds %v after c2 took queue 1", got)
	}
	recs := m.LockRecords()
	want := []LockRecord{{"G", "c1", q(0), t0.UnixMilli()}, {"G", "c2", q(1), late.UnixMilli()}}
	if !reflect.DeepEqual(recs, want) {
		t.Fatalf("records %+v, want %+v", recs, want)
	}
	other := NewManager(Config{})
	other.GrantLocks("X", "c9", all, t0)
	other.RestoreLocks(recs)
	if got := other.LockRecords(); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored %+v", got)
	}
	other.RestoreLocks(nil)
	if other.LockRecords() != nil {
		t.Fatal("RestoreLocks(nil) kept locks")
	}
}
