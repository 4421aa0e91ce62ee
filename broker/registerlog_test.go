package broker

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestRegisterLogCollapses: a name server failing for 95 s of registrations every 2 s gives one
// WARN, a summary every 30 s and an INFO at the first success; another name server is counted
// apart.
func TestRegisterLogCollapses(t *testing.T) {
	var out bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Debug})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := registerLog{now: func() time.Time { return now }}
	for i := 0; i < 48; i++ { // 0 s .. 94 s
		r.failed(log, "127.0.0.1:9876", "register with name server failed", "error", errors.New("connection refused"))
		now = now.Add(2 * time.Second)
	}
	r.failed(log, "127.0.0.1:9877", "name server refused registration", "code", 1)
	r.ok(log, "127.0.0.1:9876")
	r.ok(log, "127.0.0.1:9876") // no run left: silent
	s := out.String()
	if n := strings.Count(s, "[WARN]"); n != 5 { // first + summaries at 30, 60, 90 s + the other server's first
		t.Errorf("%d WARN lines, want 5:\n%s", n, s)
	}
	if n := strings.Count(s, "registered with name server again"); n != 1 || !strings.Contains(s, "failures=48") {
		t.Errorf("recovery INFO missing or repeated:\n%s", s)
	}
	if !strings.Contains(s, "failures=15 total=16") {
		t.Errorf("the 30 s summary does not count its failures:\n%s", s)
	}
}
