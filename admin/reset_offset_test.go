package admin

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseResetTime(t *testing.T) {
	loc := time.FixedZone("X", 3600)
	now := time.UnixMilli(1_700_000_000_123)
	for in, want := range map[string]int64{
		"now":                     now.UnixMilli(),
		"1234":                    1234,
		"-1":                      -1,
		"2024-01-02#03:04:05:006": time.Date(2024, 1, 2, 3, 4, 5, 6e6, loc).UnixMilli(),
	} {
		if got, err := ParseResetTime(in, now, loc); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "yesterday", "-5", "2024-01-02 03:04:05"} {
		if _, err := ParseResetTime(bad, now, loc); !errors.Is(err, ErrUsage) {
			t.Errorf("%q: %v, want a usage error", bad, err)
		}
	}
}

// The new commands reject bad command lines with exit 2 before any network call.
func TestNewCommandsUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"queryMsgByUniqueKey", "-t", "T"}, "-i/--msgId is required"},
		{[]string{"queryMsgByOffset", "-t", "T", "-b", "b", "-i", "0"}, "--offset are required"},
		{[]string{"consumeMessage", "-t", "T", "-c", "0"}, "-c must be positive"},
		{[]string{"resetOffsetByTime", "-g", "G", "-t", "T", "-s", "yesterday"}, "want milliseconds, now"},
		{[]string{"resetOffsetByTime", "-g", "G", "-t", "T"}, "-s/--timestamp is required"},
		{[]string{"updateSubGroup", "-g", "G"}, "exactly one of -c/--clusterName and -b/--brokerAddr"},
		{[]string{"updateSubGroup", "-g", "G", "-b", "x:1", "-q", "-1"}, "-q must not be negative"},
		{[]string{"deleteSubGroup", "-b", "x:1"}, "-g/--groupName is required"},
		{[]string{"consumerConnection"}, "-g/--consumerGroup is required"},
		{[]string{"producerConnection", "-g", "P"}, "-t/--topic is required"},
		{[]string{"sendMessage", "-t", "T"}, "-p/--body is required"},
	} {
		_, errOut, code := runMain(append(tc.args, "-n", "127.0.0.1:1")...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("mqadmin %v: exit %d, stderr %q; want exit 2 mentioning %q", tc.args, code, errOut, tc.want)
		}
	}
}
