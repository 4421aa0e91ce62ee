// Package opshttp is what the operational HTTP ports of the broker, the name server and the
// proxy share, so they are protected alike: read-only methods (GET and HEAD, 405 otherwise), an
// optional bearer token, Go's pprof only when switched on and only for loopback clients with
// bounded profile lengths, and a listener on a configured bind address (loopback by default in
// config). These ports carry the node's figures (topics, groups, lag, Raft state) and, with
// pprof, its memory: nothing for a stranger.
package opshttp

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// Options say how a port's endpoints are protected.
type Options struct {
	// AuthToken, when not empty, is required as "Authorization: Bearer <token>" on every
	// endpoint but the public ones (see Guard); 401 otherwise.
	AuthToken string
	// EnablePprof registers Go's /debug/pprof endpoints (RegisterPprof); off, they are 404.
	EnablePprof bool
}

// allowedMethods is the Allow header of a 405.
const allowedMethods = "GET, HEAD"

// Guard wraps h: a request with another method than GET or HEAD gets 405 with an Allow header
// (POST is let through to /debug/pprof/symbol, the one endpoint that reads a body); with
// opts.AuthToken set, a request for anything but the public paths (the static status-page
// files, which carry no data) needs the token.
func Guard(h http.Handler, opts Options, public ...string) http.Handler {
	var want [sha256.Size]byte
	if opts.AuthToken != "" {
		want = sha256.Sum256([]byte(opts.AuthToken))
	}
	isPublic := make(map[string]bool, len(public))
	for _, p := range public {
		isPublic[p] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
		case r.Method == http.MethodPost && r.URL.Path == "/debug/pprof/symbol":
		default:
			w.Header().Set("Allow", allowedMethods)
			http.Error(w, "method "+r.Method+" not allowed: this port is read-only", http.StatusMethodNotAllowed)
			return
		}
		if opts.AuthToken != "" && !isPublic[r.URL.Path] && !tokenMatches(r, want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="rocketraft"`)
			http.Error(w, "a token is required: Authorization: Bearer <httpAuthToken>", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// tokenMatches compares the request's bearer token with the configured one's digest in
// constant time (digests, so not even the length is compared early).
func tokenMatches(r *http.Request, want [sha256.Size]byte) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
	return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
}

// Exposed reports whether a port bound to host is reachable beyond this machine: host is empty,
// unspecified (0.0.0.0, ::) or a non-loopback address.
func Exposed(host string) bool {
	a, err := netip.ParseAddr(host)
	return err != nil || !a.IsLoopback()
}

// Listen binds host:port ("" or 0.0.0.0 = every interface).
func Listen(host string, port int) (net.Listener, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on http address %s: %w", addr, err)
	}
	return ln, nil
}
