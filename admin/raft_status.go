package admin

// raftStatus: GET_BROKER_CLUSTER_INFO (106), then GET_RAFT_STATUS (32001, ours) to every
// registered address of every broker name (or of -b's), concurrently. Each group's leader is the
// node reporting role leader (the highest term wins if a deposed leader still thinks it leads);
// every node's lag is the leader's commit index minus the node's applied index, and its commitlog
// lag the leader's commitlog max offset minus its own (both 0 when caught up, never negative).
// Members of the Raft configuration that no registered address answered for are listed too
// (a killed node leaves the name servers at once): a stopped member stays visible.
// Unreachable nodes are shown as UNREACHABLE with a warning and do not fail the command; it fails
// only when no node of the asked groups answered with a Raft status.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/spf13/pflag"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// ErrNotRaft means a broker answered that it is not in DLedger mode (or does not know our codes).
var ErrNotRaft = errors.New("not a DLedger (Raft) broker")

// RaftStatus fetches GET_RAFT_STATUS from the broker at addr.
func (t *Tool) RaftStatus(ctx context.Context, addr string) (*protocol.RaftStatus, error) {
	resp, err := t.call(ctx, addr, remoting.GetRaftStatus, nil, nil)
	if err != nil {
		if IsCode(err, remoting.RequestCodeNotSupported) {
			return nil, fmt.Errorf("%w: %w", ErrNotRaft, err)
		}
		return nil, fmt.Errorf("get raft status: %w", err)
	}
	var rs protocol.RaftStatus
	if err := protocol.Decode(resp.Body, &rs); err != nil {
		return nil, fmt.Errorf("decode raft status from %s: %w", addr, err)
	}
	return &rs, nil
}

// RaftNode is one member of a group as raftStatus shows it: the node's own status, or why it
// could not be had.
type RaftNode struct {
	// Registered is how the name server lists the node (empty Addr for a member of the Raft
	// configuration that no registered address answered for).
	Registered BrokerAddr `json:"registered"`
	// NodeID and PeerAddr come from the status, or from the configuration for a missing member.
	NodeID   string               `json:"nodeId"`
	PeerAddr string               `json:"peerAddr"`
	Status   *protocol.RaftStatus `json:"status,omitempty"`
	// Lag is the leader's commit index minus this node's applied index; CommitLogLag the
	// leader's commitlog max offset minus this node's. -1 when unknown (no leader, no status).
	Lag          int64 `json:"lag"`
	CommitLogLag int64 `json:"commitLogLag"`
	// NotRaft: the broker answered that it is not in DLedger mode.
	NotRaft bool   `json:"notRaft,omitempty"`
	Error   string `json:"error,omitempty"`
}

// RaftGroup is one broker name's Raft group.
type RaftGroup struct {
	Cluster    string     `json:"cluster"`
	BrokerName string     `json:"brokerName"`
	LeaderID   string     `json:"leaderId"` // "" when no node reports itself leader
	Nodes      []RaftNode `json:"nodes"`
}

// RaftGroups asks every registered member of every broker group (or of brokerName) for its Raft
// status. Failures are recorded per node; it returns ErrNotFound for an unknown broker name and
// an error when no node answered with a Raft status at all.
func (t *Tool) RaftGroups(ctx context.Context, brokerName string) ([]RaftGroup, error) {
	ci, err := t.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	all, err := ClusterBrokers(ci, "", false)
	if err != nil {
		return nil, err
	}
	var members []BrokerAddr
	listed := map[string]bool{} // an address registered under two ids (mid role change) is asked once
	for _, b := range all {
		if (brokerName == "" || b.BrokerName == brokerName) && !listed[b.Addr] {
			listed[b.Addr] = true
			members = append(members, b)
		}
	}
	if len(members) == 0 {
		if brokerName != "" {
			return nil, fmt.Errorf("%w: broker %q is not registered with the name server", ErrNotFound, brokerName)
		}
		return nil, fmt.Errorf("%w: no broker is registered with the name server", ErrNotFound)
	}
	nodes := make([]RaftNode, len(members))
	done := make(chan struct{})
	for i, m := range members {
		go func() {
			defer func() { done <- struct{}{} }()
			nodes[i] = RaftNode{Registered: m, Lag: -1, CommitLogLag: -1}
			rs, err := t.RaftStatus(ctx, m.Addr)
			if err != nil {
				nodes[i].Error, nodes[i].NotRaft = err.Error(), errors.Is(err, ErrNotRaft)
				return
			}
			nodes[i].Status, nodes[i].NodeID, nodes[i].PeerAddr = rs, rs.NodeID, rs.PeerAddr
		}()
	}
	for range members {
		<-done
	}
	byName := map[string]*RaftGroup{}
	answered := false
	for _, n := range nodes {
		g := byName[n.Registered.BrokerName]
		if g == nil {
			g = &RaftGroup{Cluster: n.Registered.Cluster, BrokerName: n.Registered.BrokerName}
			byName[n.Registered.BrokerName] = g
		}
		g.Nodes = append(g.Nodes, n)
		answered = answered || n.Status != nil
	}
	out := make([]RaftGroup, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		g := byName[name]
		g.complete()
		out = append(out, *g)
	}
	if !answered {
		var errs []error
		for _, n := range nodes {
			errs = append(errs, fmt.Errorf("%s (%s): %s", n.Registered.Addr, n.Registered.BrokerName, n.Error))
		}
		return out, fmt.Errorf("no broker answered with a Raft status: %w", errors.Join(errs...))
	}
	return out, nil
}

