package namesrv

import (
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"rocketraft/protocol"
)

// fakeClock is a manually advanced clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1700000000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func topics(counter int64, tcs ...*protocol.TopicConfig) *protocol.TopicConfigSerializeWrapper {
	w := &protocol.TopicConfigSerializeWrapper{TopicConfigTable: map[string]*protocol.TopicConfig{}, DataVersion: protocol.DataVersion{Counter: counter, Timestamp: 1}}
	for _, tc := range tcs {
		w.TopicConfigTable[tc.TopicName] = tc
	}
	return w
}

func topic(name string, queues int32, perm int32) *protocol.TopicConfig {
	return &protocol.TopicConfig{TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: perm, TopicFilterType: protocol.FilterSingleTag}
}

func reg(name, addr string, id int64, w *protocol.TopicConfigSerializeWrapper) Registration {
	return Registration{ClusterName: "DefaultCluster", BrokerName: name, BrokerAddr: addr, HaServerAddr: addr + "-ha", BrokerID: id, Topics: w}
}

func mustRegister(t *testing.T, rt *RouteTable, r Registration) RegisterResult {
	t.Helper()
	res, err := rt.Register(r)
	if err != nil {
		t.Fatalf("register %+v: %v", r, err)
	}
	return res
}

func TestRegisterMasterAndSlave(t *testing.T) {
	rt := NewRouteTable(nil, 0)
	w := topics(1, topic("T", 4, 6), topic("X", 2, 6))
	res := mustRegister(t, rt, reg("broker-a", "10.0.0.1:10911", 0, w))
	if res != (RegisterResult{}) {
		t.Fatalf("master result %+v", res)
	}
	// The slave's topic table is ignored: only the master contributes queue data.
	res = mustRegister(t, rt, reg("broker-a", "10.0.0.2:10911", 1, topics(9, topic("T", 16, 6), topic("SlaveOnly", 1, 6))))
	if res.MasterAddr != "10.0.0.1:10911" || res.HaServerAddr != "10.0.0.1:10911-ha" {
		t.Fatalf("slave result %+v", res)
	}
	route, ok := rt.Route("T", false)
	if !ok {
		t.Fatal("no route for T")
	}
	want := &protocol.TopicRouteData{
		QueueDatas:        []*protocol.QueueData{{BrokerName: "broker-a", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}},
		BrokerDatas:       []*protocol.BrokerData{{Cluster: "DefaultCluster", BrokerName: "broker-a", BrokerAddrs: map[int64]string{0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}}},
		FilterServerTable: map[string][]string{},
	}
	if !reflect.DeepEqual(route, want) {
		t.Fatalf("route\n got %+v\nwant %+v", route, want)
	}
	if _, ok := rt.Route("SlaveOnly", false); ok {
		t.Fatal("slave contributed a topic")
	}
	ci := rt.ClusterInfo()
	if !reflect.DeepEqual(ci.ClusterAddrTable, map[string][]string{"DefaultCluster": {"broker-a"}}) || len(ci.BrokerAddrTable["broker-a"].BrokerAddrs) != 2 {
		t.Fatalf("cluster info %+v", ci)
	}
	if got := rt.Topics(); !reflect.DeepEqual(got, []string{"T", "X"}) {
		t.Fatalf("topics %v", got)
	}
}

func TestRouteIsACopy(t *testing.T) {
	rt := NewRouteTable(nil, 0)
	mustRegister(t, rt, reg("b", "a:1", 0, topics(1, topic("T", 4, 6))))
	r1, _ := rt.Route("T", false)
	r1.QueueDatas[0].Perm = 0
	r1.BrokerDatas[0].BrokerAddrs[0] = "evil"
	r2, _ := rt.Route("T", false)
	if r2.QueueDatas[0].Perm != 6 || r2.BrokerDatas[0].BrokerAddrs[0] != "a:1" {
		t.Fatal("route shares state with the table")
	}
}

