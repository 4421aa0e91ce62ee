package proxy

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// httpGetter fetches a page with a bounded wait.
type httpGetter struct{}

func (httpGetter) get(t *testing.T, url string) string {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	r, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
