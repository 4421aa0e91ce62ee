package broker

// Role is the broker's role now (brokerRole, or SYNC_MASTER/SLAVE as Raft decides in DLedger
// mode), for the start-up banner.
func (b *Broker) Role() string { return b.roleName() }

// BrokerID is the id the broker registers under now, for the start-up banner.
func (b *Broker) BrokerID() int64 { return b.brokerID() }
