package namesrv

import "testing"

// TestLegacySlaveLearnsRegisteredMasterOnly: a classic slave (brokerId 10) of a DLedger group
// learns the registered leader's address and HA address from its REGISTER_BROKER answer, never
// a route's stand-in master: while the group has no registered master the answer is empty (the
// slave keeps its previous master), and once the new leader registers the answer names it.
func TestLegacySlaveLearnsRegisteredMasterOnly(t *testing.T) {
	rt := NewRouteTable(nil, 0)
	w := topics(1, topic("T", 4, 6))
	fwd := func(r Registration) Registration { r.ForwardsWrites = true; return r }
	mustRegister(t, rt, fwd(reg("g", "n0:1", 0, w)))
	mustRegister(t, rt, fwd(reg("g", "n1:1", 2, w)))
	mustRegister(t, rt, fwd(reg("g", "n2:1", 3, w)))
	if res := mustRegister(t, rt, reg("g", "legacy:1", 10, w)); res.MasterAddr != "n0:1" || res.HaServerAddr != "n0:1-ha" {
		t.Fatalf("legacy slave's answer with n0 leading: %+v", res)
	}
	rt.Unregister(BrokerID{ClusterName: "DefaultCluster", BrokerName: "g", BrokerAddr: "n0:1", ID: 0})
	if r, _ := rt.Route("T", false); r == nil {
		t.Fatal("no route")
	}
	if res := mustRegister(t, rt, reg("g", "legacy:1", 10, w)); res.MasterAddr != "" || res.HaServerAddr != "" {
		t.Fatalf("legacy slave's answer without a registered master names the stand-in: %+v", res)
	}
	mustRegister(t, rt, fwd(reg("g", "n2:1", 0, w)))
	if res := mustRegister(t, rt, reg("g", "legacy:1", 10, w)); res.MasterAddr != "n2:1" || res.HaServerAddr != "n2:1-ha" {
		t.Fatalf("legacy slave's answer after n2 registered as master: %+v", res)
	}
}
