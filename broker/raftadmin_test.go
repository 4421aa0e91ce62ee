package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"rocketraft/config"
	"rocketraft/dledger"
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

// adminRaftPlace is a Raft place without a Raft node: enough for what reads only its identity,
// role and flags.
func adminRaftPlace(self string, peers ...dledger.Peer) *raftPlace {
	return &raftPlace{raftGroup: &raftGroup{selfID: self, group: "rb", peers: peers}}
}

func TestRaftAdminHeartbeatAndRemovalGrace(t *testing.T) {
	for _, c := range []struct {
		ms               int64
		heartbeat, grace time.Duration
	}{
		{0, dledger.DefaultHeartbeatTimeout, 2 * time.Second}, // 4 x 500 ms is under the 2 s floor
		{200, 200 * time.Millisecond, 2 * time.Second},
		{1500, 1500 * time.Millisecond, 6 * time.Second},
	} {
		ra, _, _, _ := testRaftAdmin(nil)
		ra.cfg.DLegerHeartbeatTimeoutMs = c.ms
		if hb, g := ra.heartbeatTimeout(), ra.removalGrace(); hb != c.heartbeat || g != c.grace {
			t.Errorf("dLegerHeartbeatTimeoutMs=%d: heartbeat %v grace %v, want %v %v", c.ms, hb, g, c.heartbeat, c.grace)
		}
	}
}

// A classic broker answers every Raft administration code REQUEST_CODE_NOT_SUPPORTED, naming
// itself, and never forwards.
func TestRaftAdminClassicAnswersNotRaft(t *testing.T) {
	ra, _, _, _ := testRaftAdmin(nil)
	ra.forward = func(*remoting.Conn, *remoting.Command) *remoting.Command {
		t.Fatal("a classic broker forwarded a Raft admin request")
		return nil
	}
	handlers := map[string]remoting.Handler{
		"status":   ra.handleGetRaftStatus,
		"transfer": ra.guard(ra.handleTransferRaftLeader),
		"add":      ra.guard(ra.handleAddRaftPeer),
		"remove":   ra.guard(ra.handleRemoveRaftPeer),
	}
	for name, h := range handlers {
		// No nodeId: the parameter check is a Raft member's; a classic broker says it is none.
		resp := h(nil, remoting.NewRequest(remoting.AddRaftPeer, nil, nil))
		want := "broker rb at 127.0.0.1:10911 is not a DLedger broker (enableDLegerCommitLog=false): it has no Raft group"
		if resp.Code != remoting.RequestCodeNotSupported || resp.Remark != want {
			t.Errorf("%s: %d %q", name, resp.Code, resp.Remark)
		}
	}
}

// The guard lets a change through with ACL on, or with allowUnauthenticatedRaftAdmin, and on a
// classic broker (which refuses it as not Raft).
func TestRaftAdminGuardLetsThrough(t *testing.T) {
	for _, c := range []struct {
		name        string
		raft, aclOn bool
		allowNoAuth bool
	}{
		{"classic", false, false, false},
		{"acl on", true, true, false},
		{"allow unauthenticated", true, false, true},
	} {
		var rp *raftPlace
		if c.raft {
			rp = adminRaftPlace("n0")
		}
		ra, _, _, out := testRaftAdmin(rp)
		ra.aclOn, ra.cfg.AllowUnauthenticatedRaftAdmin = c.aclOn, c.allowNoAuth
		calls := 0
		h := ra.guard(func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
			calls++
			return req.NewResponse(remoting.Success, "ran")
		})
		resp := h(nil, remoting.NewRequest(remoting.TransferRaftLeader, nil, nil))
		if calls != 1 || resp.Code != remoting.Success || resp.Remark != "ran" {
			t.Errorf("%s: handler ran %d times, answer %d %q", c.name, calls, resp.Code, resp.Remark)
		}
		if strings.Contains(out.String(), "refused") {
			t.Errorf("%s: logged a refusal: %s", c.name, out.String())
		}
	}
}

