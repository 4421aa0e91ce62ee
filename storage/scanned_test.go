package storage

import (
	"context"
	"math"
	"net/netip"
	"slices"
	"testing"

	"rocketraft/message"
	"rocketraft/storage/vfs"
)

// recWith encodes a record of topic T queue 0 carrying props and sysFlag.
func recWith(t testing.TB, props string, sysFlag int32) []byte {
	t.Helper()
	b, err := message.EncodeRecord(&message.Message{
		Topic: "T", BornTimestamp: 1, StoreTimestamp: 1_700_000_000_000, Body: []byte("body"), SysFlag: sysFlag,
		BornHost: netip.MustParseAddrPort("10.0.0.1:1234"), StoreHost: testStoreHost, Properties: props,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// scannedOf is what a sender that read props hands the store.
func scannedOf(props string) Scanned {
	k := message.ReadKnown(props)
	return Scanned{Props: props, Known: &k}
}

// A read describes the properties it was taken from, and those followed by one CLUSTER pair
// (the broker's stamp), and nothing else.
func TestScannedDescribes(t *testing.T) {
	const p = "TAGS\x01a\x02KEYS\x01k1 k2\x02"
	cases := []struct {
		name  string
		read  string
		props string
		want  bool
	}{
		{"the same bytes", p, p, true},
		{"empty both", "", "", true},
		{"a CLUSTER pair appended", p, p + "CLUSTER\x01DefaultCluster\x02", true},
		{"a CLUSTER pair after an unterminated last pair", "TAGS\x01a", "TAGS\x01a\x02CLUSTER\x01c\x02", true},
		{"a CLUSTER pair alone", "", "CLUSTER\x01c\x02", true},
		{"an unterminated pair continued", "TAGS\x01a", "TAGS\x01ab\x02", false},
		{"another pair appended", p, p + "TAGS\x01b\x02", false},
		{"CLUSTER then another pair", p, p + "CLUSTER\x01c\x02TAGS\x01b\x02", false},
		{"a CLUSTER pair without its separator", p, p + "CLUSTER\x01c", false},
		{"other bytes of the same length", p, "TAGS\x01b\x02KEYS\x01k1 k2\x02", false},
		{"shorter", p, p[:len(p)-1], false},
		{"a prefix of the read", p, "TAGS\x01a\x02", false},
	}
	for _, c := range cases {
		sc := scannedOf(c.read)
		if got := sc.describes([]byte(c.props)); got != c.want {
			t.Errorf("%s: describes = %v, want %v", c.name, got, c.want)
		}
	}
	if (&Scanned{Props: p}).describes([]byte(p)) {
		t.Error("a Scanned without Known describes a record")
	}
}

// prepare takes the same tags code, index key hashes and WAIT from a sender's read as from its
// own, and reads nothing itself when the read describes the record; a read that does not
// describe it (even one with other values) is ignored and the record is read.
func TestPrepareUsesScanned(t *testing.T) {
	s := openT(t, testConfig(vfs.NewMemFS()))
	defer s.Close()
	const cluster = "CLUSTER\x01DefaultCluster\x02"
	base := message.FormatProperties(map[string]string{message.PropertyTags: "tg", message.PropertyKeys: "k1  k2 ",
		message.PropertyUniqClientMessageID: "U1", message.PropertyWaitStoreMsgOK: "false"})
	cases := []struct {
		name    string
		read    string // what the sender read
		props   string // the record's properties
		sysFlag int32
		used    bool
	}{
		{"as read", base, base, 0, true},
		{"with the cluster stamp", base, base + cluster, 0, true},
		{"a rollback (not indexed)", base, base, message.TransactionRollbackType, true},
		{"no properties", "", "", 0, true},
		{"WAIT absent", "TAGS\x01x\x02", "TAGS\x01x\x02", 0, true},
		{"a read of other properties", "TAGS\x01other\x02UNIQ_KEY\x01U9\x02", base, 0, false},
	}
	for _, c := range cases {
		r := recWith(t, c.props, c.sysFlag)
		want, _, wantWait, err := s.prepare([][]byte{r}, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		read := []Scanned{scannedOf(c.read)}
		before := message.PropertyScans()
		got, _, gotWait, err := s.prepare([][]byte{r}, read)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		scans := message.PropertyScans() - before
		if used := scans == 0; used != c.used {
			t.Errorf("%s: prepare read the properties %d times, want the read used: %v", c.name, scans, c.used)
		}
		if got[0].tags != want[0].tags || !slices.Equal(got[0].hashes, want[0].hashes) || gotWait != wantWait {
			t.Errorf("%s: tags %d hashes %v wait %v, reading the record gives %d %v %v", c.name,
				got[0].tags, got[0].hashes, gotWait, want[0].tags, want[0].hashes, wantWait)
		}
	}
}

// AppendScanned stores exactly what Append stores (records, tags codes, index keys), reading
// only the records it has no read for; an AppendReplicatedBatchScanned likewise.
func TestAppendScannedStoresAsAppend(t *testing.T) {
	plain := openT(t, testConfig(vfs.NewMemFS()))
	defer plain.Close()
	scanned := openT(t, testConfig(vfs.NewMemFS()))
	defer scanned.Close()
	props := []string{
		message.FormatProperties(map[string]string{message.PropertyTags: "a", message.PropertyKeys: "k1 k2", message.PropertyUniqClientMessageID: "U1"}),
		message.FormatProperties(map[string]string{message.PropertyTags: "b", message.PropertyKeys: "k3"}),
	}
	recs := [][]byte{recWith(t, props[0], 0), recWith(t, props[1], 0)}
	appendT(t, plain, recs...)
	appendT(t, plain, recs[1])
	if _, err := plain.AppendReplicatedBatch([][][]byte{recs, {recs[0]}}); err != nil {
		t.Fatal(err)
	}

	read := []Scanned{scannedOf(props[0]), scannedOf(props[1])}
	before := message.PropertyScans()
	// the second record has no read: it is read by the store
	if _, err := scanned.AppendScanned(context.Background(), recs, read[:1]); err != nil {
		t.Fatal(err)
	}
	if n := message.PropertyScans() - before; n != 1 {
		t.Fatalf("AppendScanned of a read and an unread record scanned %d times, want 1", n)
	}
	if _, err := scanned.AppendScanned(context.Background(), recs[1:], nil); err != nil {
		t.Fatal(err)
	}
	before = message.PropertyScans()
	if _, err := scanned.AppendReplicatedBatchScanned([][][]byte{recs, {recs[0]}}, [][]Scanned{read, read[:1]}); err != nil {
		t.Fatal(err)
	}
	if n := message.PropertyScans() - before; n != 0 {
		t.Fatalf("a replicated batch of read records scanned %d times, want 0", n)
	}

	if a, b := plain.CommitLogMaxOffset(), scanned.CommitLogMaxOffset(); a != b {
		t.Fatalf("commitlog ends %d and %d", a, b)
	}
	a, _ := plain.ReadCommitLog(0, int(plain.CommitLogMaxOffset()))
	b, _ := scanned.ReadCommitLog(0, int(scanned.CommitLogMaxOffset()))
	if !slices.Equal(a, b) {
		t.Fatal("commitlog bytes differ")
	}
	tagsOf := func(s *Store) []int64 {
		var codes []int64
		s.GetMessages("T", 0, 0, 32, 1<<20, func(code int64) bool { codes = append(codes, code); return true })
		return codes
	}
	if a, b := tagsOf(plain), tagsOf(scanned); !slices.Equal(a, b) || len(a) != 6 || a[0] != message.TagsCode("a") {
		t.Fatalf("tags codes %v and %v", a, b)
	}
	for _, key := range []string{"k1", "k2", "k3", "U1"} {
		x, _, _ := plain.QueryByKey("T", key, 32, 0, 1<<62)
		y, _, _ := scanned.QueryByKey("T", key, 32, 0, 1<<62)
		if len(x) == 0 || len(x) != len(y) {
			t.Errorf("key %s: %d and %d records", key, len(x), len(y))
		}
	}
	checkInvariants(t, scanned)
}

// DispatchWritten (the commitlog store's apply) uses a group's reads where they describe the
// records, reads the others itself, and dispatches exactly what it dispatches without reads:
// the same tags codes and index keys.
func TestDispatchWrittenUsesScans(t *testing.T) {
	plain := openT(t, entryConfig(t))
	defer plain.Close()
	scanned := openT(t, entryConfig(t))
	defer scanned.Close()
	build := func() *testEntry {
		return newEntry(t, newEntrySeq(), [][]byte{msgRec(t, "T", 0, "a", "ka"), msgRec(t, "T", 0, "b", "kb")})
	}
	propsOf := func(r []byte) string {
		v, err := message.ParseView(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(v.Properties())
	}
	e := build()
	writeEntryT(t, plain, e)
	if _, err := plain.DispatchWritten(e.end, e.groups); err != nil {
		t.Fatal(err)
	}
	e = build()
	writeEntryT(t, scanned, e)
	// the first record's read describes it; the second's is of other properties
	e.groups[0].Scans = []Scanned{scannedOf(propsOf(e.recs[1])), scannedOf("TAGS\x01other\x02KEYS\x01zz\x02")}
	before := message.PropertyScans()
	if _, err := scanned.DispatchWritten(e.end, e.groups); err != nil {
		t.Fatal(err)
	}
	if n := message.PropertyScans() - before; n != 1 {
		t.Fatalf("dispatch with one describing read scanned %d times, want 1", n)
	}
	for _, s := range []*Store{plain, scanned} {
		var codes []int64
		s.GetMessages("T", 0, 0, 8, 1<<20, func(code int64) bool { codes = append(codes, code); return true })
		if want := []int64{message.TagsCodeBytes("tag"), message.TagsCodeBytes("tag")}; !slices.Equal(codes, want) {
			t.Fatalf("tags codes %v, want %v", codes, want)
		}
		for _, k := range []string{"ka", "kb"} {
			if got, _, _ := s.QueryByKey("T", k, 8, 0, math.MaxInt64); len(got) != 1 {
				t.Fatalf("key %s: %d records indexed, want 1", k, len(got))
			}
		}
	}
}
