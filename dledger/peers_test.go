package dledger

import (
	"errors"
	"net"
	"reflect"
	"testing"
)

func mustListen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func TestParsePeers(t *testing.T) {
	ok := []struct {
		in   string
		want []Peer
	}{
		{"n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913",
			[]Peer{{"n0", "127.0.0.1:40911"}, {"n1", "127.0.0.1:40912"}, {"n2", "127.0.0.1:40913"}}},
		{" n0-broker-a.example-dc:40911 ; n1-broker-b:40911; ",
			[]Peer{{"n0", "broker-a.example-dc:40911"}, {"n1", "broker-b:40911"}}},
		{"n0-[::1]:40911", []Peer{{"n0", "[::1]:40911"}}},
	}
	for _, c := range ok {
		got, err := ParsePeers(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParsePeers(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	bad := []string{
		"",                                  // no peers
		";;",                                // no peers
		"n0127.0.0.1:40911",                 // no '-'
		"-127.0.0.1:40911",                  // empty id
		"n0-127.0.0.1",                      // no port
		"n0-:40911",                         // no host
		"n0-host:0",                         // bad port
		"n0-host:99999",                     // bad port
		"n0-host:port",                      // bad port
		"n0-a:1;n0-b:2",                     // duplicate id
		"n0-a:1;n1-a:1",                     // duplicate address
		"n0-127.0.0.1:1;n1-127.0.0.1:1;n2-", // duplicate and empty
	}
	for _, in := range bad {
		var ce *ConfigError
		if got, err := ParsePeers(in); !errors.As(err, &ce) || ce.Key != "dLegerPeers" {
			t.Errorf("ParsePeers(%q) = %v, %v; want a dLegerPeers error", in, got, err)
		}
	}
}

func TestOpenValidates(t *testing.T) {
	peers := []Peer{{"n0", "127.0.0.1:1"}}
	cases := []struct {
		key string
		cfg Config
	}{
		{"dLegerSelfId", Config{Peers: peers, DataDir: t.TempDir()}},
		{"dLegerSelfId", Config{SelfID: "n1", Peers: peers, DataDir: t.TempDir()}},
		{"dLegerDataDir", Config{SelfID: "n0", Peers: peers}},
		{"dLegerPeers", Config{SelfID: "n0", DataDir: t.TempDir()}},
		{"dLegerLogStore", Config{SelfID: "n0", Peers: peers, DataDir: t.TempDir(), LogStore: "leveldb"}},
		{"dLegerLeaderLeaseTimeout", Config{SelfID: "n0", Peers: peers, DataDir: t.TempDir(), LeaderLeaseTimeout: DefaultHeartbeatTimeout * 2}},
	}
	for _, c := range cases {
		var ce *ConfigError
		if _, err := Open(c.cfg, &testFSM{}); !errors.As(err, &ce) || ce.Key != c.key {
			t.Errorf("Open(%+v) = %v, want error on %s", c.cfg, err, c.key)
		}
	}
}
