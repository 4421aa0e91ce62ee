package broker

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"rocketraft/config"
)

// httpTestBroker is a classic broker (not started) with cfgMod applied, for its HTTP handler.
func httpTestBroker(t *testing.T, cfgMod func(*config.Broker)) *Broker {
	t.Helper()
	cfg := config.NewBroker()
	cfg.StorePathRootDir = t.TempDir()
	cfg.MappedFileSizeCommitLog = 1 << 20
	cfg.MapedFileSizeConsumeQueue = 1000 * 20
	cfg.NamesrvAddr = ""
	if cfgMod != nil {
		cfgMod(cfg)
	}
	cfg.Normalize()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// httpDo runs one request through the broker's HTTP handler from remote.
func httpDo(h http.Handler, method, target, remote, auth string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	r.RemoteAddr = remote
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// The broker's HTTP port by default: no pprof, read-only, /status and /metrics open.
func TestHTTPDefaults(t *testing.T) {
	h := httpTestBroker(t, nil).status.handler()
	const local = "127.0.0.1:40000"
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1", "/debug/pprof/goroutine"} {
		if w := httpDo(h, "GET", p, local, ""); w.Code != http.StatusNotFound {
			t.Errorf("GET %s with enablePprof=false: %d, want 404", p, w.Code)
		}
	}
	for _, p := range []string{"/status", "/metrics", "/", "/ui"} {
		if w := httpDo(h, "GET", p, local, ""); w.Code != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", p, w.Code)
		}
		if w := httpDo(h, "HEAD", p, local, ""); w.Code != http.StatusOK {
			t.Errorf("HEAD %s: %d, want 200", p, w.Code)
		}
		for _, m := range []string{"POST", "PUT", "DELETE"} {
			w := httpDo(h, m, p, local, "")
			if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d Allow %q, want 405 Allow: GET, HEAD", m, p, w.Code, w.Header().Get("Allow"))
			}
		}
	}
}

// enablePprof: served to loopback peers only, profile lengths capped.
func TestHTTPPprofEnabled(t *testing.T) {
	h := httpTestBroker(t, func(c *config.Broker) { c.EnablePprof = true }).status.handler()
	if w := httpDo(h, "GET", "/debug/pprof/", "127.0.0.1:40000", ""); w.Code != http.StatusOK {
		t.Errorf("pprof index from loopback: %d", w.Code)
	}
	if w := httpDo(h, "GET", "/debug/pprof/", "192.0.2.1:40000", ""); w.Code != http.StatusForbidden {
		t.Errorf("pprof index from 192.0.2.1: %d, want 403", w.Code)
	}
	for _, p := range []string{"/debug/pprof/profile?seconds=3600", "/debug/pprof/trace?seconds=120"} {
		if w := httpDo(h, "GET", p, "127.0.0.1:40000", ""); w.Code != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", p, w.Code)
		}
	}
}

// httpAuthToken: /status, /metrics and pprof need the bearer token, the page's files do not.
func TestHTTPToken(t *testing.T) {
	h := httpTestBroker(t, func(c *config.Broker) { c.HTTPAuthToken = "tok-123"; c.EnablePprof = true }).status.handler()
	const local = "127.0.0.1:40000"
	for _, p := range []string{"/status", "/metrics", "/debug/pprof/"} {
		if w := httpDo(h, "GET", p, local, ""); w.Code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", p, w.Code)
		}
		if w := httpDo(h, "GET", p, local, "Bearer tok-12"); w.Code != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %d, want 401", p, w.Code)
		}
		if w := httpDo(h, "GET", p, local, "Bearer tok-123"); w.Code != http.StatusOK {
			t.Errorf("GET %s with the token: %d, want 200", p, w.Code)
		}
	}
	for _, p := range []string{"/", "/ui", "/ui/common.js", "/ui/common.css"} {
		if w := httpDo(h, "GET", p, local, ""); w.Code != http.StatusOK {
			t.Errorf("GET %s (static) without the token: %d, want 200", p, w.Code)
		}
	}
}
