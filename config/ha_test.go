package config

import (
	"strings"
	"testing"
)

// TestHAKeys: the classic HA keys' defaults, the 4.x alias haSlaveFallbehindMax, and validation
// naming the key.
func TestHAKeys(t *testing.T) {
	b := NewBroker()
	if b.HASendHeartbeatInterval != 5000 || b.HAHousekeepingInterval != 20000 || b.HATransferBatchSize != 32<<10 ||
		b.HAMaxGapNotInSync != 256<<20 || b.HAMasterAddress != "" {
		t.Fatalf("defaults %+v", b)
	}
	p := writeFile(t, "brokerRole=SLAVE\nbrokerId=10\nhaSlaveFallbehindMax=1024\nhaMasterAddress=127.0.0.1:10912\n")
	b, _, err := LoadBroker([]string{"-c", p})
	if err != nil || b.HAMaxGapNotInSync != 1024 || b.HAMasterAddress != "127.0.0.1:10912" || b.BrokerID != 10 {
		t.Fatalf("load: %v %+v", err, b)
	}
	for text, key := range map[string]string{
		"haMasterAddress=nohost":        "haMasterAddress",
		"haTransferBatchSize=0":         "haTransferBatchSize",
		"haTransferBatchSize=999999999": "haTransferBatchSize",
		"haSendHeartbeatInterval=-1":    "haSendHeartbeatInterval",
		"haMaxGapNotInSync=0":           "haMaxGapNotInSync",
		"haHousekeepingInterval=0":      "haHousekeepingInterval",
		"haHousekeepingInterval=4000":   "haSendHeartbeatInterval",
	} {
		_, _, err := LoadBroker([]string{"-c", writeFile(t, text+"\n")})
		if err == nil || !strings.Contains(err.Error(), key+":") {
			t.Fatalf("%s: %v", text, err)
		}
	}
}
