package broker

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"
)

// startHTTP serves operational endpoints on httpPort (0 = off): / (and /ui), an
// HTML status page (statuspage.go); /status with the broker's identity, store
// figures, topics and consumer lag as JSON, /metrics for Prometheus
// (metrics.go), and Go's /debug/pprof so a CPU profile can be taken from a
// running broker under load.
func (b *Broker) startHTTP() error {
	if b.cfg.HTTPPort == 0 {
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.Handle("/metrics", b.metrics.registry.Handler())
	registerStatusPage(mux) // statuspage.go: GET / and /ui
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
		st, err := b.storeStats()
		w.Header().Set("Content-Type", "application/json")
		status := map[string]any{
			"cluster": b.cfg.BrokerClusterName, "brokerName": b.cfg.BrokerName, "brokerId": b.brokerID(),
			"role": b.roleName(), "addr": b.brokerAddr, "store": st,
			"putTotal": b.stats.putTotal.Load(), "getTotal": b.stats.getTotal.Load(),
		}
		if err != nil {
			status["storeError"] = err.Error()
		}
		b.addStatusLists(status) // statuspage.go: topics, consumer groups and lag
		if b.raft != nil {
			// The same record mqadmin raftStatus gets over remoting.
			status["raftStatus"] = b.raftStatus()
			status["raft"] = b.raft.node.Status()
			status["batcher"] = b.raft.batcher.Stats()
		}
		_ = json.NewEncoder(w).Encode(status)
	})
	ln, err := net.Listen("tcp", net.JoinHostPort(listenHost(b.cfg.BrokerIP1), strconv.Itoa(b.cfg.HTTPPort)))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.logger.Error("http server stopped", "error", err)
		}
	}()
	go func() {
		<-b.stop
		_ = srv.Close()
	}()
	b.logger.Info("http endpoints", "addr", ln.Addr().String())
	return nil
}
