package namesrv

import (
	"net/http"
	"testing"
)

// The name server's HTTP port: read-only, and with HTTPAuthToken the data endpoints need it.
func TestHTTPMethodsAndToken(t *testing.T) {
	s := startServer(t, Config{HTTPAddr: "127.0.0.1:0", HTTPAuthToken: "ns-token"})
	base := "http://" + s.HTTPAddr()
	do := func(method, path, auth string) *http.Response {
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, p := range []string{"/metrics", "/cluster"} {
		if r := do("GET", p, ""); r.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", p, r.StatusCode)
		}
		if r := do("GET", p, "Bearer ns-token"); r.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the token: %d, want 200", p, r.StatusCode)
		}
		if r := do("POST", p, "Bearer ns-token"); r.StatusCode != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("POST %s: %d Allow %q, want 405 Allow: GET, HEAD", p, r.StatusCode, r.Header.Get("Allow"))
		}
	}
	if r := do("GET", "/", ""); r.StatusCode != http.StatusOK {
		t.Errorf("GET / (the page, no data) without the token: %d, want 200", r.StatusCode)
	}
	if r := do("GET", "/debug/pprof/", ""); r.StatusCode != http.StatusUnauthorized && r.StatusCode != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/: %d, want 401 or 404", r.StatusCode)
	}
}
