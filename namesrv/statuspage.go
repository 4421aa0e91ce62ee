package namesrv

// The name server's status page, on its httpPort beside /metrics: GET / serves
// statuspage.html, which polls GET /cluster (a ClusterView as JSON) every 2 s.
//
// /cluster asks the brokers, over remoting, with a short timeout each:
//   - GET_RAFT_STATUS (32001) of every registered address (a classic broker answers
//     REQUEST_CODE_NOT_SUPPORTED and is shown without Raft figures);
//   - GET_BROKER_RUNTIME_INFO (28) of every registered address: version, uptime, sizes, rates
//     and the broker's own page (noderuntime.go);
//   - GET_ALL_CONSUMER_OFFSET (43) of every group's master, then GET_CONSUME_STATS (208) for
//     at most statusMaxGroupsPerBroker of its groups.
//
// The name server is an unsigned client: brokers with ACL on refuse these requests and the
// page shows their error. A view is reused for statusCacheFor so several open pages (or a
// fast reload) do not multiply the load on the brokers; one assembly runs at a time.

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/webui"
)

//go:embed statuspage.html
var statusPageHTML []byte

// Bounds of /cluster's work and lists.
const (
	statusCallTimeout        = 1500 * time.Millisecond // one broker request
	statusViewTimeout        = 3 * time.Second         // the whole /cluster assembly
	statusCacheFor           = time.Second
	statusMaxBrokers         = 128 // registered addresses asked for their Raft status
	statusMaxGroupsPerBroker = 32  // consumer groups asked for their lag, per master
	statusMaxTopics          = 1000
)

// errNotRaft: the broker is not a DLedger broker (or does not know our codes).
var errNotRaft = errors.New("not a DLedger broker")

// statusPage answers /cluster, keeping the last view for statusCacheFor.
type statusPage struct {
	s      *Server
	client *remoting.Client

	mu    sync.Mutex // serialises assembly; guards last
	last  *ClusterView
	at    time.Time
	rates rateTracker // noderuntime.go
}

func newStatusPage(s *Server) *statusPage {
	return &statusPage{s: s, client: remoting.NewClient(remoting.ClientConfig{
		DialTimeout: statusCallTimeout, Logger: s.log.Named("statuspage"), TLS: s.cfg.ClientTLS,
	})}
}

// statusPagePublicPaths are the page's static files: no data, served without the HTTP token
// (the page's script sends the token when it reads /cluster).
var statusPagePublicPaths = []string{"/", "/ui/common.css", "/ui/common.js"}

// register adds the page's routes to the httpPort mux.
func (p *statusPage) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Security-Policy", webui.ContentSecurityPolicy)
		_, _ = w.Write(statusPageHTML)
	})
	webui.Register(mux)
	mux.HandleFunc("GET /cluster", func(w http.ResponseWriter, r *http.Request) {
		v := p.view(r.Context())
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(v)
	})
}

// close drops the connections to the brokers.
func (p *statusPage) close() { _ = p.client.Close() }

// view returns the cached view, or assembles a fresh one.
func (p *statusPage) view(ctx context.Context) *ClusterView {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last != nil && time.Since(p.at) < statusCacheFor {
		return p.last
	}
	// One bound for the whole assembly, apart from the asking request: a slow broker must not
	// hold the page (and the lock) for long, and a closed browser tab must not cache a failed view.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusViewTimeout)
	defer cancel()
	ci := p.s.routes.ClusterInfo()
	addrs := registeredAddrs(ci)
	var raft map[string]raftAnswer
	var rts map[string]*NodeRuntime
	var wg sync.WaitGroup
	wg.Go(func() { raft = p.raftStatuses(ctx, addrs) })
	wg.Go(func() { rts = p.runtimeInfos(ctx, addrs) })
	lags := p.consumerLags(ctx, ci)
	wg.Wait()
	v := buildClusterView(ci, p.s.routes.topicQueues(), raft, lags, statusMaxTopics)
	v.Rates = p.rates.update(rts, masterAddrs(ci), time.Now())
	addRuntimes(v, rts)
	v.NameServer = p.s.Addr()
	v.GeneratedAt = time.Now().UnixMilli()
	p.last, p.at = v, time.Now()
	return v
}

// registeredAddrs lists the registered broker addresses, at most statusMaxBrokers.
func registeredAddrs(ci *protocol.ClusterInfo) []string {
	var addrs []string
	for _, name := range slices.Sorted(maps.Keys(ci.BrokerAddrTable)) {
		for _, addr := range ci.BrokerAddrTable[name].BrokerAddrs {
			if len(addrs) < statusMaxBrokers && !slices.Contains(addrs, addr) {
				addrs = append(addrs, addr)
			}
		}
	}
	return addrs
}

