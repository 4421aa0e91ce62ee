package broker

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"rocketraft/internal/opshttp"
	"rocketraft/internal/version"
)

// statusPagePublicPaths are the status page's static files (statuspage.go, webui): no data,
// served without httpAuthToken; the page's script sends the token when it reads /status. So is
// ReadyPath (ready.go), which probes read without credentials.
var statusPagePublicPaths = []string{"/", "/ui", "/ui/common.css", "/ui/common.js", ReadyPath}

// startHTTP serves operational endpoints on httpBindAddress:httpPort (0 = off; loopback by
// default): / (and /ui), an HTML status page (statuspage.go); /status with the broker's
// identity, store figures, topics and consumer lag as JSON, /metrics for Prometheus
// (metrics.go), and with enablePprof Go's /debug/pprof so a CPU profile can be taken from a
// running broker under load (loopback clients only, at most opshttp.MaxProfileSeconds). Every
// endpoint is GET/HEAD only; with httpAuthToken set, all but the page's static files need it
// (package internal/opshttp).
func (b *Broker) startHTTP() error {
	// The rate sampler runs even without the port: VIEW_BROKER_STATS_DATA (statsdata.go) reads it.
	rates := newStatusRates(b.rateCounters)
	b.rates.Store(rates)
	go rates.run(b.stop)
	if b.cfg.HTTPPort == 0 {
		return nil
	}
	ln, err := opshttp.Listen(b.cfg.HTTPBindAddress, b.cfg.HTTPPort)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: b.httpHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.logger.Error("http server stopped", "error", err)
		}
	}()
	go func() {
		<-b.stop
		_ = srv.Close()
	}()
	b.httpAddr.Store(ptr(advertisedHTTPAddr(ln.Addr().String(), b.cfg.HTTPBindAddress, b.cfg.BrokerIP1)))
	b.logger.Info("http endpoints", "addr", ln.Addr().String(), "pprof", b.cfg.EnablePprof, "token", b.cfg.HTTPAuthToken != "")
	if opshttp.Exposed(b.cfg.HTTPBindAddress) && b.cfg.HTTPAuthToken == "" {
		b.logger.Warn("the HTTP port listens beyond loopback without httpAuthToken: anyone reaching it reads /status and /metrics",
			"httpBindAddress", b.cfg.HTTPBindAddress, "httpPort", b.cfg.HTTPPort)
	}
	return nil
}

// httpHandler is the HTTP port's whole handler: the endpoints behind opshttp.Guard.
func (b *Broker) httpHandler() http.Handler {
	opts := opshttp.Options{AuthToken: b.cfg.HTTPAuthToken, EnablePprof: b.cfg.EnablePprof}
	mux := http.NewServeMux()
	opshttp.RegisterPprof(mux, opts)
	mux.Handle("/metrics", b.metrics.registry.Handler())
	registerStatusPage(mux) // statuspage.go: GET / and /ui
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
		st, err := b.runtimeH.storeStats()
		w.Header().Set("Content-Type", "application/json")
		status := map[string]any{
			"cluster": b.cfg.BrokerClusterName, "brokerName": b.cfg.BrokerName, "brokerId": b.brokerID(),
			"role": b.roleName(), "addr": b.brokerAddr, "store": st,
			"putTotal": b.stats.putTotal.Load(), "getTotal": b.stats.getTotal.Load(),
			"version": version.Get(), // internal/version: version, commit, goVersion, buildDate
		}
		if err != nil {
			status["storeError"] = err.Error()
		}
		b.addStatusLists(status)                 // statuspage.go: topics, consumer groups and lag
		b.addLiveFigures(status, b.rates.Load()) // statusview.go: rates, uptime, clients, followers
		if rp, err := b.place.raft(); err == nil {
			// The same record mqadmin raftStatus gets over remoting.
			status["raftStatus"] = b.raftAdmin.raftStatus(rp)
			status["raft"] = rp.node.Status()
			status["batcher"] = rp.batcher.Stats()
		}
		_ = json.NewEncoder(w).Encode(status)
	})
	mux.HandleFunc(ReadyPath, b.serveReady) // ready.go: readiness for probes, public
	return opshttp.Guard(mux, opts, statusPagePublicPaths...)
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
