package admin

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
)

// TestUnknownCommandSuggests: a mistyped command names the closest ones.
func TestUnknownCommandSuggests(t *testing.T) {
	for word, want := range map[string]string{"clusterlist": `"clusterList"`, "topicLst": `"topicList"`, "brokerStatsu": `"brokerStatus"`} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), []string{word}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "did you mean "+want) {
			t.Errorf("%s: exit %d, stderr %q", word, code, errb.String())
		}
	}
}

// TestConnectionRefusedSaysWhere: a refused name server says which address was tried and how
// to start one; a refused broker says which address too.
func TestConnectionRefusedSaysWhere(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"clusterList", "-n", addr, "--timeout", "2s"}, &out, &errb); code != 1 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	for _, want := range []string{"nothing listens at " + addr, "make run", "bin/mqnamesrv --listen"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q: %q", want, errb.String())
		}
	}
	errb.Reset()
	Main(context.Background(), []string{"brokerStatus", "-b", addr, "--timeout", "2s"}, &out, &errb)
	if !strings.Contains(errb.String(), "nothing listens at "+addr) || strings.Contains(errb.String(), "mqnamesrv --listen") {
		t.Errorf("broker address: %q", errb.String())
	}
}