// masterAddrs is the set of the groups' registered masters (brokerId 0).
func masterAddrs(ci *protocol.ClusterInfo) map[string]bool {
	out := map[string]bool{}
	for _, bd := range ci.BrokerAddrTable {
		if addr, ok := bd.BrokerAddrs[protocol.MasterID]; ok {
			out[addr] = true
		}
	}
	return out
}

// raftStatuses asks every address concurrently.
func (p *statusPage) raftStatuses(ctx context.Context, addrs []string) map[string]raftAnswer {
	out := make(map[string]raftAnswer, len(addrs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, addr := range addrs {
		wg.Go(func() {
			rs, err := p.raftStatus(ctx, addr)
			mu.Lock()
			out[addr] = raftAnswer{status: rs, err: err}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// raftStatus is GET_RAFT_STATUS of one broker; a classic broker's answer is (nil, nil).
func (p *statusPage) raftStatus(ctx context.Context, addr string) (*protocol.RaftStatus, error) {
	resp, err := p.call(ctx, addr, remoting.GetRaftStatus, nil)
	if errors.Is(err, errNotRaft) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rs protocol.RaftStatus
	if err := protocol.Decode(resp.Body, &rs); err != nil {
		return nil, fmt.Errorf("decode raft status from %s: %w", addr, err)
	}
	return &rs, nil
}

// consumerLags asks every group's master (brokerId 0) for its consumer groups and their lag,
// masters concurrently, each master's groups in turn. Keyed by broker name; a failing master
// contributes nothing (its Raft row shows whether it is reachable).
func (p *statusPage) consumerLags(ctx context.Context, ci *protocol.ClusterInfo) map[string][]GroupLag {
	out := map[string][]GroupLag{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, bd := range ci.BrokerAddrTable {
		addr, ok := bd.BrokerAddrs[protocol.MasterID]
		if !ok {
			continue
		}
		wg.Go(func() {
			lags, err := p.masterLags(ctx, name, addr)
			if err != nil {
				p.s.log.Debug("status page: consumer lag unavailable", "broker", name, "addr", addr, "error", err)
			}
			mu.Lock()
			out[name] = lags
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// masterLags lists the groups with committed offsets on one master and sums each one's lag.
func (p *statusPage) masterLags(ctx context.Context, brokerName, addr string) ([]GroupLag, error) {
	resp, err := p.call(ctx, addr, remoting.GetAllConsumerOffset, nil)
	if err != nil {
		return nil, err
	}
	var w protocol.ConsumerOffsetSerializeWrapper
	if err := protocol.Decode(resp.Body, &w); err != nil {
		return nil, fmt.Errorf("decode consumer offsets from %s: %w", addr, err)
	}
	groups := map[string]bool{}
	for k := range w.OffsetTable {
		if _, g, ok := protocol.SplitOffsetKey(k); ok {
			groups[g] = true
		}
	}
	var out []GroupLag
	for i, g := range slices.Sorted(maps.Keys(groups)) {
		if i == statusMaxGroupsPerBroker {
			break
		}
		resp, err := p.call(ctx, addr, remoting.GetConsumeStats, map[string]string{"consumerGroup": g})
		if err != nil {
			return out, fmt.Errorf("consume stats of %s: %w", g, err)
		}
		var cs protocol.ConsumeStats
		if err := protocol.Decode(resp.Body, &cs); err != nil {
			return out, fmt.Errorf("decode consume stats of %s from %s: %w", g, addr, err)
		}
		out = append(out, consumeLags(g, brokerName, &cs)...)
	}
	return out, nil
}

// call sends one request with statusCallTimeout and turns a non-SUCCESS answer into an error.
func (p *statusPage) call(ctx context.Context, addr string, code int32, ext map[string]string) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(ctx, statusCallTimeout)
	defer cancel()
	resp, err := p.client.Invoke(ctx, addr, remoting.NewRequest(code, ext, nil))
	if err != nil {
		return nil, fmt.Errorf("request %d to %s: %w", code, addr, err)
	}
	switch resp.Code {
	case remoting.Success:
		return resp, nil
	case remoting.RequestCodeNotSupported:
		return nil, fmt.Errorf("%w: %s: %s", errNotRaft, addr, resp.Remark)
	}
	return nil, fmt.Errorf("request %d to %s: code %d: %s", code, addr, resp.Code, resp.Remark)
}

// topicQueues copies the topic table: topic → broker name → queue data.
func (t *RouteTable) topicQueues() map[string]map[string]protocol.QueueData {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[string]map[string]protocol.QueueData, len(t.topicQueueTable))
	for topic, qds := range t.topicQueueTable {
		m := make(map[string]protocol.QueueData, len(qds))
		for name, qd := range qds {
			m[name] = *qd
		}
		out[topic] = m
	}
	return out
}
