package config

import (
	"errors"
	"strings"
	"testing"
)

// TestEveryFlagHasHelp: every key of mqbroker and mqnamesrv has a one-line meaning and a help
// section (mqproxy's keys: proxy/config_test.go), and --help shows the sections with no bare
// "property X" line.
func TestEveryFlagHasHelp(t *testing.T) {
	for name, cfg := range map[string]any{"mqbroker": NewBroker(), "mqnamesrv": NewNamesrv()} {
		if m := MissingHelp(cfg); len(m) > 0 {
			t.Errorf("%s: keys without a meaning or section: %v", name, m)
		}
		for _, f := range fieldsOf(cfg) {
			if strings.Contains(f.help, "\n") {
				t.Errorf("%s: help of %s spans lines", name, f.key)
			}
		}
	}
	u := BrokerUsage()
	for _, want := range []string{"Identity:", "Network:", "Store:", "DLedger (Raft replication):", "Classic HA (master/slave):", "ACL and security:", "Operations (HTTP, logs, limits):", "--version", "--strictConfig", "--fileReservedTime int"} {
		if !strings.Contains(u, want) {
			t.Errorf("mqbroker usage lacks %q", want)
		}
	}
	for _, usage := range []string{u, NamesrvUsage()} {
		for _, line := range strings.Split(usage, "\n") {
			if strings.Contains(line, "property ") {
				t.Errorf("bare help line: %q", line)
			}
		}
	}
	if !strings.Contains(NamesrvUsage(), "--listen string") {
		t.Errorf("mqnamesrv usage lacks its --listen alias")
	}
}

// TestMissingHelpFlagsBareProperty: the check itself catches a bare or empty meaning.
func TestMissingHelpFlagsBareProperty(t *testing.T) {
	var c struct {
		A int    `prop:"a" group:"network" help:"property a"`
		B string `prop:"b" help:""`
		C bool   `prop:"c" help:"fine"`
	}
	if got := MissingHelp(&c); strings.Join(got, ",") != "a,b" {
		t.Fatalf("MissingHelp = %v, want [a b]", got)
	}
}

// TestUnknownKeyDidYouMean: a mistyped key in a file is a warning naming the closest key; with
// strictConfig=true (from the file or a flag) it is an error; a mistyped flag names it too.
func TestUnknownKeyDidYouMean(t *testing.T) {
	p := writeFile(t, "listenPrt=30911\n")
	_, w, err := LoadBroker([]string{"-c", p})
	if err != nil || len(w) != 1 || !strings.Contains(w[0], `did you mean "listenPort"`) {
		t.Fatalf("warnings %q, err %v", w, err)
	}
	for _, args := range [][]string{{"-c", writeFile(t, "strictConfig=true\nlistenPrt=30911\n")}, {"-c", p, "--strictConfig"}} {
		_, _, err = LoadBroker(args)
		if err == nil || !strings.Contains(err.Error(), `did you mean "listenPort"`) || !strings.Contains(err.Error(), "strictConfig=true") {
			t.Errorf("%v: err = %v", args, err)
		}
	}
	_, _, err = LoadNamesrv([]string{"-c", writeFile(t, "strictConfig=true\nlistenAdr=127.0.0.1:1\n")})
	if err == nil || !strings.Contains(err.Error(), `did you mean "listenAddr"`) {
		t.Errorf("namesrv strict: %v", err)
	}
	_, _, err = LoadBroker([]string{"--listenprt=1"})
	if err == nil || !strings.Contains(err.Error(), `did you mean "listenPort"`) {
		t.Errorf("mistyped flag: %v", err)
	}
	if _, _, err := LoadBroker([]string{"--version"}); !errors.Is(err, ErrVersion) {
		t.Errorf("--version: %v", err)
	}
}

// TestErrorsStateUnits: a rejected value of a key whose name does not say its unit states it.
func TestErrorsStateUnits(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--fileReservedTime=x"}, "(unit: hours)"},
		{[]string{"--fileReservedTime=-1"}, "(unit: hours)"},
		{[]string{"--registerNameServerPeriod=0"}, "(unit: milliseconds)"},
		{[]string{"--maxMessageSize=-5"}, "(unit: bytes)"},
	}
	for _, c := range cases {
		_, _, err := LoadBroker(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %s", c.args, err, c.want)
		}
	}
	if _, _, err := LoadNamesrv([]string{"--brokerExpiry=0"}); err == nil || !strings.Contains(err.Error(), "(unit: milliseconds)") {
		t.Errorf("brokerExpiry: %v", err)
	}
}
