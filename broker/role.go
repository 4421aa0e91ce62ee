package broker

import (
	"sync/atomic"
	"time"
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
func (b *Broker) watchRole(rp *raftPlace) {
	defer b.wg.Done()
	if id := b.cfg.PreferredLeaderID; id != "" && id != rp.selfID {
		b.wg.Add(1)
		go b.raftAdmin.preferredLeaderLoop(rp)
	}
	tick := time.NewTicker(leaderPollInterval)
	defer tick.Stop()
	changes := rp.node.LeaderChanges()
	members := newMemberWatch(rp)
	for {
		var next int32
		select {
		case <-b.stop:
			return
		case leader := <-changes:
			if !leader && rp.excluded() {
				continue // a removed node stays unregistered
			}
			next = roleFollower
			if leader {
				next = roleLeader
			}
		case now := <-tick.C:
			b.raftAdmin.watchMembership(rp, members, now)
			if rp.role.get() != roleUnknown || rp.excluded() {
				continue
			}
			id, _ := rp.node.Leader()
			if id == "" || id == rp.selfID { // our own leadership arrives on changes, after the Barrier
				continue
			}
			next = roleFollower
		}
		if rp.setRole(next) {
			rp.notify(next)
		}
	}
}

// roleChanged is the broker's subscription to its place's role changes (New): log, serve legacy
// HA slaves while the ready leader (ha.go), and re-register at once.
func (b *Broker) roleChanged(role int32) {
	b.logger.Info("role changed", "role", b.roleName(), "brokerId", b.brokerID())
	b.repl.RoleChanged(role == roleLeader) // the ready leader serves legacy HA slaves (broker/replication)
	b.reg.triggerNow()
}

// brokerID is the id this node registers under: the configured brokerId in classic mode; in
// DLedger mode 0 for the leader and peer index + 1 otherwise.
func (b *Broker) brokerID() int64 { return b.place.brokerID() }

// roleName is the brokerRole reported by GET_BROKER_RUNTIME_INFO and the status page.
func (b *Broker) roleName() string { return b.place.roleName() }

// writable reports whether this node may take a write now (place.writable).
func (b *Broker) writable() (ok bool, remark string) { return b.place.writable() }
