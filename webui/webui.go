// Package webui holds what the broker's and the name server's status pages share: the
// stylesheet and the text-only rendering helpers (every value goes into a text node, never into
// HTML), served as /ui/common.css and /ui/common.js, so the two pages cannot drift apart in how
// they render or escape data.
package webui

import (
	_ "embed"
	"net/http"
)

var (
	//go:embed common.css
	commonCSS []byte
	//go:embed common.js
	commonJS []byte
)

// ContentSecurityPolicy is what both pages are served with: their own inline script and style,
// the shared files from the same origin, nothing from elsewhere.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'"

// Register adds GET /ui/common.css and GET /ui/common.js to mux.
func Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /ui/common.css", serve("text/css; charset=utf-8", commonCSS))
	mux.HandleFunc("GET /ui/common.js", serve("text/javascript; charset=utf-8", commonJS))
}

func serve(contentType string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(body)
	}
}
