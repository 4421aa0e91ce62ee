package proxy

// The proxy's status page, on the metrics port beside /metrics (metricsExporterType=PROM):
// GET / serves statuspage.html, which polls GET /status every 2 s. /status says which build
// runs and for how long, where clients connect, the messages in and out per second through
// the gRPC port (sampled every statusRateInterval from the counters /metrics exports, with a
// short history for the page's sparkline), the connected 5.x clients and the broker groups'
// masters the proxy sends to. Lists are bounded by statusMaxClients.

import (
	_ "embed"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"rocketraft/internal/version"
	"rocketraft/metrics"
	"rocketraft/webui"
)

//go:embed statuspage.html
var statusPageHTML []byte

const (
	statusRateInterval = 2 * time.Second
	statusRateHistory  = 60
	statusRateWindow   = 10 * time.Second
	statusMaxClients   = 500
)

// statusPagePublicPaths are the page's static files: no data, served without the token.
var statusPagePublicPaths = []string{"/", "/ui/common.css", "/ui/common.js"}

// proxyStatus answers /status. The messaging parts are attached once they exist (attach).
type proxyStatus struct {
	s       *Server
	started time.Time
	m       atomic.Pointer[messaging]
	remote4 atomic.Pointer[string] // the 4.x listener, once started

	mu   sync.Mutex
	ring []ratePoint // newest last, at most statusRateHistory+1
}

type ratePoint struct {
	at      time.Time
	in, out float64 // totals
}

func newProxyStatus(s *Server) *proxyStatus { return &proxyStatus{s: s, started: time.Now()} }

func (p *proxyStatus) attach(m *messaging) { p.m.Store(m) }

// attachRemoting records the 4.x clients' listener ("" when off).
func (p *proxyStatus) attachRemoting(addr string) { p.remote4.Store(&addr) }

// register adds GET /, the shared files and /status to mux.
func (p *proxyStatus) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Security-Policy", webui.ContentSecurityPolicy)
		_, _ = w.Write(statusPageHTML)
	})
	webui.Register(mux)
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(p.status())
	})
}

// run samples the message totals until stop closes.
func (p *proxyStatus) run(stop <-chan struct{}) {
	p.sample(time.Now())
	t := time.NewTicker(statusRateInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			p.sample(now)
		}
	}
}

func (p *proxyStatus) sample(now time.Time) {
	in, out := p.totals()
	p.mu.Lock()
	p.ring = append(p.ring, ratePoint{at: now, in: in, out: out})
	if len(p.ring) > statusRateHistory+1 {
		p.ring = slices.Delete(p.ring, 0, len(p.ring)-statusRateHistory-1)
	}
	p.mu.Unlock()
}

// totals sums the messages-in and messages-out counters over their topics and groups.
func (p *proxyStatus) totals() (in, out float64) {
	mfs, err := p.s.metrics.registry.Gatherer().Gather()
	if err != nil {
		return 0, 0
	}
	for _, mf := range mfs {
		var sum float64
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
		switch mf.GetName() {
		case metrics.MessagesInTotal:
			in = sum
		case metrics.MessagesOutTotal:
			out = sum
		}
	}
	return in, out
}

// ProxyRates are the rates of /status: now (over statusRateWindow) and one point per interval.
type ProxyRates struct {
	IntervalMs int64            `json:"intervalMs"`
	WindowMs   int64            `json:"windowMs"`
	InPerSec   float64          `json:"inPerSec"`
	OutPerSec  float64          `json:"outPerSec"`
	History    []ProxyRatePoint `json:"history"`
}

// ProxyRatePoint is one interval: messages per second in and out, ending at T (ms).
type ProxyRatePoint struct {
	T   int64   `json:"t"`
	In  float64 `json:"in"`
	Out float64 `json:"out"`
}

func (p *proxyStatus) rates() ProxyRates {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := ProxyRates{IntervalMs: statusRateInterval.Milliseconds(), WindowMs: statusRateWindow.Milliseconds(), History: []ProxyRatePoint{}}
	per := func(a, b ratePoint) (float64, float64) {
		dt := b.at.Sub(a.at).Seconds()
		if dt <= 0 {
			return 0, 0
		}
		return max(0, (b.in-a.in)/dt), max(0, (b.out-a.out)/dt)
	}
	for i := 1; i < len(p.ring); i++ {
		in, out := per(p.ring[i-1], p.ring[i])
		r.History = append(r.History, ProxyRatePoint{T: p.ring[i].at.UnixMilli(), In: in, Out: out})
	}
	if n := len(p.ring); n > 1 {
		newest, from := p.ring[n-1], n-2
		for from > 0 && newest.at.Sub(p.ring[from-1].at) <= statusRateWindow+statusRateInterval/2 {
			from--
		}
		r.InPerSec, r.OutPerSec = per(p.ring[from], newest)
	}
	return r
}

// ProxyClient is one 5.x client with an open Telemetry stream.
type ProxyClient struct {
	ClientID string   `json:"clientId"`
	Type     string   `json:"type"`
	Group    string   `json:"group,omitempty"`
	Topics   []string `json:"topics,omitempty"`
}

// ProxyBroker is one broker group's master as the proxy last learned it.
type ProxyBroker struct {
	BrokerName string `json:"brokerName"`
	Master     string `json:"master"`
}

func (p *proxyStatus) status() map[string]any {
	now := time.Now()
	st := map[string]any{
		"version": version.Get(), "startedAt": p.started.UnixMilli(), "uptimeMs": now.Sub(p.started).Milliseconds(),
		"grpcAddr": p.s.Addr(), "namesrvAddr": p.s.cfg.NamesrvAddr,
		"cluster": p.s.cfg.RocketMQClusterName, "rates": p.rates(),
	}
	if a := p.remote4.Load(); a != nil {
		st["remotingAddr"] = *a
	}
	m := p.m.Load()
	if m == nil {
		return st
	}
	clients := []ProxyClient{}
	m.clients.mu.Lock()
	for _, id := range slices.Sorted(maps.Keys(m.clients.clients)) {
		if len(clients) == statusMaxClients {
			break
		}
		c := m.clients.clients[id]
		pc := ProxyClient{ClientID: id, Type: "unknown", Topics: slices.Clone(c.topics)}
		if s := c.settings; s != nil {
			pc.Type = s.GetClientType().String()
			pc.Group = s.GetSubscription().GetGroup().GetName()
			for _, sub := range s.GetSubscription().GetSubscriptions() {
				pc.Topics = append(pc.Topics, sub.GetTopic().GetName())
			}
		}
		clients = append(clients, pc)
	}
	m.clients.mu.Unlock()
	st["clients"] = clients
	brokers := []ProxyBroker{}
	m.leaders.mu.Lock()
	for _, name := range slices.Sorted(maps.Keys(m.leaders.groups)) {
		brokers = append(brokers, ProxyBroker{BrokerName: name, Master: m.leaders.groups[name].master})
	}
	m.leaders.mu.Unlock()
	st["brokers"] = brokers
	return st
}
