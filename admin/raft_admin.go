package admin

// transferLeader, addPeer, removePeer: TRANSFER_RAFT_LEADER (32002), ADD_RAFT_PEER (32003) and
// REMOVE_RAFT_PEER (32004), ours, sent to the group's leader: the master (brokerId 0) the name
// server lists for the broker name, else any registered member (a follower forwards the change to
// the leader and relays the answer). The broker answers once Raft reports the change done; it
// bounds the change by the timeoutMillis it is sent (most of --timeout), so its answer arrives
// before the call gives up.

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"

	"rocketraft/remoting"
)

// RaftChangeResult is the outcome of one Raft membership or leadership change.
type RaftChangeResult struct {
	BrokerName string `json:"brokerName"`
	Op         string `json:"op"` // transferLeader, addPeer, removePeer
	NodeID     string `json:"nodeId"`
	PeerAddr   string `json:"peerAddr,omitempty"`
	SentTo     string `json:"sentTo"`
	Success    bool   `json:"success"`
	Error      string `json:"error,omitempty"`
}

// groupLeaderAddr returns the address to send a change of brokerName's group to: its master's,
// else the lowest-id member's.
func (t *Tool) groupLeaderAddr(ctx context.Context, brokerName string) (string, error) {
	ci, err := t.ClusterInfo(ctx)
	if err != nil {
		return "", err
	}
	bd := ci.BrokerAddrTable[brokerName]
	if bd == nil || len(bd.BrokerAddrs) == 0 {
		return "", fmt.Errorf("%w: broker %q is not registered with the name server", ErrNotFound, brokerName)
	}
	m := members(bd, false)
	return m[0].Addr, nil // sorted by id: the master first when there is one
}

// raftChange sends one change to the group's leader.
func (t *Tool) raftChange(ctx context.Context, res *RaftChangeResult, code int32, ext map[string]string) (*RaftChangeResult, error) {
	addr, err := t.groupLeaderAddr(ctx, res.BrokerName)
	if err != nil {
		return nil, err
	}
	res.SentTo = addr
	// Leave the broker a margin to answer before the call times out.
	ext["timeoutMillis"] = strconv.FormatInt(max(100, (t.cfg.Timeout*4/5).Milliseconds()), 10)
	if _, err := t.call(ctx, addr, code, ext, nil); err != nil {
		res.Error = err.Error()
		return res, fmt.Errorf("%s %s: %w", res.Op, res.BrokerName, err)
	}
	res.Success = true
	return res, nil
}

// TransferLeader hands the leadership of brokerName's group to nodeID ("" = the most
// up-to-date follower).
func (t *Tool) TransferLeader(ctx context.Context, brokerName, nodeID string) (*RaftChangeResult, error) {
	res := &RaftChangeResult{BrokerName: brokerName, Op: "transferLeader", NodeID: nodeID}
	return t.raftChange(ctx, res, remoting.TransferRaftLeader, map[string]string{"nodeId": nodeID})
}

// AddPeer adds nodeID at peerAddr (its Raft host:port) as a voter of brokerName's group.
func (t *Tool) AddPeer(ctx context.Context, brokerName, nodeID, peerAddr string) (*RaftChangeResult, error) {
	res := &RaftChangeResult{BrokerName: brokerName, Op: "addPeer", NodeID: nodeID, PeerAddr: peerAddr}
	return t.raftChange(ctx, res, remoting.AddRaftPeer, map[string]string{"nodeId": nodeID, "peerAddr": peerAddr})
}

// RemovePeer removes nodeID from brokerName's group.
func (t *Tool) RemovePeer(ctx context.Context, brokerName, nodeID string) (*RaftChangeResult, error) {
	res := &RaftChangeResult{BrokerName: brokerName, Op: "removePeer", NodeID: nodeID}
	return t.raftChange(ctx, res, remoting.RemoveRaftPeer, map[string]string{"nodeId": nodeID})
}

// printChange prints a change's outcome: JSON, or one line on success.
func (t *Tool) printChange(res *RaftChangeResult, err error, line string) error {
	if res == nil {
		return err
	}
	if t.jsonOut() {
		if perr := t.printJSON(res); perr != nil {
			return perr
		}
		return err
	}
	if err == nil {
		t.printf("%s (sent to %s)\n", line, res.SentTo)
	}
	return err
}

var transferLeaderCommand = &command{
	name:    "transferLeader",
	summary: "Hand the Raft leadership of a DLedger broker group to a node",
	args:    "-b <brokerName> [-t <nodeId>]",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var brokerName, nodeID string
		fs.StringVarP(&brokerName, "brokerName", "b", "", "broker group (brokerName)")
		fs.StringVarP(&nodeID, "nodeId", "t", "", "node to lead (dLegerSelfId); empty: the most up-to-date follower")
		return func(ctx context.Context, t *Tool) error {
			if err := required(fs, "brokerName"); err != nil {
				return err
			}
			res, err := t.TransferLeader(ctx, brokerName, nodeID)
			target := nodeID
			if target == "" {
				target = "the most up-to-date follower"
			}
			return t.printChange(res, err, fmt.Sprintf("transfer leadership of %s to %s success.", brokerName, target))
		}
	},
}

var addPeerCommand = &command{
	name:    "addPeer",
	summary: "Add a voting node to a DLedger broker group",
	args:    "-b <brokerName> -i <nodeId> -a <host:port>",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var brokerName, nodeID, peerAddr string
		fs.StringVarP(&brokerName, "brokerName", "b", "", "broker group (brokerName)")
		fs.StringVarP(&nodeID, "nodeId", "i", "", "the new node's id (its dLegerSelfId)")
		fs.StringVarP(&peerAddr, "peerAddr", "a", "", "the new node's Raft address (host:port, as in dLegerPeers)")
		return func(ctx context.Context, t *Tool) error {
			if err := required(fs, "brokerName", "nodeId", "peerAddr"); err != nil {
				return err
			}
			res, err := t.AddPeer(ctx, brokerName, nodeID, peerAddr)
			return t.printChange(res, err, fmt.Sprintf("add peer %s (%s) to %s success.", nodeID, peerAddr, brokerName))
		}
	},
}

var removePeerCommand = &command{
	name:    "removePeer",
	summary: "Remove a node from a DLedger broker group",
	args:    "-b <brokerName> -i <nodeId>",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var brokerName, nodeID string
		fs.StringVarP(&brokerName, "brokerName", "b", "", "broker group (brokerName)")
		fs.StringVarP(&nodeID, "nodeId", "i", "", "the node's id (dLegerSelfId)")
		return func(ctx context.Context, t *Tool) error {
			if err := required(fs, "brokerName", "nodeId"); err != nil {
				return err
			}
			res, err := t.RemovePeer(ctx, brokerName, nodeID)
			return t.printChange(res, err, fmt.Sprintf("remove peer %s from %s success.", nodeID, brokerName))
		}
	},
}
