package webui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRegister: both shared files are served with their types, and the helpers render text
// nodes only.
func TestRegister(t *testing.T) {
	mux := http.NewServeMux()
	Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for path, want := range map[string]string{"/ui/common.css": "text/css", "/ui/common.js": "text/javascript"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), want) || len(body) == 0 {
			t.Fatalf("%s: %d %q, %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
		if path == "/ui/common.js" && (strings.Contains(string(body), "innerHTML") || !strings.Contains(string(body), "createTextNode")) {
			t.Fatalf("common.js must render values as text nodes only")
		}
	}
}
