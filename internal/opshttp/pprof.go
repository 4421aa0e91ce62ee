package opshttp

import (
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"strconv"
)

// MaxProfileSeconds caps the seconds parameter of every pprof endpoint (a CPU profile, an
// execution trace, a delta profile): a longer one is refused with 400, so nobody holds the
// profiler (one CPU profile at a time per process) or a trace's overhead for an hour.
const MaxProfileSeconds = 60

// RegisterPprof adds Go's /debug/pprof endpoints to mux when opts.EnablePprof is set (nothing
// otherwise: they answer 404). They are served to loopback clients only (403 otherwise),
// whatever address the port binds, and with the seconds parameter capped.
func RegisterPprof(mux *http.ServeMux, opts Options) {
	if !opts.EnablePprof {
		return
	}
	mux.Handle("/debug/pprof/", pprofGuard(http.HandlerFunc(pprof.Index)))
	mux.Handle("/debug/pprof/cmdline", pprofGuard(http.HandlerFunc(pprof.Cmdline)))
	mux.Handle("/debug/pprof/profile", pprofGuard(http.HandlerFunc(pprof.Profile)))
	mux.Handle("/debug/pprof/symbol", pprofGuard(http.HandlerFunc(pprof.Symbol)))
	mux.Handle("/debug/pprof/trace", pprofGuard(http.HandlerFunc(pprof.Trace)))
}

// pprofGuard refuses non-loopback peers and a seconds parameter that is not a number in
// 0..MaxProfileSeconds.
func pprofGuard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackPeer(r.RemoteAddr) {
			http.Error(w, "pprof is served to loopback clients only", http.StatusForbidden)
			return
		}
		if s := r.URL.Query().Get("seconds"); s != "" {
			n, err := strconv.ParseFloat(s, 64)
			if err != nil || !(n >= 0 && n <= MaxProfileSeconds) {
				http.Error(w, "seconds must be a number within 0.."+strconv.Itoa(MaxProfileSeconds), http.StatusBadRequest)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// loopbackPeer reports whether a request's RemoteAddr (ip:port) is a loopback address.
func loopbackPeer(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}
