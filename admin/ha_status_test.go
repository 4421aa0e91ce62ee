package admin

import (
	"encoding/json"
	"strings"
	"testing"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// TestHAStatus: haStatus asks every member of the group for GET_BROKER_HA_STATUS and shows the
// master with its slave connections (ack offset, lag, in sync) and the slave with the master it
// follows and how far behind it is; an unreachable member is shown, not fatal.
func TestHAStatus(t *testing.T) {
	master := startPeer(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetBrokerHAStatus: func(req *remoting.Command) *remoting.Command {
			return okBody(req, protocol.HARuntimeInfo{Master: true, MasterCommitLogMaxOffset: 5000, InSyncSlaveNums: 1,
				HAConnectionInfo: []protocol.HAConnectionRuntimeInfo{{Addr: "127.0.0.1:51000", SlaveAckOffset: 4000, Diff: 1000, InSync: true}}})
		},
	})
	slave := startPeer(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetBrokerHAStatus: func(req *remoting.Command) *remoting.Command {
			return okBody(req, protocol.HARuntimeInfo{HAClientRuntimeInfo: protocol.HAClientRuntimeInfo{
				MasterAddr: "127.0.0.1:10912", MaxOffset: 4000, MasterOffset: 4500, IsActivated: true}})
		},
	})
	dead := deadAddr(t)
	ci := protocol.ClusterInfo{
		BrokerAddrTable: map[string]*protocol.BrokerData{
			"broker-a": {Cluster: "C", BrokerName: "broker-a", BrokerAddrs: map[int64]string{0: master.addr(), 1: slave.addr(), 2: dead}},
		},
		ClusterAddrTable: map[string][]string{"C": {"broker-a"}},
	}
	ns := startPeer(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetBrokerClusterInfo: func(req *remoting.Command) *remoting.Command { return okBody(req, ci) },
	})
	out, errOut, code := runMain("haStatus", "-b", "broker-a", "-n", ns.addr(), "--timeout", "1s")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"MASTER   1 slave(s)", "5000", "1 in sync",
		"127.0.0.1:51000", "4000", "1000 IN_SYNC",
		"SLAVE    127.0.0.1:10912", "500 FOLLOWING",
		"UNREACHABLE",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, dead) {
		t.Fatalf("no warning about the unreachable member:\n%s", errOut)
	}
	out, _, code = runMain("haStatus", "-b", "broker-a", "-n", ns.addr(), "--timeout", "1s", "-o", "json")
	var nodes []HANode
	if code != 0 || json.Unmarshal([]byte(out), &nodes) != nil || len(nodes) != 3 || nodes[1].Status.HAClientRuntimeInfo.MasterOffset != 4500 {
		t.Fatalf("json: exit %d\n%s", code, out)
	}
	if _, errOut, code := runMain("haStatus", "-b", "broker-z", "-n", ns.addr()); code != 1 || !strings.Contains(errOut, "not registered") {
		t.Fatalf("unknown broker: exit %d %s", code, errOut)
	}
}