func TestSlaveToMasterSwitch(t *testing.T) {
	rt := NewRouteTable(nil, 0)
	mustRegister(t, rt, reg("g", "n0:1", 0, topics(1, topic("T", 4, 6))))
	mustRegister(t, rt, reg("g", "n1:1", 1, topics(1, topic("T", 4, 6))))
	// Failover: n0 is gone, n1 becomes the master and registers as id 0.
	rt.Unregister(BrokerID{ClusterName: "DefaultCluster", BrokerName: "g", BrokerAddr: "n0:1", ID: 0})
	route, ok := rt.Route("T", false)
	if !ok || route.BrokerDatas[0].MasterAddr() != "" {
		t.Fatalf("after master loss: ok=%v route %+v", ok, route)
	}
	mustRegister(t, rt, reg("g", "n1:1", 0, topics(1, topic("T", 4, 6))))
	route, _ = rt.Route("T", false)
	if got := route.BrokerDatas[0].BrokerAddrs; !reflect.DeepEqual(got, map[int64]string{0: "n1:1"}) {
		t.Fatalf("addrs after switch %v", got)
	}
	// Old master comes back as a slave and learns the new master's address.
	res := mustRegister(t, rt, reg("g", "n0:1", 1, topics(1, topic("T", 4, 6))))
	if res.MasterAddr != "n1:1" || res.HaServerAddr != "n1:1-ha" {
		t.Fatalf("slave result %+v", res)
	}
	route, _ = rt.Route("T", false)
	if got := route.BrokerDatas[0].BrokerAddrs; !reflect.DeepEqual(got, map[int64]string{0: "n1:1", 1: "n0:1"}) {
		t.Fatalf("addrs %v", got)
	}
}

func TestDataVersionDecidesRebuild(t *testing.T) {
	rt := NewRouteTable(nil, 0)
	mustRegister(t, rt, reg("b", "a:1", 0, topics(1, topic("T", 4, 6))))
	// Same version, different content: ignored (the broker did not bump its version).
	mustRegister(t, rt, reg("b", "a:1", 0, topics(1, topic("T", 8, 6))))
	if r, _ := rt.Route("T", false); r.QueueDatas[0].WriteQueueNums != 4 {
		t.Fatalf("rebuilt without a version change: %+v", r.QueueDatas[0])
	}
	// Same version but a topic new to this broker: added.
	mustRegister(t, rt, reg("b", "a:1", 0, topics(1, topic("T", 8, 6), topic("U", 2, 6))))
	if _, ok := rt.Route("U", false); !ok {
		t.Fatal("new topic not added")
	}
	// Bumped version: rebuilt.
	mustRegister(t, rt, reg("b", "a:1", 0, topics(2, topic("T", 8, 6))))
	if r, _ := rt.Route("T", false); r.QueueDatas[0].WriteQueueNums != 8 {
		t.Fatalf("not rebuilt: %+v", r.QueueDatas[0])
	}
	if v, ok := rt.DataVersionOf("DefaultCluster", "a:1"); !ok || v.Counter != 2 {
		t.Fatalf("version %+v %v", v, ok)
	}
}

func TestIncrementalRegistrationFromUnknownBrokerRefused(t *testing.T) {
	rt := NewRouteTable(nil, 0)
	no := false
	inc := reg("b", "a:1", 0, topics(1, topic("T", 4, 6)))
	inc.EnableActingMaster = &no
	_, err := rt.Register(inc)
	if !errors.Is(err, ErrRegisterRefused) {
		t.Fatalf("err %v", err)
	}
	if ci := rt.ClusterInfo(); len(ci.BrokerAddrTable) != 0 || len(ci.ClusterAddrTable) != 0 {
		t.Fatalf("refused registration left state: %+v", ci)
	}
	full := reg("b", "a:1", 0, topics(1, topic("T", 4, 6), topic("TBW102", 8, 7)))
	full.EnableActingMaster = &no
	mustRegister(t, rt, full)
	inc = reg("b", "a:1", 0, topics(2, topic("New", 4, 6)))
	inc.EnableActingMaster = &no
	mustRegister(t, rt, inc) // now known: accepted
	// A 4.x-style broker (no enableActingMaster) may register a single topic first.
	mustRegister(t, rt, reg("c", "c:1", 0, topics(1, topic("Solo", 1, 6))))
	if _, ok := rt.Route("New", false); !ok {
		t.Fatal("incremental registration not applied")
	}
}

