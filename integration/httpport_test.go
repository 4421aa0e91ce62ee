package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// httpStatus is one request's status code (and body, for messages) against a real HTTP port.
func httpStatus(t testing.TB, method, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(body)
}

// reachableOn reports whether something accepts TCP connections on ip:port.
func reachableOn(ip string, port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(port)), 2*time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// TestHTTPPortProtection: a broker and a name server with httpPort and nothing else set serve
// no /debug/pprof, accept only GET and HEAD, and listen on 127.0.0.1 only (127.0.0.2, another
// loopback address, reaches a socket bound to every interface but not one bound to 127.0.0.1).
// A broker with httpBindAddress=0.0.0.0, enablePprof and httpAuthToken is reachable on
// 127.0.0.2, needs the token on /status, /metrics and pprof, and refuses a one-hour profile.
func TestHTTPPortProtection(t *testing.T) {
	t.Parallel()
	nsHTTP := freePort(t)
	ns := startNamesrv(t, "--httpPort="+strconv.Itoa(nsHTTP))
	defPort, openPort := freePort(t), freePort(t)
	const token = "integration-http-token"
	startBroker(t, ns, withProp("httpPort", strconv.Itoa(defPort)))
	startBroker(t, ns, withProp("httpPort", strconv.Itoa(openPort)), withProp("httpBindAddress", "0.0.0.0"),
		withProp("enablePprof", "true"), withProp("httpAuthToken", token))

	// Defaults: no pprof, read-only, loopback only.
	defURL := fmt.Sprintf("http://127.0.0.1:%d", defPort)
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1", "/debug/pprof/heap"} {
		if code, _ := httpStatus(t, "GET", defURL+p, ""); code != http.StatusNotFound {
			t.Errorf("default broker GET %s: %d, want 404", p, code)
		}
	}
	for _, p := range []string{"/status", "/metrics"} {
		if code, body := httpStatus(t, "GET", defURL+p, ""); code != http.StatusOK {
			t.Errorf("default broker GET %s: %d %s", p, code, body)
		}
		if code, _ := httpStatus(t, "POST", defURL+p, ""); code != http.StatusMethodNotAllowed {
			t.Errorf("default broker POST %s: %d, want 405", p, code)
		}
	}
	if !reachableOn("127.0.0.1", defPort) || reachableOn("127.0.0.2", defPort) {
		t.Errorf("default broker's HTTP port: reachable on 127.0.0.1 %v, on 127.0.0.2 %v; want only 127.0.0.1",
			reachableOn("127.0.0.1", defPort), reachableOn("127.0.0.2", defPort))
	}
	if !reachableOn("127.0.0.1", nsHTTP) || reachableOn("127.0.0.2", nsHTTP) {
		t.Errorf("name server's HTTP port: reachable on 127.0.0.1 %v, on 127.0.0.2 %v; want only 127.0.0.1",
			reachableOn("127.0.0.1", nsHTTP), reachableOn("127.0.0.2", nsHTTP))
	}
	if code, _ := httpStatus(t, "DELETE", fmt.Sprintf("http://127.0.0.1:%d/metrics", nsHTTP), ""); code != http.StatusMethodNotAllowed {
		t.Errorf("name server DELETE /metrics: %d, want 405", code)
	}

	// Opened up on purpose: every interface, pprof on, a token.
	if !reachableOn("127.0.0.2", openPort) {
		t.Errorf("httpBindAddress=0.0.0.0: not reachable on 127.0.0.2:%d", openPort)
	}
	openURL := fmt.Sprintf("http://127.0.0.1:%d", openPort)
	for _, p := range []string{"/status", "/metrics", "/debug/pprof/"} {
		if code, _ := httpStatus(t, "GET", openURL+p, ""); code != http.StatusUnauthorized {
			t.Errorf("token broker GET %s without the token: %d, want 401", p, code)
		}
		if code, _ := httpStatus(t, "GET", openURL+p, "wrong"); code != http.StatusUnauthorized {
			t.Errorf("token broker GET %s with a wrong token: %d, want 401", p, code)
		}
		if code, body := httpStatus(t, "GET", openURL+p, token); code != http.StatusOK {
			t.Errorf("token broker GET %s with the token: %d %s", p, code, body)
		}
	}
	if code, _ := httpStatus(t, "GET", openURL+"/", ""); code != http.StatusOK {
		t.Errorf("token broker GET / (the page, no data): %d, want 200", code)
	}
	if code, body := httpStatus(t, "GET", openURL+"/debug/pprof/profile?seconds=3600", token); code != http.StatusBadRequest {
		t.Errorf("one-hour CPU profile: %d %s, want 400", code, body)
	}
	start := time.Now()
	if code, body := httpStatus(t, "GET", openURL+"/debug/pprof/profile?seconds=1", token); code != http.StatusOK {
		t.Errorf("one-second CPU profile from loopback: %d %s, want 200", code, body)
	}
	t.Logf("default ports loopback-only without pprof; opened port: token enforced, 1 s profile served in %v, 3600 s refused",
		time.Since(start).Round(time.Millisecond))
}
