package broker

// Raft administration (request codes of ours, remoting/code.go), served in DLedger mode only; a
// classic broker answers REQUEST_CODE_NOT_SUPPORTED (3) with a remark saying so, as a broker that
// does not know the codes at all (Java's) would.
//
//	32001 GET_RAFT_STATUS       JSON body protocol.RaftStatus: this node's Raft state and store
//	                            offset. Any member answers for itself.
//	32002 TRANSFER_RAFT_LEADER  ext nodeId ("" = the most up-to-date follower)
//	32003 ADD_RAFT_PEER         ext nodeId, peerAddr (host:port of the new node's Raft transport)
//	32004 REMOVE_RAFT_PEER      ext nodeId
//
// The three changes run on the leader. A follower forwards them to the leader it finds as
// brokerId 0 in the route (as it forwards sends) and relays the answer; with no leader known, or
// a request already forwarded once, it answers SERVICE_NOT_AVAILABLE (14) naming the Raft leader
// when it knows one. Each change is bounded by ext timeoutMillis (what the caller is willing to
// wait, capped at raftAdminMaxTimeout; raftAdminDefaultTimeout when absent) and answers SUCCESS
// only once Raft reports it done: the transfer completed, the configuration change committed.
// A timeout answers SYSTEM_ERROR: the change may still complete.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"rocketraft/dledger"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

const (
	raftAdminDefaultTimeout = 5 * time.Second
	raftAdminMaxTimeout     = 60 * time.Second
)

// raftAdminGuard refuses the Raft membership and leadership changes with NO_PERMISSION when ACL
// is off, unless allowUnauthenticatedRaftAdmin is set: without ACL nobody is authenticated, and
// an ADD_RAFT_PEER from anyone would make their node a voter that receives the whole log. With
// ACL on, the ACL check (acl.go, adminCodes) already requires an admin account. Checked on the
// node a request reaches and again on the leader a follower forwards it to.
func (b *Broker) raftAdminGuard(h remoting.Handler) remoting.Handler {
	return func(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		if _, err := b.place.raft(); err == nil && b.acl == nil && !b.cfg.AllowUnauthenticatedRaftAdmin {
			b.logger.Warn("Raft administration refused: ACL is off", "code", req.Code, "remote", conn.RemoteAddr())
			return req.NewResponse(remoting.NoPermission, "Raft membership and leadership changes need aclEnable=true and an admin account, "+
				"or allowUnauthenticatedRaftAdmin=true on every node of the group (broker "+b.cfg.BrokerName+" at "+b.brokerAddr+")")
		}
		return h(conn, req)
	}
}

// notRaft is the answer of a classic-mode broker.
func (b *Broker) notRaft(req *remoting.Command) *remoting.Command {
	return req.NewResponse(remoting.RequestCodeNotSupported,
		"broker "+b.cfg.BrokerName+" at "+b.brokerAddr+" is not a DLedger broker (enableDLegerCommitLog=false): it has no Raft group")
}

// raftStatus assembles this node's RaftStatus.
func (b *Broker) raftStatus(rp *raftPlace) protocol.RaftStatus {
	st := rp.node.Status()
	now := time.Now()
	rs := protocol.RaftStatus{
		Group:            st.Group,
		Cluster:          b.cfg.BrokerClusterName,
		BrokerName:       b.cfg.BrokerName,
		NodeID:           st.ID,
		PeerAddr:         st.Addr,
		BrokerAddr:       b.brokerAddr,
		BrokerID:         b.brokerID(),
		BrokerRole:       b.roleName(),
		Role:             strings.ToLower(st.State),
		LeaderReady:      st.LeaderReady,
		Term:             st.Term,
		LastLogIndex:     st.LastLogIndex,
		CommitIndex:      st.CommitIndex,
		AppliedIndex:     st.AppliedIndex,
		LastContactAgoMs: -1,
		LeaderID:         st.LeaderID,
		LeaderAddr:       st.LeaderAddr,
		Peers:            []protocol.RaftPeer{},
		Timestamp:        now.UnixMilli(),
	}
	if s, release, err := b.acquireStore(); err == nil {
		rs.CommitLogMinOffset, rs.CommitLogMaxOffset = s.CommitLogMinOffset(), s.CommitLogMaxOffset()
		release()
	}
	if !st.LastContact.IsZero() {
		rs.LastContact = st.LastContact.UnixMilli()
		rs.LastContactAgoMs = max(0, now.Sub(st.LastContact).Milliseconds())
	}
	if rs.Role == protocol.RaftLeader {
		rs.LastContactAgoMs = 0 // a leader is its own contact (Status reports now)
	}
	for _, p := range st.Configuration {
		rs.Peers = append(rs.Peers, protocol.RaftPeer{ID: p.ID, Addr: p.Addr, Suffrage: p.Suffrage})
	}
	if idx, sum, ok := rp.fsm.Digest(); ok {
		rs.DigestIndex, rs.Digest = idx, fmt.Sprintf("%016x", sum)
	}
	rs.DigestCheckedIndex = rp.fsm.CheckedIndex()
	if d := rp.fsm.Diverged(); d != nil {
		rs.Role = protocol.RaftDiverged
		rs.Diverged = &protocol.RaftDivergence{
			Index: d.Index, CheckIndex: d.CheckIndex, CheckTerm: d.CheckTerm,
			LocalDigest: fmt.Sprintf("%016x", d.LocalDigest), LeaderDigest: fmt.Sprintf("%016x", d.LeaderDigest),
			Message: d.String(), At: d.At.UnixMilli(),
		}
	}
	return rs
}