func TestTopicNotExist(t *testing.T) {
	rt := NewRouteTable(nil, 0)
	if _, ok := rt.Route("Nope", false); ok {
		t.Fatal("route for unknown topic")
	}
	mustRegister(t, rt, reg("b", "a:1", 0, topics(1, topic("T", 4, 6), topic("U", 1, 6))))
	rt.Unregister(BrokerID{ClusterName: "DefaultCluster", BrokerName: "b", BrokerAddr: "a:1"})
	if _, ok := rt.Route("T", false); ok {
		t.Fatal("route survives its only broker")
	}
	if len(rt.Topics()) != 0 || len(rt.ClusterInfo().ClusterAddrTable) != 0 {
		t.Fatal("tables not emptied")
	}
}

func TestTBW102Route(t *testing.T) {
	rt := NewRouteTable(nil, 0)
	if _, ok := rt.Route(protocol.AutoCreateTopicKey, false); ok {
		t.Fatal("TBW102 before any broker")
	}
	mustRegister(t, rt, reg("b", "a:1", 0, topics(1, topic("SELF_TEST_TOPIC", 1, 6), topic(protocol.AutoCreateTopicKey, 8, 7))))
	r, ok := rt.Route(protocol.AutoCreateTopicKey, false)
	if !ok || r.QueueDatas[0].Perm != 7 || r.QueueDatas[0].WriteQueueNums != 8 || r.BrokerDatas[0].MasterAddr() != "a:1" {
		t.Fatalf("TBW102 route %+v", r)
	}
}

func TestExpiry(t *testing.T) {
	clk := newFakeClock()
	rt := NewRouteTable(clk.Now, 10*time.Second)
	mustRegister(t, rt, reg("b", "a:1", 0, topics(1, topic("T", 4, 6), topic("U", 1, 6))))
	short := reg("c", "c:1", 0, topics(1, topic("T", 4, 6), topic("U", 1, 6)))
	short.Timeout = 3 * time.Second
	mustRegister(t, rt, short)

	clk.Advance(3 * time.Second)
	if got := rt.ScanExpired(); len(got) != 0 {
		t.Fatalf("expired at the boundary: %v", got)
	}
	clk.Advance(time.Millisecond)
	got := rt.ScanExpired()
	if len(got) != 1 || got[0].BrokerName != "c" || got[0].ID != 0 {
		t.Fatalf("expired %v", got)
	}
	if !rt.Touch("DefaultCluster", "a:1") || rt.Touch("DefaultCluster", "c:1") {
		t.Fatal("touch")
	}
	clk.Advance(9 * time.Second)
	if got := rt.ScanExpired(); len(got) != 0 {
		t.Fatalf("touched broker expired: %v", got)
	}
	clk.Advance(2 * time.Second)
	if got := rt.ScanExpired(); len(got) != 1 || got[0].BrokerName != "b" {
		t.Fatalf("expired %v", got)
	}
	if _, ok := rt.Route("T", false); ok {
		t.Fatal("route after every broker expired")
	}
}

func TestRemoveConn(t *testing.T) {
	rt := NewRouteTable(nil, 0)
	m := reg("g", "m:1", 0, topics(1, topic("T", 4, 6), topic("U", 1, 6)))
	m.ConnID = 7
	s := reg("g", "s:1", 1, topics(1, topic("T", 4, 6), topic("U", 1, 6)))
	s.ConnID = 8
	mustRegister(t, rt, m)
	mustRegister(t, rt, s)
	if got := rt.RemoveConn(0); got != nil {
		t.Fatal("conn 0 removed something")
	}
	got := rt.RemoveConn(7)
	if len(got) != 1 || got[0].BrokerAddr != "m:1" {
		t.Fatalf("removed %v", got)
	}
	r, ok := rt.Route("T", false)
	if !ok || !reflect.DeepEqual(r.BrokerDatas[0].BrokerAddrs, map[int64]string{1: "s:1"}) {
		t.Fatalf("route after master conn loss %+v", r)
	}
	// A broker that re-registered over a new connection survives the old one closing.
	s.ConnID = 9
	mustRegister(t, rt, s)
	if got := rt.RemoveConn(8); len(got) != 0 {
		t.Fatalf("removed %v", got)
	}
}

