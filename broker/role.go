package broker

import (
	"fmt"
	"sync/atomic"
	"time"

	"rocketraft/config"
)

// Role of a DLedger-mode node as registered with the name servers.
const (
	roleUnknown  int32 = iota // no role decision yet, or removed from the group: register nothing
	roleLeader                // Raft leader with everything committed applied: brokerId 0
	roleFollower              // a leader is known and it is not us, or we lost leadership
)

// roleState is the node's current role; the zero value is roleUnknown.
type roleState struct{ v atomic.Int32 }

func (r *roleState) get() int32 { return r.v.Load() }

// set stores role and reports whether it changed.
func (r *roleState) set(role int32) bool { return r.v.Swap(role) != role }

// leaderPollInterval is how often a node with no role yet asks Raft whether a leader is known:
// LeaderChanges reports only this node's own leadership, so a follower learns its role by
// seeing someone else lead.
const leaderPollInterval = 50 * time.Millisecond

// watchRole maps Raft leadership onto the broker role and re-registers at once on every change.
// It also watches this node's membership (removal, joining, catch-up; membership.go) and
// starts the preferred-leader check when preferredLeaderId names another node.
func (b *Broker) watchRole() {
	defer b.wg.Done()
	if id := b.cfg.PreferredLeaderID; id != "" && id != b.raft.selfID {
		b.wg.Add(1)
		go b.preferredLeaderLoop()
	}
	tick := time.NewTicker(leaderPollInterval)
	defer tick.Stop()
	changes := b.raft.node.LeaderChanges()
	members := newMemberWatch(b)
	for {
		var next int32
		select {
		case <-b.stop:
			return
		case leader := <-changes:
			if !leader && b.raft.excluded() {
				continue // a removed node stays unregistered
			}
			next = roleFollower
			if leader {
				next = roleLeader
			}
		case now := <-tick.C:
			b.watchMembership(members, now)
			if b.role.get() != roleUnknown || b.raft.excluded() {
				continue
			}
			id, _ := b.raft.node.Leader()
			if id == "" || id == b.raft.selfID { // our own leadership arrives on changes, after the Barrier
				continue
			}
			next = roleFollower
		}
		if next == roleLeader && b.role.get() != roleLeader {
			// Before the role: a lock decision that sees the role sees this leadership's start.
			b.leaderAt.Store(time.Now().UnixNano())
		}
		if b.role.set(next) {
			if next != roleLeader && b.offsetBatch != nil {
				b.offsetBatch.drop()
			}
			b.logger.Info("role changed", "role", b.roleName(), "brokerId", b.brokerID())
			b.repl.RoleChanged(next == roleLeader) // the ready leader serves legacy HA slaves (broker/replication)
			b.triggerRegisterNow()
		}
	}
}

// brokerID is the id this node registers under: the configured brokerId in classic mode; in
// DLedger mode 0 for the leader and peer index + 1 otherwise.
func (b *Broker) brokerID() int64 {
	if b.raft == nil {
		return b.cfg.BrokerID
	}
	if b.role.get() == roleLeader {
		return 0
	}
	return int64(b.raft.index) + 1
}

// roleName is the brokerRole reported by GET_BROKER_RUNTIME_INFO and the status page.
func (b *Broker) roleName() string {
	if b.raft == nil {
		return b.cfg.BrokerRole
	}
	if b.role.get() == roleLeader {
		return config.RoleSyncMaster
	}
	return config.RoleSlave
}

// writable reports whether this node may take a write now. In DLedger mode only the ready
// leader may; otherwise the answer is SERVICE_NOT_AVAILABLE (14), which every client retries on
// another broker, with a remark naming the leader when one is known. A classic SLAVE never
// takes a write (its commitlog is the master's copy): SERVICE_NOT_AVAILABLE, as a 4.x slave.
func (b *Broker) writable() (ok bool, remark string) {
	if b.raft == nil && b.cfg.BrokerRole == config.RoleSlave {
		return false, fmt.Sprintf("service not available now: broker %s brokerId %d is a SLAVE; send to its master", b.cfg.BrokerName, b.cfg.BrokerID)
	}
	if b.raft == nil || b.role.get() == roleLeader {
		return true, ""
	}
	if b.raft.diskFailed.Load() {
		return false, "service not available now: node " + b.raft.selfID + " of broker " + b.cfg.BrokerName + " had a DISK FAILURE and is stopping; send to the group's new leader"
	}
	if b.raft.excluded() {
		return false, "service not available now: node " + b.raft.selfID + " of broker " + b.cfg.BrokerName + " was removed from the Raft group"
	}
	id, addr := b.raft.node.Leader()
	if id == "" || id == b.raft.selfID {
		return false, "service not available now: broker " + b.cfg.BrokerName + " node " + b.raft.selfID + " is not the Raft leader and no leader is ready (election in progress)"
	}
	return false, "service not available now: broker " + b.cfg.BrokerName + " node " + b.raft.selfID + " is a follower; the leader is " + id + " (raft " + addr + ")"
}
