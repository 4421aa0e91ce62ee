package namesrv

import (
	"testing"
	"time"

	"rocketraft/protocol"
)

// TestNodeRuntime: runtime info becomes the page's figures, totals become rates between views,
// and a classic slave's commitlog lag comes from its master's runtime info.
func TestNodeRuntime(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	rt := runtimeOf(map[string]string{"rocketraftVersion": "v1", "bootTimestamp": "940000", "commitLogMinOffset": "100",
		"commitLogMaxOffset": "1100", "commitLogDiskRatio": "0.4250", "msgPutTotalTodayNow": "50", "httpAddr": "127.0.0.1:8080"}, now)
	if rt.Version != "v1" || rt.UptimeMs != 60_000 || rt.CommitLogBytes != 1000 || rt.DiskRatio != 42.5 || rt.InPerSec != -1 ||
		rt.HTTPAddr != "127.0.0.1:8080" || rt.HABehindBytes != -1 {
		t.Fatalf("runtime %+v", rt)
	}
	var r rateTracker
	m, s := &NodeRuntime{PutTotal: 100, GetTotal: 10}, &NodeRuntime{CommitLogMax: 0}
	r.update(map[string]*NodeRuntime{"m": m, "s": s}, map[string]bool{"m": true}, now)
	m2, s2 := &NodeRuntime{PutTotal: 300, GetTotal: 110, CommitLogMax: 5000}, &NodeRuntime{CommitLogMax: 4000}
	h := r.update(map[string]*NodeRuntime{"m": m2, "s": s2}, map[string]bool{"m": true}, now.Add(2*time.Second))
	if m2.InPerSec != 100 || m2.OutPerSec != 50 || len(h) != 1 || h[0].In != 100 {
		t.Fatalf("rates %+v, history %+v", m2, h)
	}
	v := &ClusterView{Clusters: []ClusterEntry{{Groups: []GroupView{{Nodes: []NodeView{
		{Addr: "m", BrokerID: protocol.MasterID, CommitLogLag: -1}, {Addr: "s", BrokerID: 1, CommitLogLag: -1}}}}}}}
	addRuntimes(v, map[string]*NodeRuntime{"m": m2, "s": s2})
	if n := v.Clusters[0].Groups[0].Nodes[1]; n.CommitLogLag != 1000 || n.Runtime != s2 {
		t.Fatalf("slave %+v", n)
	}
}