func (b *Broker) handleGetRaftStatus(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	rp, err := b.place.raft()
	if err != nil {
		return b.notRaft(req)
	}
	return b.jsonResponse(req, b.raftStatus(rp))
}

// raftAdminContext bounds a change by the caller's timeoutMillis.
func raftAdminContext(req *remoting.Command) (context.Context, context.CancelFunc) {
	d := raftAdminDefaultTimeout
	if ms := req.ExtInt64Or("timeoutMillis", 0); ms > 0 {
		d = min(time.Duration(ms)*time.Millisecond, raftAdminMaxTimeout)
	}
	return context.WithTimeout(context.Background(), d)
}

// onLeader runs a change on the leader: here if this node leads, else forwarded to the leader.
func (b *Broker) onLeader(conn *remoting.Conn, req *remoting.Command, what string, change func(ctx context.Context, rp *raftPlace) error) *remoting.Command {
	rp, err := b.place.raft()
	if err != nil {
		return b.notRaft(req)
	}
	if !rp.node.IsLeader() {
		if resp := b.fwd.forwardWrite(conn, req); resp != nil {
			return resp
		}
		return req.NewResponse(remoting.ServiceNotAvailable, b.notLeaderRemark(rp, nil))
	}
	ctx, cancel := raftAdminContext(req)
	defer cancel()
	start := time.Now()
	if err := change(ctx, rp); err != nil {
		b.logger.Warn("raft admin change failed", "change", what, "error", err)
		return req.NewResponse(raftAdminErrorCode(err), what+" failed: "+b.raftAdminRemark(rp, err))
	}
	b.logger.Info("raft admin change done", "change", what, "took", time.Since(start).Round(time.Millisecond))
	return req.NewResponse(remoting.Success, "")
}

// notLeaderRemark says this node is not the leader and names the leader when known.
func (b *Broker) notLeaderRemark(rp *raftPlace, nle *dledger.NotLeaderError) string {
	id, addr := rp.node.Leader()
	if nle != nil {
		id, addr = nle.LeaderID, nle.LeaderAddr
	}
	if id == "" || id == rp.selfID {
		return "node " + rp.selfID + " of broker " + b.cfg.BrokerName + " is not the Raft leader and no leader is known (election in progress)"
	}
	return fmt.Sprintf("node %s of broker %s is not the Raft leader; the leader is %s (raft %s)", rp.selfID, b.cfg.BrokerName, id, addr)
}

func (b *Broker) raftAdminRemark(rp *raftPlace, err error) string {
	var nle *dledger.NotLeaderError
	switch {
	case errors.As(err, &nle):
		return b.notLeaderRemark(rp, nle)
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out; the change may still complete (check raftStatus): " + err.Error()
	}
	return err.Error()
}

// raftAdminErrorCode maps a dledger error onto a response code.
func raftAdminErrorCode(err error) int32 {
	var ce *dledger.ConfigError
	switch {
	case errors.Is(err, dledger.ErrNotLeader):
		return remoting.ServiceNotAvailable
	case errors.Is(err, dledger.ErrUnknownPeer), errors.As(err, &ce):
		return remoting.InvalidParameter
	}
	return remoting.SystemError
}

func (b *Broker) handleTransferRaftLeader(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	id := req.Ext("nodeId")
	what := "transfer leadership to " + id
	if id == "" {
		what = "transfer leadership to the most up-to-date follower"
	}
	return b.onLeader(conn, req, what, func(ctx context.Context, rp *raftPlace) error {
		return rp.node.TransferLeadership(ctx, id)
	})
}

func (b *Broker) handleAddRaftPeer(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	id, addr := req.Ext("nodeId"), req.Ext("peerAddr")
	if _, err := b.place.raft(); err == nil && (id == "" || addr == "") {
		return req.NewResponse(remoting.InvalidParameter, "ADD_RAFT_PEER needs nodeId and peerAddr")
	}
	return b.onLeader(conn, req, "add voter "+id+" at "+addr, func(ctx context.Context, rp *raftPlace) error {
		return rp.node.AddVoter(ctx, id, addr)
	})
}

func (b *Broker) handleRemoveRaftPeer(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	id := req.Ext("nodeId")
	if _, err := b.place.raft(); err == nil && id == "" {
		return req.NewResponse(remoting.InvalidParameter, "REMOVE_RAFT_PEER needs nodeId")
	}
	return b.onLeader(conn, req, "remove voter "+id, func(ctx context.Context, rp *raftPlace) error {
		return rp.node.RemoveVoter(ctx, id)
	})
}
