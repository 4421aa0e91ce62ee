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
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/config"
	"rocketraft/dledger"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

const (
	raftAdminDefaultTimeout = 5 * time.Second
	raftAdminMaxTimeout     = 60 * time.Second
)

// raftAdmin owns what a node does about its Raft group beyond replicating: the administration
// requests above, the membership watch (membership.go: removal, joining, catch-up), the
// preferred-leader hand-over and the reaction to a failed digest check (digestcheck.go). It is
// built once in New from the parts it uses, so it can be exercised without a broker; in classic
// mode its place has no Raft group and it answers with notRaft.
type raftAdmin struct {
	place  raftAdminPlace
	cfg    *config.Broker
	logger hclog.Logger
	// aclOn: ACL checks every request (acl.go), so the changes need no guard of their own.
	aclOn bool
	// addr is the advertised broker address (known once Start listens).
	addr func() string
	// ns reads routes from the name servers; peers asks other members for their status.
	ns    raftInvoker
	peers raftInvoker
	// forward relays a change a follower received to the leader (forward.go, forwardWrite);
	// leaderAddr finds the leader's broker address (forward.go, leaderBrokerAddr).
	forward    remoting.Handler
	leaderAddr func(ctx context.Context) string
	// unregister takes this node out of every name server (register.go, unregisterAll).
	unregister func()
	// wg and stop are the broker's: background work joins wg and ends when stop closes.
	wg   *sync.WaitGroup
	stop <-chan struct{}
}

// raftAdminPlace is what raftAdmin asks of the node's place (place.go): the Raft group (or
// errNotRaft), the store for offsets, and how the node registers.
type raftAdminPlace interface {
	raft() (*raftPlace, error)
	acquire() (*storage.Store, func(), error)
	brokerID() int64
	roleName() string
}

// raftInvoker is the part of a remoting client raftAdmin sends through; unit tests fake it.
type raftInvoker interface {
	Invoke(ctx context.Context, addr string, req *remoting.Command) (*remoting.Command, error)
	CloseAddr(addr string)
}

// guard refuses the Raft membership and leadership changes with NO_PERMISSION when ACL
// is off, unless allowUnauthenticatedRaftAdmin is set: without ACL nobody is authenticated, and
// an ADD_RAFT_PEER from anyone would make their node a voter that receives the whole log. With
// ACL on, the ACL check (acl.go, adminCodes) already requires an admin account. Checked on the
// node a request reaches and again on the leader a follower forwards it to.
func (ra *raftAdmin) guard(h remoting.Handler) remoting.Handler {
	return func(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		if _, err := ra.place.raft(); err == nil && !ra.aclOn && !ra.cfg.AllowUnauthenticatedRaftAdmin {
			ra.logger.Warn("Raft administration refused: ACL is off", "code", req.Code, "remote", conn.RemoteAddr())
			return req.NewResponse(remoting.NoPermission, "Raft membership and leadership changes need aclEnable=true and an admin account, "+
				"or allowUnauthenticatedRaftAdmin=true on every node of the group (broker "+ra.cfg.BrokerName+" at "+ra.addr()+")")
		}
		return h(conn, req)
	}
}

// notRaft is the answer of a classic-mode broker.
func (ra *raftAdmin) notRaft(req *remoting.Command) *remoting.Command {
	return req.NewResponse(remoting.RequestCodeNotSupported,
		"broker "+ra.cfg.BrokerName+" at "+ra.addr()+" is not a DLedger broker (enableDLegerCommitLog=false): it has no Raft group")
}

