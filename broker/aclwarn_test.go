package broker

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"rocketraft/config"
)

// ACL off on a port beyond loopback logs the SECURITY warning; on loopback, or with ACL on,
// nothing.
func TestWarnACLOff(t *testing.T) {
	for _, c := range []struct {
		listen string
		acl    bool
		want   bool
	}{{":10911", false, true}, {"10.1.2.3:10911", false, true}, {"127.0.0.1:10911", false, false}, {":10911", true, false}} {
		var buf bytes.Buffer
		cfg := config.NewBroker()
		cfg.AclEnable = c.acl
		g := &aclGate{cfg: cfg, logger: hclog.New(&hclog.LoggerOptions{Output: &buf})}
		g.warnACLOff(c.listen)
		if got := strings.Contains(buf.String(), "SECURITY: aclEnable=false"); got != c.want {
			t.Errorf("listen %q acl %v: warned %v, want %v (%s)", c.listen, c.acl, got, c.want, buf.String())
		}
	}
}