// complete adds the configuration's missing members, finds the leader, computes lags and sorts
// the nodes by node id.
func (g *RaftGroup) complete() {
	var leader *protocol.RaftStatus
	seen := map[string]bool{}
	for _, n := range g.Nodes {
		if s := n.Status; s != nil {
			seen[s.NodeID] = true
			if s.Role == protocol.RaftLeader && (leader == nil || s.Term > leader.Term) {
				leader = s
			}
		}
	}
	// The configuration as the leader sees it, else as the node with the highest term does.
	conf := leader
	if conf == nil {
		for _, n := range g.Nodes {
			if s := n.Status; s != nil && (conf == nil || s.Term > conf.Term) {
				conf = s
			}
		}
	}
	if conf != nil {
		for _, p := range conf.Peers {
			if !seen[p.ID] {
				g.Nodes = append(g.Nodes, RaftNode{
					Registered: BrokerAddr{Cluster: g.Cluster, BrokerName: g.BrokerName, ID: -1},
					NodeID:     p.ID, PeerAddr: p.Addr, Lag: -1, CommitLogLag: -1,
					Error: "member of the Raft configuration (" + p.Suffrage + ") that no registered broker address answered for",
				})
			}
		}
	}
	if leader != nil {
		g.LeaderID = leader.NodeID
		for i := range g.Nodes {
			if s := g.Nodes[i].Status; s != nil {
				g.Nodes[i].Lag = max(0, int64(leader.CommitIndex)-int64(s.AppliedIndex))
				g.Nodes[i].CommitLogLag = max(0, leader.CommitLogMaxOffset-s.CommitLogMaxOffset)
			}
		}
	}
	slices.SortStableFunc(g.Nodes, func(a, b RaftNode) int {
		// Unknown node ids (unreachable registered addresses) last, by broker id.
		return cmp.Or(cmp.Compare(boolInt(a.NodeID == ""), boolInt(b.NodeID == "")), cmp.Compare(a.NodeID, b.NodeID),
			cmp.Compare(a.Registered.ID, b.Registered.ID))
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// lastContact renders a node's last contact with the leader as an age.
func lastContact(s *protocol.RaftStatus) string {
	switch {
	case s.Role == protocol.RaftLeader:
		return "-"
	case s.LastContactAgoMs < 0:
		return "never"
	}
	return (time.Duration(s.LastContactAgoMs) * time.Millisecond).String()
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func lagCell(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

var raftStatusCommand = &command{
	name:    "raftStatus",
	summary: "Show the Raft state of every node of every DLedger broker group (or of one)",
	args:    "[-b <brokerName>]",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var brokerName string
		fs.StringVarP(&brokerName, "brokerName", "b", "", "only this broker group")
		return func(ctx context.Context, t *Tool) error {
			groups, err := t.RaftGroups(ctx, brokerName)
			if groups == nil {
				return err
			}
			for _, g := range groups {
				for _, n := range g.Nodes {
					if n.Error != "" {
						t.warnf("%s node %s at %s: %s", g.BrokerName, orNone(n.NodeID), cmp.Or(n.Registered.Addr, n.PeerAddr), n.Error)
					}
				}
			}
			if t.jsonOut() {
				if perr := t.printJSON(groups); perr != nil {
					return perr
				}
				return err
			}
			for i, g := range groups {
				if i > 0 {
					t.printf("\n")
				}
				tb := newTable("#Broker Name", "#Node", "#Addr", "#Peer Addr", "#Role", "#Term", "#Last Index", "#Commit",
					"#Applied", "#Lag", "#CommitLog Max", "#Last Contact")
				for _, n := range g.Nodes {
					s := n.Status
					switch {
					case s != nil:
						tb.add(g.BrokerName, s.NodeID, s.BrokerAddr, s.PeerAddr, s.Role, s.Term, s.LastLogIndex, s.CommitIndex,
							s.AppliedIndex, lagCell(n.Lag), s.CommitLogMaxOffset, lastContact(s))
					case n.NotRaft:
						tb.add(g.BrokerName, "-", n.Registered.Addr, "-", "NOT_RAFT", "-", "-", "-", "-", "-", "-", "-")
					default:
						tb.add(g.BrokerName, orNone(n.NodeID), orNone(n.Registered.Addr), orNone(n.PeerAddr), unreachable,
							"-", "-", "-", "-", "-", "-", "-")
					}
				}
				if perr := tb.write(t.cfg.Out); perr != nil {
					return perr
				}
				for _, n := range g.Nodes {
					if n.Status != nil && n.Status.Diverged != nil {
						t.warnf("%s node %s: DIVERGED, it serves nothing and must be rebuilt from its group: %s", g.BrokerName, n.Status.NodeID, n.Status.Diverged.Message)
					}
					if n.Status != nil && n.Status.LogStoreMismatch != "" {
						t.warnf("%s node %s: RAFT LOG STORE MISMATCH, it refuses its leader's entries and falls behind: %s", g.BrokerName, n.Status.NodeID, n.Status.LogStoreMismatch)
					}
				}
			}
			return err
		}
	},
}
