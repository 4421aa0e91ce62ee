package broker

import (
	"strconv"
	"strings"
	"testing"

	"rocketraft/remoting"
)

// Every entry names its request and a reason, codes are not listed twice, and the answer is
// REQUEST_CODE_NOT_SUPPORTED with that remark.
func TestUnsupportedCodes(t *testing.T) {
	seen := map[int32]bool{}
	for _, u := range unsupportedCodes {
		if seen[u.code] || u.name == "" || u.reason == "" {
			t.Fatalf("bad or repeated entry %+v", u)
		}
		seen[u.code] = true
		req := remoting.NewRequest(u.code, nil, nil)
		resp := unsupportedHandler(u)(nil, req)
		if resp.Code != remoting.RequestCodeNotSupported || !strings.Contains(resp.Remark, "request code "+strconv.Itoa(int(u.code))+" "+u.name) {
			t.Fatalf("code %d: %d %q", u.code, resp.Code, resp.Remark)
		}
	}
}
