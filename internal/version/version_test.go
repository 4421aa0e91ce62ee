package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestResolveStamped(t *testing.T) {
	in := resolve("v1.2.3", "abc", "2026-01-01T00:00:00Z", func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.99", Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "zzz"}}}, true
	})
	if in.Version != "v1.2.3" || in.Commit != "abc" || in.Date != "2026-01-01T00:00:00Z" || in.GoVersion != "go1.99" {
		t.Fatalf("stamped values must win: %+v", in)
	}
}

func TestResolveFallback(t *testing.T) {
	in := resolve("", "", "", func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"},
			{Key: "vcs.time", Value: "2026-02-03T04:05:06Z"},
			{Key: "vcs.modified", Value: "true"},
		}}, true
	})
	if in.Commit != "0123456789abcdef0123" || in.Date != "2026-02-03T04:05:06Z" || in.Version != "dev-0123456789ab-dirty" {
		t.Fatalf("fallback from build info: %+v", in)
	}
	none := resolve("", "", "", func() (*debug.BuildInfo, bool) { return nil, false })
	if none.Version != "unknown" || none.Commit != "unknown" || none.Date != "unknown" || none.GoVersion == "" {
		t.Fatalf("no build info: %+v", none)
	}
	if s := Line("mqbroker"); !strings.HasPrefix(s, "mqbroker rocketraft ") || !strings.Contains(s, "commit ") {
		t.Fatalf("Line = %q", s)
	}
}
