package broker

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/clients"
	"rocketraft/broker/meta"
	"rocketraft/config"
	"rocketraft/internal/opshttp"
	"rocketraft/internal/version"
	"rocketraft/protocol"
	"rocketraft/storage"
)

// statusPagePublicPaths are the status page's static files (statuspage.go, webui): no data,
// served without httpAuthToken; the page's script sends the token when it reads /status. So is
// ReadyPath (ready.go), which probes read without credentials.
var statusPagePublicPaths = []string{"/", "/ui", "/ui/common.css", "/ui/common.js", ReadyPath}

// statusPages is the HTTP port: the status page and its /status record, readiness for probes,
// /metrics and pprof, and the rate sampler behind the page's live figures. It reads the broker's
// tables, clients, counters and place through the dependencies New hands it, so the pages can be
// served and tested without a running broker.
type statusPages struct {
	cfg     *config.Broker
	logger  hclog.Logger
	place   place
	topics  *meta.Topics
	offsets *meta.Offsets
	clients *clients.Manager
	stats   *stats
	// metrics answers /metrics (the broker's Prometheus registry).
	metrics http.Handler
	// addr is the advertised broker address; storeStats the store's figures; raftStatus the
	// record mqadmin raftStatus gets; committedOffset a consumer offset with the commits still
	// batched for Raft (what a consumer would be told).
	addr            func() string
	storeStats      func() (storage.Stats, error)
	raftStatus      func(*raftPlace) protocol.RaftStatus
	committedOffset func(group, topic string, qid int32) (int64, bool)

	// warnings are the peer ports' security warnings (peerlinks.go), known once Start began.
	warnings []string
	// rates samples the traffic counters for the status page and VIEW_BROKER_STATS_DATA
	// (statusrates.go); started with the HTTP endpoints, nil before.
	rates atomic.Pointer[statusRates]
	// httpAddr is where the status page answers, for GET_BROKER_RUNTIME_INFO; nil: off.
	httpAddr atomic.Pointer[string]
}

// start serves operational endpoints on httpBindAddress:httpPort (0 = off; loopback by
// default): / (and /ui), an HTML status page (statuspage.go); /status with the broker's
// identity, store figures, topics and consumer lag as JSON, /metrics for Prometheus
// (metrics.go), and with enablePprof Go's /debug/pprof so a CPU profile can be taken from a
// running broker under load (loopback clients only, at most opshttp.MaxProfileSeconds). Every
// endpoint is GET/HEAD only; with httpAuthToken set, all but the page's static files need it
// (package internal/opshttp). Everything it starts stops when stop closes; warnings are the
// peer ports' security warnings /status lists.
func (s *statusPages) start(stop <-chan struct{}, warnings []string) error {
	s.warnings = warnings
	// The rate sampler runs even without the port: VIEW_BROKER_STATS_DATA (statsdata.go) reads it.
	rates := newStatusRates(s.rateCounters)
	s.rates.Store(rates)
	go rates.run(stop)
	if s.cfg.HTTPPort == 0 {
		return nil
	}
	ln, err := opshttp.Listen(s.cfg.HTTPBindAddress, s.cfg.HTTPPort)
	if err != nil {
		return err // Start says which port
	}
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("http server stopped", "error", err)
		}
	}()
	go func() {
		<-stop
		_ = srv.Close()
	}()
	s.httpAddr.Store(ptr(advertisedHTTPAddr(ln.Addr().String(), s.cfg.HTTPBindAddress, s.cfg.BrokerIP1)))
	s.logger.Info("http endpoints", "addr", ln.Addr().String(), "pprof", s.cfg.EnablePprof, "token", s.cfg.HTTPAuthToken != "")
	if opshttp.Exposed(s.cfg.HTTPBindAddress) && s.cfg.HTTPAuthToken == "" {
		s.logger.Warn("the HTTP port listens beyond loopback without httpAuthToken: anyone reaching it reads /status and /metrics",
			"httpBindAddress", s.cfg.HTTPBindAddress, "httpPort", s.cfg.HTTPPort)
	}
	return nil
}

