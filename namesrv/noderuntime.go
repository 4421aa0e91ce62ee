package namesrv

// Each broker's GET_BROKER_RUNTIME_INFO (28) for the status page, classic and DLedger brokers
// alike: version, uptime, store size, traffic totals (turned into rates by comparing with the
// previous view), the address of the broker's own status page, and for classic slaves how far
// they are behind their master. The name server keeps, per address, only the previous totals,
// and a short history of the cluster-wide rates for the page's sparkline.

import (
	"context"
	"strconv"
	"sync"
	"time"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// clusterRateHistory is how many cluster-wide rate points the page draws.
const clusterRateHistory = 60

// NodeRuntime is what one broker's runtime info says, as the page shows it.
type NodeRuntime struct {
	Version        string  `json:"version"`
	UptimeMs       int64   `json:"uptimeMs"`
	CommitLogBytes int64   `json:"commitLogBytes"` // commitlog max minus min offset
	CommitLogMax   int64   `json:"commitLogMax"`
	DiskRatio      float64 `json:"diskRatio"` // percent
	PutTotal       int64   `json:"putTotal"`
	GetTotal       int64   `json:"getTotal"`
	// InPerSec and OutPerSec: messages stored and delivered per second since the previous
	// view; -1 until there is one.
	InPerSec  float64 `json:"inPerSec"`
	OutPerSec float64 `json:"outPerSec"`
	// HTTPAddr is the broker's status page ("" when its httpPort is off).
	HTTPAddr string `json:"httpAddr,omitempty"`
	// HABehindBytes: a classic slave's distance behind the master it replicates from; -1 when
	// not a classic slave or unknown.
	HABehindBytes int64 `json:"haBehindBytes"`
}

// runtimeOf decodes the runtime info table; missing keys leave zeros.
func runtimeOf(table map[string]string, now time.Time) NodeRuntime {
	i64 := func(k string) int64 { n, _ := strconv.ParseInt(table[k], 10, 64); return n }
	rt := NodeRuntime{
		Version: table["rocketraftVersion"], CommitLogMax: i64("commitLogMaxOffset"),
		PutTotal: i64("msgPutTotalTodayNow"), GetTotal: i64("msgGetTotalTodayNow"),
		InPerSec: -1, OutPerSec: -1, HTTPAddr: table["httpAddr"], HABehindBytes: -1,
	}
	if rt.Version == "" {
		rt.Version = table["brokerVersionDesc"]
	}
	rt.CommitLogBytes = max(0, rt.CommitLogMax-i64("commitLogMinOffset"))
	if boot := i64("bootTimestamp"); boot > 0 {
		rt.UptimeMs = max(0, now.UnixMilli()-boot)
	}
	if r, err := strconv.ParseFloat(table["commitLogDiskRatio"], 64); err == nil {
		rt.DiskRatio = r * 100
	}
	if _, ok := table["masterOffsetSeen"]; ok {
		rt.HABehindBytes = max(0, i64("masterOffsetSeen")-i64("slaveMaxOffset"))
	}
	return rt
}

// rateTracker turns runtime totals into rates between views.
type rateTracker struct {
	mu      sync.Mutex
	prev    map[string]rateMark // by broker address
	history []ClusterRate
}

type rateMark struct {
	at       time.Time
	put, get int64
}

// ClusterRate is one point of the cluster-wide history: messages per second over the masters.
type ClusterRate struct {
	T   int64   `json:"t"`
	In  float64 `json:"in"`
	Out float64 `json:"out"`
}

// update fills the rates of rts (by address) from the previous totals, appends the masters'
// sum to the history and returns a copy of it. Addresses no longer registered are forgotten.
func (r *rateTracker) update(rts map[string]*NodeRuntime, masters map[string]bool, now time.Time) []ClusterRate {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := make(map[string]rateMark, len(rts))
	var in, out float64
	have := false
	for addr, rt := range rts {
		next[addr] = rateMark{at: now, put: rt.PutTotal, get: rt.GetTotal}
		p, ok := r.prev[addr]
		if dt := now.Sub(p.at).Seconds(); ok && dt > 0 && dt < 120 {
			rt.InPerSec, rt.OutPerSec = max(0, float64(rt.PutTotal-p.put)/dt), max(0, float64(rt.GetTotal-p.get)/dt)
			if masters[addr] {
				in, out, have = in+rt.InPerSec, out+rt.OutPerSec, true
			}
		}
	}
	r.prev = next
	if have {
		r.history = append(r.history, ClusterRate{T: now.UnixMilli(), In: in, Out: out})
		if len(r.history) > clusterRateHistory {
			r.history = r.history[len(r.history)-clusterRateHistory:]
		}
	}
	return append([]ClusterRate{}, r.history...)
}

// runtimeInfos asks every address concurrently; a failing broker has no entry (its Raft row or
// error says why).
func (p *statusPage) runtimeInfos(ctx context.Context, addrs []string) map[string]*NodeRuntime {
	out := make(map[string]*NodeRuntime, len(addrs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, addr := range addrs {
		wg.Go(func() {
			resp, err := p.call(ctx, addr, remoting.GetBrokerRuntimeInfo, nil)
			if err != nil {
				return
			}
			var kv protocol.KVTable
			if protocol.Decode(resp.Body, &kv) != nil {
				return
			}
			rt := runtimeOf(kv.Table, time.Now())
			mu.Lock()
			out[addr] = &rt
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// addRuntimes attaches each node's runtime info; in a master/slave group (no Raft) a slave's
// CommitLogLag is the master's commitlog max offset minus its own, as both reported.
func addRuntimes(v *ClusterView, rts map[string]*NodeRuntime) {
	for ci := range v.Clusters {
		for gi := range v.Clusters[ci].Groups {
			g := &v.Clusters[ci].Groups[gi]
			var master *NodeRuntime
			for ni := range g.Nodes {
				n := &g.Nodes[ni]
				n.Runtime = rts[n.Addr]
				if n.BrokerID == protocol.MasterID {
					master = n.Runtime
				}
			}
			if g.Raft || master == nil {
				continue
			}
			for ni := range g.Nodes {
				if n := &g.Nodes[ni]; n.BrokerID != protocol.MasterID && n.Runtime != nil {
					n.CommitLogLag = max(0, master.CommitLogMax-n.Runtime.CommitLogMax)
				}
			}
		}
	}
}
