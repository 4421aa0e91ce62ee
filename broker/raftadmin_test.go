package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	"rocketraft/config"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// invokeBroker sends one request to b's remoting address.
func invokeBroker(t *testing.T, b *Broker, code int32, ext map[string]string) *remoting.Command {
	t.Helper()
	c := remoting.NewClient(remoting.ClientConfig{DialTimeout: 3 * time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, b.Addr(), remoting.NewRequest(code, ext, nil))
	if err != nil {
		t.Fatalf("invoke %d: %v", code, err)
	}
	return resp
}

// GET_RAFT_STATUS on a one-node group reports the node as leader with its indexes and the
// store's commitlog offset; the changes run on it with their errors mapped to response codes.
func TestRaftAdminSingleNode(t *testing.T) {
	peer := freeAddr(t)
	b := startDLeger(t, dlegerConfig(t, t.TempDir(), "n0", "n0-"+peer))
	defer b.Close()
	waitRole(t, b, roleLeader)
	if _, err := b.commitLog.Append(context.Background(), [][]byte{testRecord(t, "T", "a"), testRecord(t, "T", "b")}); err != nil {
		t.Fatal(err)
	}

	resp := invokeBroker(t, b, remoting.GetRaftStatus, nil)
	if resp.Code != remoting.Success {
		t.Fatalf("code %d %q", resp.Code, resp.Remark)
	}
	var rs protocol.RaftStatus
	if err := protocol.Decode(resp.Body, &rs); err != nil {
		t.Fatal(err)
	}
	if rs.NodeID != "n0" || rs.PeerAddr != peer || rs.BrokerAddr != b.Addr() || rs.BrokerName != "raft-unit" ||
		rs.Group != "raft-unit" || rs.Role != protocol.RaftLeader || !rs.LeaderReady || rs.BrokerID != 0 ||
		rs.BrokerRole != config.RoleSyncMaster || rs.LeaderID != "n0" || rs.LeaderAddr != peer {
		t.Fatalf("identity/role: %+v", rs)
	}
	if rs.Term == 0 || rs.LastLogIndex < 3 || rs.CommitIndex != rs.LastLogIndex || rs.AppliedIndex != rs.CommitIndex {
		// bootstrap configuration, the leader's no-op, the append: at least 3 entries, all applied
		t.Fatalf("indexes: %+v", rs)
	}
	if st, err := b.runtimeH.storeStats(); err != nil || rs.CommitLogMaxOffset != st.CommitLogMaxOffset || st.CommitLogMaxOffset == 0 {
		want := st.CommitLogMaxOffset
		t.Fatalf("commitlog max offset %d, store %d", rs.CommitLogMaxOffset, want)
	}
	if rs.LastContact == 0 || rs.LastContactAgoMs != 0 || rs.Timestamp == 0 {
		t.Fatalf("last contact: %+v", rs)
	}
	if len(rs.Peers) != 1 || rs.Peers[0] != (protocol.RaftPeer{ID: "n0", Addr: peer, Suffrage: "Voter"}) {
		t.Fatalf("peers %+v", rs.Peers)
	}

	// ACL off and allowUnauthenticatedRaftAdmin=false (the default): the changes are refused.
	for _, code := range []int32{remoting.TransferRaftLeader, remoting.AddRaftPeer, remoting.RemoveRaftPeer} {
		resp := invokeBroker(t, b, code, map[string]string{"nodeId": "n1", "peerAddr": freeAddr(t)})
		if resp.Code != remoting.NoPermission || !strings.Contains(resp.Remark, "allowUnauthenticatedRaftAdmin") {
			t.Errorf("%d with ACL off: code %d %q, want NO_PERMISSION", code, resp.Code, resp.Remark)
		}
	}
	if rs2 := raftStatusOf(t, b); len(rs2.Peers) != 1 {
		t.Fatalf("a refused ADD_RAFT_PEER changed the membership: %+v", rs2.Peers)
	}
	b.cfg.AllowUnauthenticatedRaftAdmin = true

	for _, c := range []struct {
		code   int32
		ext    map[string]string
		want   int32
		remark string
	}{
		{remoting.TransferRaftLeader, map[string]string{"nodeId": "n0"}, remoting.Success, ""}, // already the leader
		{remoting.TransferRaftLeader, map[string]string{"nodeId": "n9"}, remoting.InvalidParameter, "unknown peer"},
		{remoting.RemoveRaftPeer, map[string]string{"nodeId": "n9"}, remoting.InvalidParameter, "unknown peer"},
		{remoting.RemoveRaftPeer, nil, remoting.InvalidParameter, "needs nodeId"},
		{remoting.AddRaftPeer, map[string]string{"nodeId": "n1"}, remoting.InvalidParameter, "needs nodeId and peerAddr"},
		{remoting.AddRaftPeer, map[string]string{"nodeId": "n1", "peerAddr": "nohostport"}, remoting.InvalidParameter, "n1"},
	} {
		resp := invokeBroker(t, b, c.code, c.ext)
		if resp.Code != c.want || !strings.Contains(resp.Remark, c.remark) {
			t.Errorf("%d %v: code %d %q, want %d containing %q", c.code, c.ext, resp.Code, resp.Remark, c.want, c.remark)
		}
	}
}

// A classic broker answers every Raft admin code with REQUEST_CODE_NOT_SUPPORTED and says why.
func TestRaftAdminClassicBroker(t *testing.T) {
	cfg := config.NewBroker()
	cfg.BrokerName = "classic-unit"
	cfg.StorePathRootDir = t.TempDir()
	cfg.ListenPort = 0
	cfg.NamesrvAddr = freeAddr(t)
	cfg.MappedFileSizeCommitLog = 1 << 20
	cfg.MapedFileSizeConsumeQueue = 1000 * 20
	cfg.Normalize()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	b := startDLeger(t, cfg)
	defer b.Close()
	for _, code := range []int32{remoting.GetRaftStatus, remoting.TransferRaftLeader, remoting.AddRaftPeer, remoting.RemoveRaftPeer} {
		resp := invokeBroker(t, b, code, map[string]string{"nodeId": "n1", "peerAddr": "127.0.0.1:1"})
		if resp.Code != remoting.RequestCodeNotSupported || !strings.Contains(resp.Remark, "not a DLedger broker") {
			t.Errorf("code %d: %d %q", code, resp.Code, resp.Remark)
		}
	}
}

func raftStatusOf(t *testing.T, b *Broker) protocol.RaftStatus {
	t.Helper()
	resp := invokeBroker(t, b, remoting.GetRaftStatus, nil)
	var rs protocol.RaftStatus
	if err := protocol.Decode(resp.Body, &rs); err != nil {
		t.Fatal(err)
	}
	return rs
}