// handler is the HTTP port's whole handler: the endpoints behind opshttp.Guard.
func (s *statusPages) handler() http.Handler {
	opts := opshttp.Options{AuthToken: s.cfg.HTTPAuthToken, EnablePprof: s.cfg.EnablePprof}
	mux := http.NewServeMux()
	opshttp.RegisterPprof(mux, opts)
	mux.Handle("/metrics", s.metrics)
	registerStatusPage(mux) // statuspage.go: GET / and /ui
	mux.HandleFunc("/status", s.serveStatus)
	mux.HandleFunc(ReadyPath, s.serveReady) // ready.go: readiness for probes, public
	mux.HandleFunc(SendTracePath, s.serveSendTrace)
	return opshttp.Guard(mux, opts, statusPagePublicPaths...)
}

// SendTracePath serves the send latency breakdown (sendTraceEnable, DLedger mode): JSON with
// "leader", the sends this node led, and "follower", the AppendEntries it stored as follower
// (sendtrace.Report each); ?format=text, the same as tables. ?reset=1 forgets both instead, as a
// benchmark does after its warm-up.
const SendTracePath = "/debug/sendtrace"

func (s *statusPages) serveSendTrace(w http.ResponseWriter, r *http.Request) {
	rp, ok := s.place.(*raftPlace)
	if !ok || rp.sends == nil {
		http.Error(w, "send tracing is off: it needs DLedger mode and sendTraceEnable=true", http.StatusNotFound)
		return
	}
	if r.URL.Query().Get("format") == "text" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_ = rp.sends.Report().WriteText(w, "sends led by "+rp.selfID)
		_ = rp.node.FollowerTrace().WriteText(w, "AppendEntries stored as follower by "+rp.selfID)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Query().Get("reset") != "" {
		rp.sends.Reset()
		rp.node.ResetTrace()
		_, _ = w.Write([]byte(`{"reset":true}` + "\n"))
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"leader": rp.sends.Report(), "follower": rp.node.FollowerTrace()})
}

// serveStatus answers /status: the broker's identity, store, lists and live figures as JSON.
func (s *statusPages) serveStatus(w http.ResponseWriter, _ *http.Request) {
	st, err := s.storeStats()
	w.Header().Set("Content-Type", "application/json")
	status := map[string]any{
		"cluster": s.cfg.BrokerClusterName, "brokerName": s.cfg.BrokerName, "brokerId": s.place.brokerID(),
		"role": s.place.roleName(), "addr": s.addr(), "store": st,
		"putTotal": s.stats.putTotal.Load(), "getTotal": s.stats.getTotal.Load(),
		"version": version.Get(), // internal/version: version, commit, goVersion, buildDate
	}
	if err != nil {
		status["storeError"] = err.Error()
	}
	s.addStatusLists(status)                 // statuspage.go: topics, consumer groups and lag
	s.addLiveFigures(status, s.rates.Load()) // statusview.go: rates, uptime, clients, followers
	if rp, err := s.place.raft(); err == nil {
		// The same record mqadmin raftStatus gets over remoting.
		status["raftStatus"] = s.raftStatus(rp)
		status["raft"] = rp.node.Status()
		status["batcher"] = rp.batcher.Stats()
	}
	_ = json.NewEncoder(w).Encode(status)
}

// advertisedHTTPAddr is the address other processes link to: the listener's, with brokerIP1 as
// the host when the port is bound to every interface.
func advertisedHTTPAddr(listen, bind, brokerIP1 string) string {
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(bind); bind == "" || (ip != nil && ip.IsUnspecified()) {
		return net.JoinHostPort(brokerIP1, port)
	}
	return net.JoinHostPort(bind, port)
}

func ptr[T any](v T) *T { return &v }