func TestWritePerm(t *testing.T) {
	rt := NewRouteTable(nil, 0)
	mustRegister(t, rt, reg("a", "a:1", 0, topics(1, topic("T", 4, 6), topic("TBW102", 8, 7))))
	mustRegister(t, rt, reg("b", "b:1", 0, topics(1, topic("T", 4, 6), topic("U", 1, 6))))
	if n := rt.WipeWritePerm("a"); n != 2 {
		t.Fatalf("wiped %d", n)
	}
	r, _ := rt.Route("T", false)
	perms := map[string]int32{}
	for _, qd := range r.QueueDatas {
		perms[qd.BrokerName] = qd.Perm
	}
	if perms["a"] != protocol.PermRead || perms["b"] != protocol.PermReadWrite {
		t.Fatalf("perms %v", perms)
	}
	if r, _ := rt.Route("TBW102", false); r.QueueDatas[0].Perm != protocol.PermRead|protocol.PermInherit {
		t.Fatalf("TBW102 perm %d", r.QueueDatas[0].Perm)
	}
	if n := rt.AddWritePerm("a"); n != 2 {
		t.Fatalf("added %d", n)
	}
	if r, _ := rt.Route("T", false); r.QueueDatas[0].Perm != protocol.PermReadWrite {
		t.Fatalf("perm after add %d", r.QueueDatas[0].Perm)
	}
	if n := rt.WipeWritePerm("nobody"); n != 0 {
		t.Fatalf("wiped %d", n)
	}
}

func TestPrimeSlaveActingMaster(t *testing.T) {
	rt := NewRouteTable(nil, 0)
	yes := true
	s := reg("g", "s:1", 1, topics(1, topic("T", 4, 6), topic("U", 1, 6)))
	s.EnableActingMaster = &yes
	mustRegister(t, rt, s)
	r, ok := rt.Route("T", false)
	if !ok || r.QueueDatas[0].Perm != protocol.PermRead || !r.BrokerDatas[0].EnableActingMaster {
		t.Fatalf("prime slave route %+v", r)
	}
	// A 4.x slave (no header) contributes nothing.
	rt2 := NewRouteTable(nil, 0)
	mustRegister(t, rt2, reg("g", "s:1", 1, topics(1, topic("T", 4, 6), topic("U", 1, 6))))
	if _, ok := rt2.Route("T", false); ok {
		t.Fatal("old-version slave contributed topics")
	}
}

func TestDeleteAndRegisterTopic(t *testing.T) {
	rt := NewRouteTable(nil, 0)
	mustRegister(t, rt, reg("a", "a:1", 0, topics(1, topic("T", 4, 6), topic("U", 1, 6))))
	other := reg("b", "b:1", 0, topics(1, topic("T", 4, 6), topic("U", 1, 6)))
	other.ClusterName = "Other"
	mustRegister(t, rt, other)
	rt.DeleteTopic("T", "Other")
	if r, _ := rt.Route("T", false); len(r.QueueDatas) != 1 || r.QueueDatas[0].BrokerName != "a" {
		t.Fatalf("route %+v", r)
	}
	if got := rt.TopicsByCluster("Other"); !reflect.DeepEqual(got, []string{"U"}) {
		t.Fatalf("topics by cluster %v", got)
	}
	rt.DeleteTopic("T", "")
	if _, ok := rt.Route("T", false); ok {
		t.Fatal("topic not deleted")
	}
	if rt.RegisterTopic("V", []*protocol.QueueData{{BrokerName: "ghost", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}}) {
		t.Fatal("registered a topic on an unknown broker")
	}
	if !rt.RegisterTopic("V", []*protocol.QueueData{{BrokerName: "a", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}}) {
		t.Fatal("register topic refused")
	}
	if r, ok := rt.Route("V", false); !ok || r.QueueDatas[0].ReadQueueNums != 2 {
		t.Fatalf("route %+v", r)
	}
	st := rt.SystemTopics()
	if !reflect.DeepEqual(st.TopicList, []string{"DefaultCluster", "a", "Other", "b"}) || st.BrokerAddr != "a:1" {
		t.Fatalf("system topics %+v", st)
	}
}

