package sysmon

import (
	"slices"
	"testing"
)

func TestEnv(t *testing.T) {
	for _, c := range []struct {
		name    string
		in      []string
		want    []string
		changed bool
	}{
		{"no GODEBUG", []string{"A=1", "B=2"}, []string{"A=1", "B=2", "GODEBUG=" + Setting}, true},
		{"empty GODEBUG", []string{"GODEBUG=", "A=1"}, []string{"A=1", "GODEBUG=" + Setting}, true},
		{"other settings kept first", []string{"GODEBUG=gctrace=1,madvdontneed=1", "A=1"}, []string{"A=1", "GODEBUG=gctrace=1,madvdontneed=1," + Setting}, true},
		{"the operator's schedtrace stands", []string{"GODEBUG=schedtrace=1000", "A=1"}, []string{"GODEBUG=schedtrace=1000", "A=1"}, false},
		{"schedtrace=0 among others", []string{"GODEBUG=gctrace=1,schedtrace=0"}, []string{"GODEBUG=gctrace=1,schedtrace=0"}, false},
		{"a key with a space is not the runtime's", []string{"GODEBUG=gctrace=1, schedtrace=0"}, []string{"GODEBUG=gctrace=1, schedtrace=0," + Setting}, true},
		{"the first GODEBUG is the one read", []string{"GODEBUG=gctrace=1", "A=1", "GODEBUG=schedtrace=5"}, []string{"A=1", "GODEBUG=gctrace=1," + Setting}, true},
		{"a key that only ends in schedtrace", []string{"GODEBUG=xschedtrace=1"}, []string{"GODEBUG=xschedtrace=1," + Setting}, true},
	} {
		got, changed := Env(c.in)
		if !slices.Equal(got, c.want) || changed != c.changed {
			t.Errorf("%s: Env(%q) = %q, %v; want %q, %v", c.name, c.in, got, changed, c.want, c.changed)
		}
	}
}

func TestInEffect(t *testing.T) {
	t.Setenv("GODEBUG", "gctrace=0")
	if InEffect() {
		t.Error("GODEBUG without schedtrace: in effect")
	}
	t.Setenv("GODEBUG", "gctrace=0,"+Setting)
	if !InEffect() {
		t.Error("GODEBUG with the setting: not in effect")
	}
}
