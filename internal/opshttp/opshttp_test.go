package opshttp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// serve runs one request through Guard over a mux with /status, a public / and pprof per opts.
func serve(opts Options, method, target, remote, auth string) *httptest.ResponseRecorder {
	mux := http.NewServeMux()
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"ok":true}`)) })
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("page")) })
	RegisterPprof(mux, opts)
	r := httptest.NewRequest(method, target, nil)
	if remote != "" {
		r.RemoteAddr = remote
	}
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	Guard(mux, opts, "/").ServeHTTP(w, r)
	return w
}

func TestPprofOffByDefault(t *testing.T) {
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace", "/debug/pprof/heap"} {
		if w := serve(Options{}, "GET", p, "127.0.0.1:5000", ""); w.Code != http.StatusNotFound {
			t.Errorf("GET %s without enablePprof: %d, want 404", p, w.Code)
		}
	}
}

func TestPprofLoopbackOnlyAndCapped(t *testing.T) {
	on := Options{EnablePprof: true}
	if w := serve(on, "GET", "/debug/pprof/", "127.0.0.1:5000", ""); w.Code != http.StatusOK {
		t.Errorf("pprof index from loopback: %d, want 200", w.Code)
	}
	if w := serve(on, "GET", "/debug/pprof/", "[::1]:5000", ""); w.Code != http.StatusOK {
		t.Errorf("pprof index from ::1: %d, want 200", w.Code)
	}
	for _, remote := range []string{"192.0.2.7:5000", "[2001:db8::1]:5000", "garbage"} {
		if w := serve(on, "GET", "/debug/pprof/", remote, ""); w.Code != http.StatusForbidden {
			t.Errorf("pprof index from %s: %d, want 403", remote, w.Code)
		}
	}
	for _, p := range []string{"/debug/pprof/profile?seconds=3600", "/debug/pprof/trace?seconds=61", "/debug/pprof/heap?seconds=-1",
		"/debug/pprof/profile?seconds=x", "/debug/pprof/profile?seconds=NaN"} {
		w := serve(on, "GET", p, "127.0.0.1:5000", "")
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "seconds") {
			t.Errorf("GET %s: %d %q, want 400 naming seconds", p, w.Code, w.Body.String())
		}
	}
	if w := serve(on, "GET", "/debug/pprof/trace?seconds=0.01", "127.0.0.1:5000", ""); w.Code != http.StatusOK {
		t.Errorf("a short trace: %d, want 200", w.Code)
	}
}

func TestReadOnlyMethods(t *testing.T) {
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT"} {
		w := serve(Options{}, m, "/status", "", "")
		if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /status: %d Allow=%q, want 405 with Allow: GET, HEAD", m, w.Code, w.Header().Get("Allow"))
		}
	}
	for _, m := range []string{"GET", "HEAD"} {
		if w := serve(Options{}, m, "/status", "", ""); w.Code != http.StatusOK {
			t.Errorf("%s /status: %d, want 200", m, w.Code)
		}
	}
	// pprof's symbol lookup reads a POST body; it stays behind the switch and loopback.
	if w := serve(Options{}, "POST", "/debug/pprof/symbol", "127.0.0.1:5000", ""); w.Code != http.StatusNotFound {
		t.Errorf("POST symbol without enablePprof: %d, want 404", w.Code)
	}
	if w := serve(Options{EnablePprof: true}, "POST", "/debug/pprof/symbol", "192.0.2.7:5000", ""); w.Code != http.StatusForbidden {
		t.Errorf("POST symbol from afar: %d, want 403", w.Code)
	}
}

func TestToken(t *testing.T) {
	opts := Options{AuthToken: "s3cret-token", EnablePprof: true}
	cases := []struct {
		path, auth string
		want       int
	}{
		{"/status", "", http.StatusUnauthorized},
		{"/status", "Bearer wrong", http.StatusUnauthorized},
		{"/status", "Bearer s3cret-toke", http.StatusUnauthorized},
		{"/status", "Bearer s3cret-token-and-more", http.StatusUnauthorized},
		{"/status", "Basic czNjcmV0LXRva2Vu", http.StatusUnauthorized},
		{"/status", "s3cret-token", http.StatusUnauthorized},
		{"/status", "Bearer s3cret-token", http.StatusOK},
		{"/debug/pprof/", "", http.StatusUnauthorized},
		{"/debug/pprof/", "Bearer s3cret-token", http.StatusOK},
		{"/", "", http.StatusOK}, // the page itself carries no data
	}
	for _, c := range cases {
		w := serve(opts, "GET", c.path, "127.0.0.1:5000", c.auth)
		if w.Code != c.want {
			t.Errorf("GET %s with %q: %d, want %d", c.path, c.auth, w.Code, c.want)
		}
		if w.Code == http.StatusUnauthorized && !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("GET %s: 401 without a Bearer challenge", c.path)
		}
	}
	// No token configured: nothing asked for.
	if w := serve(Options{}, "GET", "/status", "", ""); w.Code != http.StatusOK {
		t.Errorf("GET /status without a token configured: %d", w.Code)
	}
}

func TestExposed(t *testing.T) {
	for host, want := range map[string]bool{"127.0.0.1": false, "::1": false, "127.0.0.2": false, "": true, "0.0.0.0": true, "::": true, "10.0.0.1": true, "name": true} {
		if got := Exposed(host); got != want {
			t.Errorf("Exposed(%q) = %v, want %v", host, got, want)
		}
	}
}
