package broker

import (
	"strings"
	"testing"

	"rocketraft/config"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// TestWaitReplicasAdapter: only a SYNC_MASTER's sends that wait for the store (WAIT not false)
// wait for a slave; with none connected they are answered SLAVE_NOT_AVAILABLE. An ASYNC_MASTER
// answers SUCCESS and reports itself master without slaves.
func TestWaitReplicasAdapter(t *testing.T) {
	results := []storage.AppendResult{{PhysicalOffset: 0, Size: 100}}
	// waitStore is the send plan's WAIT (sendplan.go): false only for WAIT=false.
	hdr := func(wait string) bool { return wait != "false" }
	sync := classicBroker(t, func(c *config.Broker) { c.BrokerRole = config.RoleSyncMaster })
	if code, _ := sync.waitReplicas(hdr(""), results); code != remoting.SlaveNotAvailable {
		t.Fatalf("SYNC_MASTER without a slave: %d", code)
	}
	if code, _ := sync.waitReplicas(hdr("false"), results); code != remoting.Success {
		t.Fatalf("WAIT=false: %d", code)
	}
	if code, _ := sync.waitReplicas(hdr(""), nil); code != remoting.Success {
		t.Fatalf("nothing stored: %d", code)
	}
	async := classicBroker(t, func(c *config.Broker) { c.BrokerRole = config.RoleAsyncMaster })
	if code, _ := async.waitReplicas(hdr(""), results); code != remoting.Success {
		t.Fatalf("ASYNC_MASTER: %d", code)
	}
	resp := async.handleHAStatus(nil, remoting.NewRequest(remoting.GetBrokerHAStatus, nil, nil))
	var info protocol.HARuntimeInfo
	if err := protocol.Decode(resp.Body, &info); err != nil || !info.Master || len(info.HAConnectionInfo) != 0 {
		t.Fatalf("HA status %+v %v", info, err)
	}
	table := map[string]string{}
	async.addHARuntimeInfo(table)
	if table["brokerId"] != "0" {
		t.Fatalf("runtime info %v", table)
	}
}

// TestEndTransactionAdapter: END_TRANSACTION with a bad header is SYSTEM_ERROR naming the field,
// an unknown state is SUCCESS and writes nothing, and a commit naming no half message is
// SYSTEM_ERROR with RocketMQ's remark.
func TestEndTransactionAdapter(t *testing.T) {
	b := classicBroker(t, func(*config.Broker) {})
	end := func(ext map[string]string) *remoting.Command {
		return b.sender.handleEndTransaction(nil, remoting.NewRequest(remoting.EndTransaction, ext, nil))
	}
	if r := end(map[string]string{"tranStateTableOffset": "0", "commitLogOffset": "0", "commitOrRollback": "8"}); r.Code != remoting.SystemError || !strings.Contains(r.Remark, "producerGroup") {
		t.Fatalf("no group: %d %q", r.Code, r.Remark)
	}
	if r := end(map[string]string{"producerGroup": "PG", "tranStateTableOffset": "0", "commitLogOffset": "0", "commitOrRollback": "0"}); r.Code != remoting.Success {
		t.Fatalf("unknown: %d %q", r.Code, r.Remark)
	}
	if r := end(map[string]string{"producerGroup": "PG", "tranStateTableOffset": "0", "commitLogOffset": "4096", "commitOrRollback": "8"}); r.Code != remoting.SystemError || !strings.Contains(r.Remark, "Find prepared transaction message failed") {
		t.Fatalf("no half: %d %q", r.Code, r.Remark)
	}
	if n, err := b.txn.Unresolved(); err != nil || n != 0 {
		t.Fatalf("unresolved %d %v", n, err)
	}
}
