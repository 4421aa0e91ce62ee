package config

import (
	"strings"
	"testing"
)

// The ACL keys: a file with aclEnable, both halves of the broker's key pair, no placeholder
// keys, and an account for a DLedger node.
func TestACLKeys(t *testing.T) {
	dleger := []string{"--enableDLegerCommitLog=true", "--dLegerGroup=g", "--dLegerPeers=n0-127.0.0.1:40911", "--dLegerSelfId=n0"}
	cases := []struct {
		args []string
		bad  string // key named in the error, "" = valid
	}{
		{[]string{"--aclEnable=true"}, "aclConfigFile"},
		{[]string{"--aclEnable=true", "--aclConfigFile=/etc/acl.yml"}, ""},
		{[]string{"--accessKey=brokerKey1"}, "accessKey"},
		{[]string{"--accessKey=CHANGE_ME_ADMIN_ACCESS_KEY", "--secretKey=CHANGE_ME_ADMIN_SECRET_KEY"}, "secretKey"},
		{[]string{"--accessKey=brokerKey1", "--secretKey=short"}, "secretKey"},
		{append([]string{"--aclEnable=true", "--aclConfigFile=/etc/acl.yml"}, dleger...), "accessKey"},
		{append([]string{"--aclEnable=true", "--aclConfigFile=/etc/acl.yml", "--accessKey=brokerKey1", "--secretKey=brokerSecret1"}, dleger...), ""},
	}
	for _, c := range cases {
		_, _, err := LoadBroker(c.args)
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad)):
			t.Errorf("%v: error %v, want one naming %s", c.args, err, c.bad)
		}
	}
	if _, _, err := LoadNamesrv([]string{"--aclEnable=true"}); err == nil || !strings.Contains(err.Error(), "aclConfigFile") {
		t.Errorf("namesrv aclEnable without a file: %v", err)
	}
}