// raftStatus assembles this node's RaftStatus.
func (ra *raftAdmin) raftStatus(rp *raftPlace) protocol.RaftStatus {
	st := rp.node.Status()
	now := time.Now()
	rs := protocol.RaftStatus{
		Group:            st.Group,
		Cluster:          ra.cfg.BrokerClusterName,
		BrokerName:       ra.cfg.BrokerName,
		NodeID:           st.ID,
		PeerAddr:         st.Addr,
		BrokerAddr:       ra.addr(),
		BrokerID:         ra.place.brokerID(),
		BrokerRole:       ra.place.roleName(),
		Role:             strings.ToLower(st.State),
		LeaderReady:      st.LeaderReady,
		Term:             st.Term,
		LastLogIndex:     st.LastLogIndex,
		CommitIndex:      st.CommitIndex,
		AppliedIndex:     st.AppliedIndex,
		LastContactAgoMs: -1,
		LogStoreMismatch: st.LogStoreMismatch,
		LeaderID:         st.LeaderID,
		LeaderAddr:       st.LeaderAddr,
		Peers:            []protocol.RaftPeer{},
		Timestamp:        now.UnixMilli(),
	}
	if s, release, err := ra.place.acquire(); err == nil {
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

// handleGetRaftStatus answers GET_RAFT_STATUS with this node's own RaftStatus.
func (ra *raftAdmin) handleGetRaftStatus(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	rp, err := ra.place.raft()
	if err != nil {
		return ra.notRaft(req)
	}
	return jsonResponse(req, ra.raftStatus(rp))
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
func (ra *raftAdmin) onLeader(conn *remoting.Conn, req *remoting.Command, what string, change func(ctx context.Context, rp *raftPlace) error) *remoting.Command {
	rp, err := ra.place.raft()
	if err != nil {
		return ra.notRaft(req)
	}
	if !rp.node.IsLeader() {
		if resp := ra.forward(conn, req); resp != nil {
			return resp
		}
		return req.NewResponse(remoting.ServiceNotAvailable, ra.notLeaderRemark(rp, nil))
	}
	ctx, cancel := raftAdminContext(req)
	defer cancel()
	start := time.Now()
	if err := change(ctx, rp); err != nil {
		ra.logger.Warn("raft admin change failed", "change", what, "error", err)
		return req.NewResponse(raftAdminErrorCode(err), what+" failed: "+ra.raftAdminRemark(rp, err))
	}
	ra.logger.Info("raft admin change done", "change", what, "took", time.Since(start).Round(time.Millisecond))
	return req.NewResponse(remoting.Success, "")
}

// notLeaderRemark says this node is not the leader and names the leader when known.
// (The leader named by nle, when given, is the one the refusing Raft node reported.)
func (ra *raftAdmin) notLeaderRemark(rp *raftPlace, nle *dledger.NotLeaderError) string {
	var id, addr string
	if nle != nil {
		id, addr = nle.LeaderID, nle.LeaderAddr
	} else {
		id, addr = rp.node.Leader()
	}
	if id == "" || id == rp.selfID {
		return "node " + rp.selfID + " of broker " + ra.cfg.BrokerName + " is not the Raft leader and no leader is known (election in progress)"
	}
	return fmt.Sprintf("node %s of broker %s is not the Raft leader; the leader is %s (raft %s)", rp.selfID, ra.cfg.BrokerName, id, addr)
}

// raftAdminRemark explains a failed change so the operator knows what to do next: ask the
// leader, or check whether a timed-out change completed anyway.
func (ra *raftAdmin) raftAdminRemark(rp *raftPlace, err error) string {
	var nle *dledger.NotLeaderError
	switch {
	case errors.As(err, &nle):
		return ra.notLeaderRemark(rp, nle)
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

// handleTransferRaftLeader hands leadership to nodeId, or to the most up-to-date follower.
func (ra *raftAdmin) handleTransferRaftLeader(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	id := req.Ext("nodeId")
	what := "transfer leadership to " + id
	if id == "" {
		what = "transfer leadership to the most up-to-date follower"
	}
	return ra.onLeader(conn, req, what, func(ctx context.Context, rp *raftPlace) error {
		return rp.node.TransferLeadership(ctx, id)
	})
}

// handleAddRaftPeer makes nodeId at peerAddr a voter (the leader then feeds it the snapshot).
func (ra *raftAdmin) handleAddRaftPeer(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	id, addr := req.Ext("nodeId"), req.Ext("peerAddr")
	if _, err := ra.place.raft(); err == nil && (id == "" || addr == "") {
		return req.NewResponse(remoting.InvalidParameter, "ADD_RAFT_PEER needs nodeId and peerAddr")
	}
	return ra.onLeader(conn, req, "add voter "+id+" at "+addr, func(ctx context.Context, rp *raftPlace) error {
		return rp.node.AddVoter(ctx, id, addr)
	})
}

// handleRemoveRaftPeer drops nodeId from the configuration (membership.go: what it then does).
func (ra *raftAdmin) handleRemoveRaftPeer(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	id := req.Ext("nodeId")
	if _, err := ra.place.raft(); err == nil && id == "" {
		return req.NewResponse(remoting.InvalidParameter, "REMOVE_RAFT_PEER needs nodeId")
	}
	return ra.onLeader(conn, req, "remove voter "+id, func(ctx context.Context, rp *raftPlace) error {
		return rp.node.RemoveVoter(ctx, id)
	})
}
