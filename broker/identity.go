package broker

// Role is the broker's role now (brokerRole, or SYNC_MASTER/SLAVE as Raft decides in DLedger
// mode), for the start-up banner.
func (b *Broker) Role() string { return b.roleName() }

// BrokerID is the id the broker registers under now, for the start-up banner.
func (b *Broker) BrokerID() int64 { return b.brokerID() }

// OnLeadership subscribes fn to this node's leadership in DLedger mode: true once it is the ready
// leader, false when it stops leading; never called in classic mode. The process's owner uses it
// for what follows the role outside the broker (the scheduler's CPU count, cmd/mqbroker). Call it
// before Start; fn runs on the role watcher's goroutine and must not block.
func (b *Broker) OnLeadership(fn func(leading bool)) {
	b.place.onRoleChange(func(role int32) { fn(role == roleLeader) })
}
