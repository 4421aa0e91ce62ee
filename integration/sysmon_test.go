package integration

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"rocketraft/internal/sysmon"
)

// processGODEBUG is GODEBUG as the process pid started with (/proc/PID/environ), "" if unset.
func processGODEBUG(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatalf("environment of %d: %v", pid, err)
	}
	godebug := ""
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := strings.CutPrefix(string(kv), "GODEBUG="); ok {
			godebug = v
		}
	}
	return godebug
}

// TestBrokerSysmonBackoff checks that a broker runs with the runtime setting that keeps the Go
// runtime's system monitor out of deep sleep (config key sysmonBackoff, internal/sysmon): it
// re-executes itself at start, the same process (the PID the harness started, serving), with
// the setting added to the GODEBUG it was given; not with sysmonBackoff=false; and an
// operator's own schedtrace stands.
func TestBrokerSysmonBackoff(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	for _, c := range []struct {
		name string
		opts []brokerOpt
		want string
	}{
		{"default", []brokerOpt{withEnv("GODEBUG=gctrace=0")}, "gctrace=0," + sysmon.Setting},
		{"sysmonBackoff=false", []brokerOpt{withEnv("GODEBUG=gctrace=0"), withFlag("sysmonBackoff", "false")}, "gctrace=0"},
		{"the operator's schedtrace", []brokerOpt{withEnv("GODEBUG=schedtrace=0")}, "schedtrace=0"},
	} {
		b := startBroker(t, ns, c.opts...) // ready: serving, under the PID the harness started
		if got := processGODEBUG(t, b.cmd.Process.Pid); got != c.want {
			t.Errorf("%s: the broker runs with GODEBUG=%q, want %q", c.name, got, c.want)
		}
		b.stop()
	}
}
