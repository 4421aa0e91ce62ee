package broker

import (
	"context"
	"net/netip"
	"testing"

	"rocketraft/config"
	"rocketraft/fsm"
	"rocketraft/message"
	"rocketraft/storage"
	"rocketraft/storage/vfs"
)

// encodeProposals writes the entry as fsm.EncodeMessages does (the replicated format is
// unchanged) and puts the proposals' reads in the table under that entry, marking the proposals
// that carry reads; their Drop empties it. Proposals without reads put nothing.
func TestEncodeProposals(t *testing.T) {
	scans := fsm.NewLeaderScans()
	a, b := [][]byte{[]byte("a1"), []byte("a2")}, [][]byte{[]byte("b1")}
	read := []storage.Scanned{{Props: "x"}, {Props: "y"}}
	items := []*proposal{{records: a, scans: read}, {records: b}}
	data := encodeProposals(items, scans)
	if want := fsm.EncodeMessages([][][]byte{a, b}); string(data) != string(want) {
		t.Fatal("the entry differs from fsm.EncodeMessages of the records")
	}
	if scans.Len() != 1 || &items[0].entry[0] != &data[0] || items[1].entry != nil {
		t.Fatalf("table %d, entries %p %v", scans.Len(), items[0].entry, items[1].entry)
	}
	scans.Drop(items[1].entry)
	scans.Drop(items[0].entry)
	if scans.Len() != 0 {
		t.Fatalf("the table holds %d entries after the sends' Drop", scans.Len())
	}
	plain := []*proposal{{records: a}, {records: b}}
	if encodeProposals(plain, scans); scans.Len() != 0 || plain[0].entry != nil {
		t.Fatalf("proposals without reads put %d entries", scans.Len())
	}
}

// The CLUSTER pair the broker stamps on a send's properties after the plan read them keeps that
// read valid for the store: a plain send's record is stored without a second scan, whatever the
// shape of the properties the client sent.
func TestClusterStampKeepsThePlansRead(t *testing.T) {
	snd := &sender{cfg: &config.Broker{BrokerClusterName: "DefaultCluster"}}
	sc := storage.DefaultConfig("/store")
	sc.FS = vfs.NewMemFS()
	sc.MappedFileSizeCommitLog, sc.MappedFileSizeConsumeQueue = 1<<20, 100*storage.ConsumeQueueUnitSize
	sc.MaxHashSlotNum, sc.MaxIndexNum = 64, 200
	st, err := storage.Open(sc)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, props := range []string{"", "TAGS\x01a\x02", "TAGS\x01a", "TAGS\x01", "KEYS\x01k1 k2\x02UNIQ_KEY\x01U\x02WAIT\x01false",
		"TAGS\x01a\x02CLUSTER\x01Other\x02"} {
		p := sentPlan("T", props)
		rec, err := message.EncodeRecord(&message.Message{Topic: "T", Body: []byte("b"), BornTimestamp: 1,
			BornHost: netip.MustParseAddrPort("10.0.0.1:1"), StoreHost: netip.MustParseAddrPort("10.0.0.2:2"),
			Properties: snd.withCluster(p.props, p.known.Has&message.KnownCluster != 0)})
		if err != nil {
			t.Fatal(err)
		}
		read := p.scans(false)
		before := message.PropertyScans()
		if _, err := st.AppendScanned(context.Background(), [][]byte{rec}, read); err != nil {
			t.Fatal(err)
		}
		if n := message.PropertyScans() - before; n != 0 {
			t.Errorf("%q: the store scanned the properties %d times, want 0", props, n)
		}
	}
}