// A Raft member checks the parameters of ADD_RAFT_PEER and REMOVE_RAFT_PEER before anything
// else.
func TestRaftAdminPeerParameters(t *testing.T) {
	ra, _, _, _ := testRaftAdmin(adminRaftPlace("n0"))
	for _, c := range []struct {
		h      remoting.Handler
		ext    map[string]string
		remark string
	}{
		{ra.handleAddRaftPeer, nil, "ADD_RAFT_PEER needs nodeId and peerAddr"},
		{ra.handleAddRaftPeer, map[string]string{"nodeId": "n3"}, "ADD_RAFT_PEER needs nodeId and peerAddr"},
		{ra.handleAddRaftPeer, map[string]string{"peerAddr": "127.0.0.1:40911"}, "ADD_RAFT_PEER needs nodeId and peerAddr"},
		{ra.handleRemoveRaftPeer, nil, "REMOVE_RAFT_PEER needs nodeId"},
	} {
		resp := c.h(nil, remoting.NewRequest(remoting.AddRaftPeer, c.ext, nil))
		if resp.Code != remoting.InvalidParameter || resp.Remark != c.remark {
			t.Errorf("%v: %d %q, want %q", c.ext, resp.Code, resp.Remark, c.remark)
		}
	}
}

// The remarks name the leader the refusing node reported, or say an election is on, and tell
// the operator a timed-out change may still complete.
func TestRaftAdminRemarks(t *testing.T) {
	rp := adminRaftPlace("n1")
	ra, _, _, _ := testRaftAdmin(rp)
	for _, c := range []struct {
		err  error
		want string
	}{
		{&dledger.NotLeaderError{LeaderID: "n2", LeaderAddr: "127.0.0.1:40912"},
			"node n1 of broker rb is not the Raft leader; the leader is n2 (raft 127.0.0.1:40912)"},
		{fmt.Errorf("transfer: %w", &dledger.NotLeaderError{}),
			"node n1 of broker rb is not the Raft leader and no leader is known (election in progress)"},
		{&dledger.NotLeaderError{LeaderID: "n1"}, // itself: it just lost leadership
			"node n1 of broker rb is not the Raft leader and no leader is known (election in progress)"},
		{fmt.Errorf("add voter: %w", context.DeadlineExceeded),
			"timed out; the change may still complete (check raftStatus): add voter: context deadline exceeded"},
		{errors.New("disk on fire"), "disk on fire"},
	} {
		if got := ra.raftAdminRemark(rp, c.err); got != c.want {
			t.Errorf("%v: %q, want %q", c.err, got, c.want)
		}
	}
}

func TestRaftAdminErrorCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int32
	}{
		{&dledger.NotLeaderError{LeaderID: "n2"}, remoting.ServiceNotAvailable},
		{dledger.ErrNotLeader, remoting.ServiceNotAvailable},
		{fmt.Errorf("remove n9: %w", dledger.ErrUnknownPeer), remoting.InvalidParameter},
		{&dledger.ConfigError{Key: "peerAddr", Msg: "not host:port"}, remoting.InvalidParameter},
		{context.DeadlineExceeded, remoting.SystemError},
		{errors.New("other"), remoting.SystemError},
	} {
		if got := raftAdminErrorCode(c.err); got != c.want {
			t.Errorf("%v: code %d, want %d", c.err, got, c.want)
		}
	}
}

// A change waits what the caller allows, capped, or the default.
func TestRaftAdminContextTimeout(t *testing.T) {
	for _, c := range []struct {
		ext  map[string]string
		want time.Duration
	}{
		{nil, raftAdminDefaultTimeout},
		{map[string]string{"timeoutMillis": "0"}, raftAdminDefaultTimeout},
		{map[string]string{"timeoutMillis": "1500"}, 1500 * time.Millisecond},
		{map[string]string{"timeoutMillis": "3600000"}, raftAdminMaxTimeout},
	} {
		before := time.Now()
		ctx, cancel := raftAdminContext(remoting.NewRequest(remoting.AddRaftPeer, c.ext, nil))
		after := time.Now()
		deadline, ok := ctx.Deadline()
		cancel()
		if !ok || deadline.Before(before.Add(c.want)) || deadline.After(after.Add(c.want)) {
			t.Errorf("%v: deadline in %v, want %v", c.ext, deadline.Sub(before), c.want)
		}
	}
}
