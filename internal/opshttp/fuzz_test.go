package opshttp

import (
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
)

// FuzzGuard: whatever the method, path, query, peer and Authorization header, Guard and the
// pprof guard never panic, let only GET/HEAD (and POST to the symbol endpoint) through, never
// let a wrong token through, and never start a profile longer than MaxProfileSeconds.
func FuzzGuard(f *testing.F) {
	f.Add("GET", "/status", "", "127.0.0.1:1", "Bearer tok")
	f.Add("POST", "/debug/pprof/symbol", "", "127.0.0.1:1", "Bearer tok")
	f.Add("GET", "/debug/pprof/profile", "seconds=3600", "[::1]:1", "Bearer tok")
	f.Add("GET", "/debug/pprof/trace", "seconds=1e9", "127.0.0.1:1", "Bearer  tok ")
	f.Add("DELETE", "/", "", "10.0.0.1:1", "")
	f.Fuzz(func(t *testing.T, method, path, query, remote, auth string) {
		u := &url.URL{Path: "/" + path, RawQuery: query}
		r, err := http.NewRequest(method, "http://x"+u.RequestURI(), nil)
		if err != nil {
			return
		}
		r.RemoteAddr = remote
		r.Header.Set("Authorization", auth)
		reached := false
		mux := http.NewServeMux()
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { reached = true })
		h := Guard(pprofGuard(mux), Options{AuthToken: "tok"})
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if !reached {
			return
		}
		if r.Method != "GET" && r.Method != "HEAD" && !(r.Method == "POST" && r.URL.Path == "/debug/pprof/symbol") {
			t.Fatalf("%s %s reached the handler", r.Method, r.URL.Path)
		}
		if !tokenMatches(r, sha256.Sum256([]byte("tok"))) {
			t.Fatalf("a request with Authorization %q reached the handler", auth)
		}
		if s := r.URL.Query().Get("seconds"); s != "" {
			if n, err := strconv.ParseFloat(s, 64); err != nil || !(n >= 0 && n <= MaxProfileSeconds) {
				t.Fatalf("seconds=%q reached the handler", s)
			}
		}
		if !loopbackPeer(remote) {
			t.Fatalf("peer %q reached the pprof handler", remote)
		}
	})
}
