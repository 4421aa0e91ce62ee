package namesrv

// Expired brokers and lost connections (§10.3). Both paths end in unregisterLocked, exactly as
// an UNREGISTER_BROKER would.

// ScanExpired removes every broker whose last registration (or heartbeat) is older than its
// timeout, and returns the removed brokers.
func (t *RouteTable) ScanExpired() []BrokerID {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var removed []BrokerID
	for key, live := range t.brokerLiveTable {
		if now.Sub(live.lastUpdate) > live.timeout {
			removed = append(removed, t.removeLocked(key))
		}
	}
	return removed
}

// RemoveConn removes every broker that registered over connection connID (which has closed),
// and returns them. Brokers that re-registered over a newer connection are kept.
func (t *RouteTable) RemoveConn(connID uint64) []BrokerID {
	if connID == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var removed []BrokerID
	for key, live := range t.brokerLiveTable {
		if live.connID == connID {
			removed = append(removed, t.removeLocked(key))
		}
	}
	return removed
}

// removeLocked finds the group and id of a live broker and unregisters it.
func (t *RouteTable) removeLocked(key brokerKey) BrokerID {
	b := BrokerID{ClusterName: key.cluster, BrokerAddr: key.addr, ID: -1}
	for name, bd := range t.brokerAddrTable {
		if bd.Cluster != key.cluster {
			continue
		}
		for id, addr := range bd.BrokerAddrs {
			if addr == key.addr {
				b.BrokerName, b.ID = name, id
			}
		}
	}
	if b.BrokerName == "" {
		// Address no longer in any group (moved or replaced): only the liveness record remains.
		delete(t.brokerLiveTable, key)
		delete(t.filterServerTable, key)
		return b
	}
	t.unregisterLocked(b)
	return b
}
