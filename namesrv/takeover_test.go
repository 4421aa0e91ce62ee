package namesrv

import (
	"errors"
	"testing"
	"time"

	"rocketraft/protocol"
)

func masterOf(t *testing.T, rt *RouteTable, topicName string) string {
	t.Helper()
	r, ok := rt.Route(topicName, false)
	if !ok {
		t.Fatalf("no route for %s", topicName)
	}
	return r.BrokerDatas[0].BrokerAddrs[protocol.MasterID]
}

// With the guard on, a live broker cannot be replaced from another address (unless the new
// address is a live member of its group: failover) or unregistered from another connection; a
// registration silent for half its expiry can be taken over.
func TestTakeoverGuard(t *testing.T) {
	clk := newFakeClock()
	rt := NewRouteTable(clk.Now, 120*time.Second)
	rt.GuardTakeover(true)
	w := topics(1, topic("T", 4, 6))
	r := reg("B", "10.0.0.1:10911", 0, w)
	r.ConnID = 7
	mustRegister(t, rt, r)

	// A stranger registering B/0 from elsewhere is refused; the route keeps the real master.
	if _, err := rt.Register(reg("B", "10.6.6.6:10911", 0, topics(99, topic("T", 4, 6)))); !errors.Is(err, ErrTakeoverRefused) {
		t.Fatalf("takeover from a stranger: %v", err)
	}
	if got := masterOf(t, rt, "T"); got != "10.0.0.1:10911" {
		t.Fatalf("master after a refused takeover: %s", got)
	}
	// ... and so is its UNREGISTER_BROKER on another connection.
	id := BrokerID{ClusterName: "DefaultCluster", BrokerName: "B", BrokerAddr: "10.0.0.1:10911", ID: 0}
	if err := rt.UnregisterFrom(id, 99); !errors.Is(err, ErrTakeoverRefused) {
		t.Fatalf("unregister from another connection: %v", err)
	}
	if got := masterOf(t, rt, "T"); got != "10.0.0.1:10911" {
		t.Fatalf("master after a refused unregister: %s", got)
	}

	// Failover: a live member (registered as slave 1) registers as master.
	mustRegister(t, rt, reg("B", "10.0.0.2:10911", 1, w))
	mustRegister(t, rt, reg("B", "10.0.0.2:10911", 0, topics(2, topic("T", 4, 6))))
	if got := masterOf(t, rt, "T"); got != "10.0.0.2:10911" {
		t.Fatalf("master after failover: %s", got)
	}

	// A registration silent for half its expiry may be taken over.
	clk.Advance(61 * time.Second)
	mustRegister(t, rt, reg("B", "10.0.0.3:10911", 0, topics(3, topic("T", 4, 6))))
	if got := masterOf(t, rt, "T"); got != "10.0.0.3:10911" {
		t.Fatalf("master after taking over a silent registration: %s", got)
	}

	// The broker's own unregistration (its registering connection) goes through.
	r4 := reg("B4", "10.0.0.4:10911", 0, topics(1, topic("T4", 1, 6)))
	r4.ConnID = 11
	mustRegister(t, rt, r4)
	if err := rt.UnregisterFrom(BrokerID{ClusterName: "DefaultCluster", BrokerName: "B4", BrokerAddr: "10.0.0.4:10911"}, 11); err != nil {
		t.Fatalf("own unregister: %v", err)
	}
	if _, ok := rt.Route("T4", false); ok {
		t.Fatal("T4 still routed after its broker unregistered")
	}

	// Guard off (ACL on, or allowBrokerTakeover=true): RocketMQ's rules.
	rt.GuardTakeover(false)
	mustRegister(t, rt, reg("B", "10.6.6.6:10911", 0, topics(9, topic("T", 4, 6))))
}
