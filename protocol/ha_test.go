package protocol

import (
	"strings"
	"testing"
)

// TestHARuntimeInfoJSON: GET_BROKER_HA_STATUS's body uses RocketMQ's property names and decodes
// back to the same value.
func TestHARuntimeInfoJSON(t *testing.T) {
	in := HARuntimeInfo{Master: true, MasterCommitLogMaxOffset: 900, InSyncSlaveNums: 1,
		HAConnectionInfo:    []HAConnectionRuntimeInfo{{Addr: "127.0.0.1:5000", SlaveAckOffset: 800, Diff: 100, InSync: true, TransferredByteInSecond: 7, TransferFromWhere: 0}},
		HAClientRuntimeInfo: HAClientRuntimeInfo{MasterAddr: "m:1", MaxOffset: 3, IsActivated: true, MasterOffset: -1}}
	b, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"master":true`, `"masterCommitLogMaxOffset":900`, `"inSyncSlaveNums":1`, `"haConnectionInfo":[`,
		`"slaveAckOffset":800`, `"diff":100`, `"inSync":true`, `"transferFromWhere":0`, `"haClientRuntimeInfo":{`, `"activated":true`} {
		if !strings.Contains(string(b), key) {
			t.Fatalf("%s lacks %s", b, key)
		}
	}
	var out HARuntimeInfo
	if err := Decode(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.HAConnectionInfo[0] != in.HAConnectionInfo[0] || out.HAClientRuntimeInfo != in.HAClientRuntimeInfo || out.MasterCommitLogMaxOffset != 900 {
		t.Fatalf("round trip: %+v", out)
	}
}
