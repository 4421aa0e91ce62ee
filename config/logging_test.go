package config

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// logFormat=json gives one JSON object per line with the level and the pairs; text gives hclog's
// line format; logLevel filters both.
func TestNewLoggerFormats(t *testing.T) {
	var buf bytes.Buffer
	NewLogger("mqbroker", "info", "json", &buf).Info("broker started", "addr", "127.0.0.1:10911")
	NewLogger("mqbroker", "info", "json", &buf).Debug("hidden")
	var rec map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &rec); err != nil {
		t.Fatalf("json log line %q: %v", buf.String(), err)
	}
	if rec["@level"] != "info" || rec["@message"] != "broker started" || rec["addr"] != "127.0.0.1:10911" || rec["@module"] != "mqbroker" {
		t.Fatalf("json record: %v", rec)
	}
	buf.Reset()
	NewLogger("mqnamesrv", "warn", "text", &buf).Info("hidden")
	NewLogger("mqnamesrv", "warn", "text", &buf).Warn("disk", "ratio", 91)
	if out := buf.String(); strings.Contains(out, "hidden") || !strings.Contains(out, "[WARN]  mqnamesrv: disk: ratio=91") {
		t.Fatalf("text log: %q", out)
	}
}
