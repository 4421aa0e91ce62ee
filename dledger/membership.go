package dledger

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Membership is this node's place in the latest Raft configuration (possibly not yet committed),
// as the broker needs it to decide whether it still belongs to the group.
type Membership struct {
	// Configured is false while the node has no configuration at all: a node started with Join
	// that no leader has contacted yet.
	Configured bool
	// Voter: this node is a voter in the latest configuration.
	Voter bool
	// Servers is the number of servers in the latest configuration.
	Servers int
	// LeaderID is the leader this node knows ("" = none known now).
	LeaderID string
	// LastContact is when this node last heard from a leader (zero if never; now on a leader).
	LastContact time.Time
}

// Membership reports this node's place in the latest configuration. It takes no lock of Raft's
// main loop (the configuration is read atomically), so it is cheap enough to poll.
func (n *Node) Membership() Membership {
	var m Membership
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			m.Servers++
			if string(s.ID) == n.cfg.SelfID && s.Suffrage == raft.Voter {
				m.Voter = true
			}
		}
	}
	m.Configured = m.Servers > 0
	m.LeaderID, _ = n.Leader()
	m.LastContact = n.raft.LastContact()
	if n.IsLeader() {
		m.LastContact = time.Now()
	}
	return m
}

// TransferLeadership hands leadership to the voter id ("" = whichever follower is most up to date)
// and waits until it is done. It must be called on the leader (else a *NotLeaderError); transferring
// to the leader itself is a no-op.
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	if !n.IsLeader() {
		return n.translate(raft.ErrNotLeader)
	}
	var f raft.Future
	if id == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		if id == n.cfg.SelfID {
			return nil
		}
		addr, err := n.addressOf(id)
		if err != nil {
			return err
		}
		f = n.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(addr))
	}
	if err := wait(ctx, f); err != nil {
		return fmt.Errorf("dledger: transfer leadership to %q: %w", id, n.translate(err))
	}
	return nil
}

// AddVoter adds (or re-addresses) a voting member and waits until the configuration change is
// committed; the new node then catches up by log replication or snapshot. Leader only.
func (n *Node) AddVoter(ctx context.Context, id, addr string) error {
	if id == "" {
		return keyErr("dLegerPeers", "AddVoter needs an id")
	}
	if err := checkHostPort(addr); err != nil {
		return keyErr("dLegerPeers", "AddVoter %s: %v", id, err)
	}
	f := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, enqueueTimeout(ctx))
	if err := wait(ctx, f); err != nil {
		return fmt.Errorf("dledger: add voter %s: %w", id, n.translate(err))
	}
	return nil
}

// RemoveVoter removes a member and waits until the change is committed. Removing the leader itself
// makes it step down once the change commits. Leader only.
func (n *Node) RemoveVoter(ctx context.Context, id string) error {
	if _, err := n.addressOf(id); err != nil {
		return err
	}
	f := n.raft.RemoveServer(raft.ServerID(id), 0, enqueueTimeout(ctx))
	if err := wait(ctx, f); err != nil {
		return fmt.Errorf("dledger: remove voter %s: %w", id, n.translate(err))
	}
	return nil
}

// addressOf looks id up in the latest configuration.
func (n *Node) addressOf(id string) (string, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return "", n.translate(err)
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return string(s.Address), nil
		}
	}
	return "", fmt.Errorf("%w: %q", ErrUnknownPeer, id)
}
