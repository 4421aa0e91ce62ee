package storage

import (
	"fmt"
	"net/netip"
	"testing"

	"rocketraft/message"
	"rocketraft/storage/vfs"
)

// BenchmarkAppendPrepare measures the append path's work before the lock for one record as a
// Go or Java client sends it (TAGS, KEYS, UNIQ_KEY, WAIT, CLUSTER and a few more properties):
// parse, check, tags code and index key hashes.
func BenchmarkAppendPrepare(b *testing.B) {
	s := openT(b, testConfig(vfs.NewMemFS()))
	defer s.Close()
	props := message.FormatProperties(map[string]string{
		message.PropertyTags: "TagA", message.PropertyKeys: "order-1 user-2", message.PropertyUniqClientMessageID: "7F0000010001",
		message.PropertyWaitStoreMsgOK: "true", message.PropertyCluster: "DefaultCluster", message.PropertyProducerGroup: "PG",
		message.PropertyMaxReconsumeTimes: "16", message.PropertyMsgRegion: "DefaultRegion", message.PropertyTraceSwitch: "true",
	})
	r, err := message.EncodeRecord(&message.Message{Topic: "BenchTopic", Body: make([]byte, 1024), BornTimestamp: 1,
		BornHost: netip.MustParseAddrPort("10.0.0.1:1234"), StoreHost: netip.MustParseAddrPort("10.0.0.9:10911"), Properties: props})
	if err != nil {
		b.Fatal(err)
	}
	recs := [][]byte{r}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, _, _, err := s.prepare(recs); err != nil {
			b.Fatal(fmt.Errorf("prepare: %w", err))
		}
	}
}
