package admin

// haStatus: GET_BROKER_CLUSTER_INFO (106), then GET_BROKER_HA_STATUS (907) to every registered
// member of -b's broker group (or of every group), concurrently: who follows whom over classic
// HA and how far behind. A master (a classic master, or a DLedger group's leader serving legacy
// slaves) lists its slave connections with their acknowledged offset and lag in bytes; a slave
// shows the master HA address it follows, its own commitlog max offset and how far behind the
// master offset it last saw it is. An unreachable broker is shown with a warning; the command
// fails only when no broker answered.

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// HAStatus fetches GET_BROKER_HA_STATUS from the broker at addr.
func (t *Tool) HAStatus(ctx context.Context, addr string) (*protocol.HARuntimeInfo, error) {
	resp, err := t.call(ctx, addr, remoting.GetBrokerHAStatus, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("get HA status: %w", err)
	}
	var info protocol.HARuntimeInfo
	if err := protocol.Decode(resp.Body, &info); err != nil {
		return nil, fmt.Errorf("decode HA status from %s: %w", addr, err)
	}
	return &info, nil
}

// HANode is one registered broker's HA status, or why it could not be had.
type HANode struct {
	Registered BrokerAddr              `json:"registered"`
	Status     *protocol.HARuntimeInfo `json:"status,omitempty"`
	Error      string                  `json:"error,omitempty"`
}

// HANodes asks every registered member of brokerName ("" = every group) for its HA status.
func (t *Tool) HANodes(ctx context.Context, brokerName string) ([]HANode, error) {
	ci, err := t.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	all, err := ClusterBrokers(ci, "", false)
	if err != nil {
		return nil, err
	}
	var nodes []HANode
	for _, b := range all {
		if brokerName == "" || b.BrokerName == brokerName {
			nodes = append(nodes, HANode{Registered: b})
		}
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: broker %q is not registered with the name server", ErrNotFound, brokerName)
	}
	done := make(chan struct{})
	for i := range nodes {
		go func() {
			defer func() { done <- struct{}{} }()
			st, err := t.HAStatus(ctx, nodes[i].Registered.Addr)
			if err != nil {
				nodes[i].Error = err.Error()
				return
			}
			nodes[i].Status = st
		}()
	}
	for range nodes {
		<-done
	}
	return nodes, nil
}

var haStatusCommand = &command{
	name:    "haStatus",
	summary: "Show classic HA replication: which slave follows which master and how far behind",
	args:    "[-b <brokerName>]",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var brokerName string
		fs.StringVarP(&brokerName, "brokerName", "b", "", "broker group (default: every group)")
		return func(ctx context.Context, t *Tool) error {
			nodes, err := t.HANodes(ctx, brokerName)
			if err != nil {
				return err
			}
			answered := false
			for _, n := range nodes {
				answered = answered || n.Status != nil
			}
			var failed error
			if !answered {
				failed = errors.New("no broker answered GET_BROKER_HA_STATUS")
			}
			if t.jsonOut() {
				if err := t.printJSON(nodes); err != nil {
					return err
				}
				return failed
			}
			t.printf("%-24s %-4s %-22s %-8s %-22s %14s %12s %s\n", "#Broker", "#Id", "#Addr", "#Role", "#Follows/Slave", "#Offset", "#Behind", "#State")
			for _, n := range nodes {
				r := n.Registered
				if n.Status == nil {
					t.warnf("%s (%s id %d): %s", r.Addr, r.BrokerName, r.ID, n.Error)
					t.printf("%-24s %-4d %-22s %-8s %-22s %14s %12s %s\n", r.BrokerName, r.ID, r.Addr, "-", "-", "-", "-", "UNREACHABLE")
					continue
				}
				st := n.Status
				c := st.HAClientRuntimeInfo
				if c.MasterAddr != "" || !st.Master {
					behind := "-"
					if c.MasterOffset >= 0 {
						behind = fmt.Sprint(max(0, c.MasterOffset-c.MaxOffset))
					}
					state, follows := "DISCONNECTED", c.MasterAddr
					if c.IsActivated {
						state = "FOLLOWING"
					}
					if follows == "" { // a DLedger follower, or a slave that knows no master yet
						state, follows = "NOT_FOLLOWING", "-"
					}
					t.printf("%-24s %-4d %-22s %-8s %-22s %14d %12s %s\n", r.BrokerName, r.ID, r.Addr, "SLAVE", follows, c.MaxOffset, behind, state)
					continue
				}
				t.printf("%-24s %-4d %-22s %-8s %-22s %14d %12s %s\n", r.BrokerName, r.ID, r.Addr, "MASTER",
					fmt.Sprintf("%d slave(s)", len(st.HAConnectionInfo)), st.MasterCommitLogMaxOffset, "-", fmt.Sprintf("%d in sync", st.InSyncSlaveNums))
				for _, s := range st.HAConnectionInfo {
					state := "NOT_IN_SYNC"
					if s.InSync {
						state = "IN_SYNC"
					}
					t.printf("%-24s %-4s %-22s %-8s %-22s %14d %12d %s\n", "", "", "", "  <-", s.Addr, s.SlaveAckOffset, s.Diff, state)
				}
			}
			return failed
		}
	},
}
