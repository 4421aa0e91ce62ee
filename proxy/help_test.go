package proxy

import (
	"strings"
	"testing"

	"rocketraft/config"
)

// TestEveryProxyFlagHasHelp: every mqproxy key has a one-line meaning and a help section, and
// the usage lists no bare "property X" line.
func TestEveryProxyFlagHasHelp(t *testing.T) {
	def := DefaultConfig()
	if m := config.MissingHelp(&def); len(m) > 0 {
		t.Errorf("mqproxy keys without a meaning or section: %v", m)
	}
	u := config.JSONUsage("mqproxy", &def, config.JSONFile{Name: "pc", Usage: "JSON file"}, nil)
	for _, line := range strings.Split(u, "\n") {
		if strings.Contains(line, "property ") {
			t.Errorf("bare help line: %q", line)
		}
	}
	for _, want := range []string{"Network:", "ACL and security:", "Operations (HTTP, logs, limits):", "--version"} {
		if !strings.Contains(u, want) {
			t.Errorf("usage lacks %q", want)
		}
	}
}