func TestConcurrentAccess(t *testing.T) {
	rt := NewRouteTable(nil, 0)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				r := reg("b", "a:1", int64(i%2), topics(int64(j), topic("T", 4, 6), topic("U", 1, 6)))
				_, _ = rt.Register(r)
				rt.Route("T", false)
				rt.ClusterInfo()
				rt.ScanExpired()
				if j%50 == 0 {
					rt.Unregister(BrokerID{ClusterName: "DefaultCluster", BrokerName: "b", BrokerAddr: "a:1"})
				}
			}
		}()
	}
	wg.Wait()
}

// TestStandInMaster: a DLedger group whose leader is gone keeps a master in client routes (its
// lowest-id write-forwarding follower) until the new leader registers; classic slaves never stand
// in, and registeredOnly queries and cluster info show the registrations as they are.
func TestStandInMaster(t *testing.T) {
	rt := NewRouteTable(nil, 0)
	w := topics(1, topic("T", 4, 6))
	fwd := func(r Registration) Registration { r.ForwardsWrites = true; return r }
	mustRegister(t, rt, fwd(reg("g", "n0:1", 0, w)))
	mustRegister(t, rt, fwd(reg("g", "n1:1", 2, w)))
	mustRegister(t, rt, fwd(reg("g", "n2:1", 3, w)))
	mustRegister(t, rt, reg("classic", "c0:1", 0, w))
	mustRegister(t, rt, reg("classic", "c1:1", 1, w))

	masters := func(registeredOnly bool) map[string]string {
		r, ok := rt.Route("T", registeredOnly)
		if !ok {
			t.Fatal("no route for T")
		}
		out := map[string]string{}
		for _, bd := range r.BrokerDatas {
			out[bd.BrokerName] = bd.BrokerAddrs[protocol.MasterID]
		}
		return out
	}
	if got := masters(false); got["g"] != "n0:1" || got["classic"] != "c0:1" {
		t.Fatalf("masters with everyone up: %v", got)
	}
	rt.Unregister(BrokerID{ClusterName: "DefaultCluster", BrokerName: "g", BrokerAddr: "n0:1", ID: 0})
	rt.Unregister(BrokerID{ClusterName: "DefaultCluster", BrokerName: "classic", BrokerAddr: "c0:1", ID: 0})
	if got := masters(false); got["g"] != "n1:1" || got["classic"] != "" {
		t.Fatalf("client route after the masters died: %v, want g's stand-in n1:1 and no classic master", got)
	}
	if got := masters(true); got["g"] != "" {
		t.Fatalf("registeredOnly route shows a master %q for g", got["g"])
	}
	if bd := rt.ClusterInfo().BrokerAddrTable["g"]; bd.BrokerAddrs[protocol.MasterID] != "" {
		t.Fatalf("cluster info shows a master for g: %v", bd.BrokerAddrs)
	}
	// The new leader (n2) registers as 0 and replaces the stand-in; n1 keeps its own id.
	mustRegister(t, rt, fwd(reg("g", "n2:1", 0, w)))
	r, _ := rt.Route("T", false)
	for _, bd := range r.BrokerDatas {
		if bd.BrokerName == "g" && (bd.BrokerAddrs[0] != "n2:1" || bd.BrokerAddrs[2] != "n1:1" || len(bd.BrokerAddrs) != 2) {
			t.Fatalf("route after the new leader registered: %v", bd.BrokerAddrs)
		}
	}
}
