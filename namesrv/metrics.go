package namesrv

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rocketraft/internal/opshttp"
	"rocketraft/metrics"
)

// Prometheus metrics of the name server, served on /metrics at Config.HTTPAddr: request counts
// and latency by request and response code (rocketmq_rpc_latency, recorded by the remoting
// server's OnRequest hook from the start) and the size of the route table, read at scrape time.
// Labels: node_type "nameserver", node_id the remoting listen address; no cluster (a name
// server serves every cluster).

var (
	descNsClusters = metrics.Desc(metrics.NamesrvClusters, "Clusters with at least one registered broker.")
	descNsGroups   = metrics.Desc(metrics.NamesrvBrokerGroups, "Broker names (master/slave or Raft groups) registered.")
	descNsBrokers  = metrics.Desc(metrics.NamesrvBrokers, "Live broker processes (registrations not yet expired).")
	descNsTopics   = metrics.Desc(metrics.NamesrvTopics, "Topics with a route.")
)

// nsCollector reads the route table's sizes at scrape time.
type nsCollector struct{ routes *RouteTable }

// Describe implements prometheus.Collector.
func (c nsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descNsClusters
	ch <- descNsGroups
	ch <- descNsBrokers
	ch <- descNsTopics
}

// Collect implements prometheus.Collector.
func (c nsCollector) Collect(ch chan<- prometheus.Metric) {
	clusters, groups, brokers, topics := c.routes.sizes()
	e := metrics.Emitter{Ch: ch}
	e.Gauge(descNsClusters, float64(clusters))
	e.Gauge(descNsGroups, float64(groups))
	e.Gauge(descNsBrokers, float64(brokers))
	e.Gauge(descNsTopics, float64(topics))
}

// sizes counts clusters, broker names, live brokers and topics.
func (t *RouteTable) sizes() (clusters, groups, brokers, topics int) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.clusterAddrTable), len(t.brokerAddrTable), len(t.brokerLiveTable), len(t.topicQueueTable)
}

// startHTTP serves /metrics and the status page (statuspage.go) on cfg.HTTPAddr (nothing when
// it is empty), GET and HEAD only, with cfg.HTTPAuthToken required when set. It runs after the remoting server listens, so node_id is the real remoting
// address.
func (s *Server) startHTTP() error {
	if s.cfg.HTTPAddr == "" {
		return nil
	}
	reg := metrics.NewRegistry(metrics.Identity{NodeType: metrics.NodeTypeNameserver, NodeID: s.Addr()})
	if err := reg.Register(s.rpc, nsCollector{s.routes}); err != nil {
		return fmt.Errorf("register name server metrics: %w", err)
	}
	ln, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on http address %s: %w", s.cfg.HTTPAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", reg.Handler())
	s.page = newStatusPage(s) // statuspage.go: GET / and /cluster
	s.page.register(mux)
	// Read-only, and with a token the data endpoints need it; the page's static files do not.
	h := opshttp.Guard(mux, opshttp.Options{AuthToken: s.cfg.HTTPAuthToken}, statusPagePublicPaths...)
	s.http = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	s.httpLn = ln
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "error", err)
		}
	}()
	s.log.Info("http endpoints", "addr", ln.Addr().String())
	if host, _, err := net.SplitHostPort(s.cfg.HTTPAddr); err == nil && opshttp.Exposed(host) && s.cfg.HTTPAuthToken == "" {
		s.log.Warn("the HTTP port (/metrics, /cluster) listens beyond loopback without httpAuthToken", "addr", s.cfg.HTTPAddr)
	}
	return nil
}

// HTTPAddr is the actual /metrics listen address, "" when HTTP is off.
func (s *Server) HTTPAddr() string {
	if s.httpLn == nil {
		return ""
	}
	return s.httpLn.Addr().String()
}

// stopHTTP closes the HTTP server, if any.
func (s *Server) stopHTTP() {
	if s.http != nil {
		_ = s.http.Close()
	}
	if s.page != nil {
		s.page.close()
	}
}
