package namesrv

// Takeover guard (ACL off; Config.AllowBrokerTakeover=false, the default).
//
// Without ACL nobody who sends REGISTER_BROKER or UNREGISTER_BROKER is authenticated, so with
// RocketMQ's rules anyone could register a process of their own under a live broker's name and
// id (redirecting its routes) or unregister every broker. The guard refuses the two requests
// that change who a live broker is:
//
//   - a REGISTER_BROKER for a broker name and id that another address holds, while that
//     registration is live (refreshed within half its expiry), unless the new address is
//     already a live member of the same group (same cluster and broker name, under another id).
//     That exception is DLedger failover: the new leader was registered as a slave of the group
//     and now registers as brokerId 0 while the old leader's registration may still be live;
//     likewise a classic slave promoted by hand.
//   - an UNREGISTER_BROKER of a live registration arriving on another connection than the one
//     that registered it (a broker unregisters on the connection it registers on; when that
//     connection closes its registration goes anyway, RemoveConn).
//
// New broker names and ids are still accepted from anyone, as RocketMQ does: the guard keeps
// the registrations that exist, it does not authenticate (docs/operations.md "ACL"). With ACL on, both
// requests need an admin signature and the guard is off.

import (
	"errors"
	"fmt"
)

// ErrTakeoverRefused wraps the guard's refusals.
var ErrTakeoverRefused = errors.New("refused: the broker is registered live from another address or connection (aclEnable=false, allowBrokerTakeover=false)")

// GuardTakeover turns the takeover guard on or off (see the file comment).
func (t *RouteTable) GuardTakeover(on bool) {
	t.mu.Lock()
	t.guardTakeover = on
	t.mu.Unlock()
}

// freshLocked reports whether a live registration was refreshed within half its expiry.
func (t *RouteTable) freshLocked(live *brokerLive) bool {
	return live != nil && t.now().Sub(live.lastUpdate) < live.timeout/2
}

// checkTakeoverLocked is Register's guard; nil lets the registration through.
func (t *RouteTable) checkTakeoverLocked(r Registration) error {
	if !t.guardTakeover {
		return nil
	}
	bd := t.brokerAddrTable[r.BrokerName]
	if bd == nil {
		return nil
	}
	old, ok := bd.BrokerAddrs[r.BrokerID]
	if !ok || old == r.BrokerAddr || !t.freshLocked(t.brokerLiveTable[brokerKey{bd.Cluster, old}]) {
		return nil
	}
	if bd.Cluster == r.ClusterName {
		for id, addr := range bd.BrokerAddrs {
			if addr == r.BrokerAddr && id != r.BrokerID && t.brokerLiveTable[brokerKey{r.ClusterName, addr}] != nil {
				return nil // a member of the group taking over the id (failover)
			}
		}
	}
	return fmt.Errorf("%w: broker %s id %d is registered from %s, not %s", ErrTakeoverRefused, r.BrokerName, r.BrokerID, old, r.BrokerAddr)
}

// UnregisterFrom is Unregister for an UNREGISTER_BROKER that arrived on connection connID; with
// the guard on, a live registration made on another connection is kept and an error returned.
func (t *RouteTable) UnregisterFrom(b BrokerID, connID uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.guardTakeover {
		live := t.brokerLiveTable[brokerKey{b.ClusterName, b.BrokerAddr}]
		if live != nil && live.connID != 0 && live.connID != connID && t.freshLocked(live) {
			return fmt.Errorf("%w: broker %s at %s registered on another connection", ErrTakeoverRefused, b.BrokerName, b.BrokerAddr)
		}
	}
	t.unregisterLocked(b)
	return nil
}
