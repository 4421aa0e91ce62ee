package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// keyedTest is a stand-in for a JSON-configured program's struct.
type keyedTest struct {
	Addr  string `prop:"namesrvAddr"`
	Port  int    `prop:"grpcServerPort"`
	On    bool   `prop:"aclEnable"`
	Plain string // not a key
}

func TestLoadJSON(t *testing.T) {
	file := JSONFile{Name: "pc", Usage: "JSON file"}
	path := filepath.Join(t.TempDir(), "rmq-proxy.json")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"namesrvAddr": "a:1", "grpcServerPort": 9000, "aclEnable": true}`)
	c := keyedTest{Port: 8081}
	// -pc with one dash (Apache's spelling); flags win over the file; -n is namesrvAddr.
	if err := LoadJSON("p", &c, file, map[string]string{"namesrvAddr": "n"}, []string{"-pc", path, "-n", "b:2"}); err != nil {
		t.Fatal(err)
	}
	if c.Addr != "b:2" || c.Port != 9000 || !c.On {
		t.Fatalf("got %+v", c)
	}
	c = keyedTest{}
	if err := LoadJSON("p", &c, file, nil, []string{"--grpcServerPort=7", "--pc=" + path}); err != nil || c.Port != 7 || c.Addr != "a:1" {
		t.Fatalf("got %+v %v", c, err)
	}
	for _, tc := range []struct {
		file string
		args []string
		key  string
	}{
		{`{"grpcServerPort": "x"}`, nil, "grpcServerPort"},
		{`{"remotingListenPort": 8080}`, nil, "remotingListenPort"},
		{`{"aclEnable": [1]}`, nil, "aclEnable"},
		{`{}`, []string{"--aclEnable=maybe"}, "aclEnable"},
	} {
		write(tc.file)
		err := LoadJSON("p", &keyedTest{}, file, nil, append([]string{"-pc", path}, tc.args...))
		var ke *KeyError
		if !errors.As(err, &ke) || ke.Key != tc.key || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s %v: %v, want an error naming %s", tc.file, tc.args, err, tc.key)
		}
	}
	if err := LoadJSON("p", &keyedTest{}, file, nil, []string{"--noSuchKey=1"}); err == nil || !strings.Contains(err.Error(), "noSuchKey") {
		t.Errorf("unknown flag: %v", err)
	}
	if u := JSONUsage("p", &keyedTest{Port: 8081}, file, nil); !strings.Contains(u, "--grpcServerPort") || !strings.Contains(u, "--pc") {
		t.Errorf("usage:\n%s", u)
	}
}

// TestBrokerEnableProxy: --enable-proxy alone turns local mode on, grpcServerPort defaults to
// 8081 and must not collide with the broker's own ports; local mode needs name servers.
func TestBrokerEnableProxy(t *testing.T) {
	b, _, err := LoadBroker([]string{"--enable-proxy", "-n", "127.0.0.1:9876"})
	if err != nil || !b.EnableProxy || b.GrpcServerPort != 8081 {
		t.Fatalf("got enableProxy=%v grpcServerPort=%d, %v", b != nil && b.EnableProxy, b.GrpcServerPort, err)
	}
	if _, _, err := LoadBroker([]string{"--enable-proxy", "-n", "127.0.0.1:9876", "--grpcServerPort=10911"}); err == nil || !strings.Contains(err.Error(), "grpcServerPort") {
		t.Fatalf("grpcServerPort equal to listenPort: %v", err)
	}
	if _, _, err := LoadBroker([]string{"--enableProxy=true", "--namesrvAddr="}); err == nil || !strings.Contains(err.Error(), "namesrvAddr") {
		t.Fatalf("local mode without name servers: %v", err)
	}
	if !strings.Contains(BrokerUsage(), "--enable-proxy") {
		t.Fatal("the usage does not show --enable-proxy")
	}
}
