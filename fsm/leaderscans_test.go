package fsm

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/hashicorp/raft"

	"rocketraft/message"
	"rocketraft/storage"
	"rocketraft/storage/vfs"
)

// readOf is what a proposer that read record r's properties puts in LeaderScans.
func readOf(t testing.TB, r []byte) storage.Scanned {
	t.Helper()
	v, err := message.ParseView(r)
	if err != nil {
		t.Fatal(err)
	}
	props := string(v.Properties())
	k := message.ReadKnown(props)
	return storage.Scanned{Props: props, Known: &k}
}

// scansFSM opens a state machine on fs that takes reads from scans.
func scansFSM(t *testing.T, fs vfs.FS, scans *LeaderScans) *FSM {
	t.Helper()
	f, err := New(Config{Store: storeConfig(fs), Scans: scans})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// tagsCodes lists the tags codes of topic A queue 0.
func tagsCodes(t *testing.T, f *FSM) []int64 {
	t.Helper()
	st, release, err := f.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	var codes []int64
	st.GetMessages("A", 0, 0, 64, 1<<20, func(c int64) bool { codes = append(codes, c); return true })
	return codes
}

// The apply of the very entry a proposer Put reads for uses them (no scan of those records) and
// drains the table, and stores exactly what an apply without them stores (a replica's).
func TestLeaderScansUsedByOwnApply(t *testing.T) {
	ts := int64(1_700_000_000_000)
	read, unread := rec(t, "A", 0, "one", ts), rec(t, "A", 0, "two", ts+1)
	data := EncodeMessages([][][]byte{{read}, {unread}})
	reads := [][]storage.Scanned{{readOf(t, read)}, nil}

	leaderFS, replicaFS := vfs.NewMemFS(), vfs.NewMemFS()
	scans := NewLeaderScans()
	leader := scansFSM(t, leaderFS, scans)
	defer leader.Close()
	replica := scansFSM(t, replicaFS, nil)
	defer replica.Close()

	scans.Put(data, reads)
	before := message.PropertyScans()
	res := leader.Apply(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: data}).(*ApplyResult)
	if n := message.PropertyScans() - before; n != 1 {
		t.Fatalf("the leader's apply of a read and an unread record scanned %d times, want 1", n)
	}
	if res.Appends[0].Err != nil || res.Appends[1].Err != nil {
		t.Fatalf("apply: %+v", res.Appends)
	}
	if n := scans.Len(); n != 0 {
		t.Fatalf("the table holds %d entries after the apply, want 0", n)
	}
	before = message.PropertyScans()
	replica.Apply(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: bytes.Clone(data)})
	if n := message.PropertyScans() - before; n != 2 {
		t.Fatalf("a replica's apply of two records scanned %d times, want 2", n)
	}
	sameImage(t, "leader vs replica", commitlogImage(t, leaderFS), commitlogImage(t, replicaFS))
	if a, b := tagsCodes(t, leader), tagsCodes(t, replica); !slices.Equal(a, b) || len(a) != 2 || a[0] != message.TagsCode("tg") {
		t.Fatalf("tags codes: leader %v, replica %v", a, b)
	}
	if a, b := queueState(leader), queueState(replica); a != b {
		t.Fatalf("queues: leader %s, replica %s", a, b)
	}
}

// Reads are used only for the entry they were Put for: another slice with the same bytes (an
// entry read back from the log, or received), or an entry whose shape differs from the reads,
// is read as without them. Drop empties what no apply took.
func TestLeaderScansIgnoredUnlessThisEntry(t *testing.T) {
	ts := int64(1_700_000_000_000)
	r := rec(t, "A", 0, "one", ts)
	scans := NewLeaderScans()
	f := scansFSM(t, vfs.NewMemFS(), scans)
	defer f.Close()

	data := EncodeMessages([][][]byte{{r}})
	scans.Put(data, [][]storage.Scanned{{readOf(t, r)}})
	before := message.PropertyScans()
	f.Apply(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: bytes.Clone(data)})
	if n := message.PropertyScans() - before; n != 1 {
		t.Fatalf("the apply of a copy scanned %d times, want 1", n)
	}
	if n := scans.Len(); n != 1 {
		t.Fatalf("the table holds %d entries, want the one not applied", n)
	}
	scans.Drop(data)
	if n := scans.Len(); n != 0 {
		t.Fatalf("the table holds %d entries after Drop, want 0", n)
	}

	// reads shaped for two records, an entry of one append of one record
	data = EncodeMessages([][][]byte{{r}})
	scans.Put(data, [][]storage.Scanned{{readOf(t, r), readOf(t, r)}})
	before = message.PropertyScans()
	f.Apply(&raft.Log{Index: 2, Term: 1, Type: raft.LogCommand, Data: data})
	if n := message.PropertyScans() - before; n != 1 {
		t.Fatalf("the apply with misshapen reads scanned %d times, want 1", n)
	}
	if n := scans.Len(); n != 0 {
		t.Fatalf("the table holds %d entries after the apply took them, want 0", n)
	}
	scans.Drop(data) // the proposer's Drop after the apply: nothing left, nothing happens
	scans.Drop(nil)  // a send never put in an entry
	if n := scans.Len(); n != 0 {
		t.Fatalf("the table holds %d entries, want 0", n)
	}
}

// take matches on the slice, not its bytes, and on the length.
func TestLeaderScansTake(t *testing.T) {
	var none *LeaderScans
	if got := none.take([]byte{1}, nil); got != nil {
		t.Fatalf("a nil table gave %v", got)
	}
	scans := NewLeaderScans()
	data := []byte{KindMessages, 0, 0, 0, 1}
	appends := [][][]byte{{{9}}}
	reads := [][]storage.Scanned{{{Props: "x"}}}
	scans.Put(data, reads)
	if got := scans.take(data[:4], recordCounts(appends)); got != nil {
		t.Fatalf("a shorter slice of the same bytes took %v", got)
	}
	if got := scans.take(slices.Clone(data), recordCounts(appends)); got != nil {
		t.Fatalf("a copy took %v", got)
	}
	if got := scans.take(data, recordCounts(appends)); len(got) != 1 || got[0][0].Props != "x" {
		t.Fatalf("the entry's own slice took %v", got)
	}
	if got := scans.take(data, recordCounts(appends)); got != nil || scans.Len() != 0 {
		t.Fatalf("a second take gave %v, table %d", got, scans.Len())
	}
	scans.Put(nil, reads)
	if scans.Len() != 0 {
		t.Fatal("an empty entry was put")
	}
}
