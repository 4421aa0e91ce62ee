package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "broker.properties")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestShippedExample loads config/broker.properties as shipped: no warnings (every key is
// known), no errors, and the values it sets are the ones written there.
func TestShippedExample(t *testing.T) {
	b, warnings, err := LoadBroker([]string{"-c", "broker.properties"})
	if err != nil {
		t.Fatalf("load shipped example: %v", err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings: %q", warnings)
	}
	if b.BrokerName != "broker-a" || b.StorePathRootDir != "/tmp/rocketraft/store" || b.DLegerSelfID != "n0" {
		t.Errorf("values not applied: %+v", b)
	}
	if b.HAListenPort != 10912 {
		t.Errorf("haListenPort = %d, want 10912 (listenPort+1)", b.HAListenPort)
	}
	peers, err := b.DLegerPeerList()
	if err != nil || len(peers) != 3 || peers[2] != (Peer{"n2", "127.0.0.1:20913"}) {
		t.Errorf("peers = %v, %v", peers, err)
	}
	// Every key of the struct appears in the example.
	data, _ := os.ReadFile("broker.properties")
	for _, k := range Keys(NewBroker()) {
		if !strings.Contains(string(data), "\n"+k+"=") {
			t.Errorf("example lacks key %s", k)
		}
	}
}

// TestDefaults checks NewBroker+Normalize against RocketMQ's defaults.
func TestDefaults(t *testing.T) {
	t.Setenv("NAMESRV_ADDR", "")
	t.Setenv("HOME", "/home/x")
	b, w, err := LoadBroker(nil)
	if err != nil || len(w) != 0 {
		t.Fatalf("LoadBroker(nil) = %v, %v", w, err)
	}
	host, _ := os.Hostname()
	want := map[string]any{
		"BrokerClusterName": "DefaultCluster", "BrokerName": host, "BrokerID": int64(0),
		"BrokerRole": "ASYNC_MASTER", "ListenPort": 10911, "HAListenPort": 10912,
		"BrokerIP1": "127.0.0.1", "BrokerIP2": "127.0.0.1",
		"StorePathRootDir": "/home/x/store", "StorePathCommitLog": "/home/x/store/commitlog",
		"MappedFileSizeCommitLog": int64(1073741824), "MapedFileSizeConsumeQueue": int64(6000000),
		"FlushDiskType": "ASYNC_FLUSH", "FlushIntervalCommitLog": 500, "SyncFlushTimeout": int64(5000),
		"AutoCreateTopicEnable": true, "AutoCreateSubscriptionGroup": true, "DefaultTopicQueueNums": 8,
		"MaxMessageSize": 4194304, "DeleteWhen": "04", "FileReservedTime": 72, "DiskMaxUsedSpaceRatio": 75,
		"MessageDelayLevel": DefaultMessageDelayLevel, "RegisterNameServerPeriod": 30000,
		"BrokerPermission": 6, "MessageIndexEnable": true, "MaxHashSlotNum": 5000000,
		"MaxIndexNum": 20000000, "LongPollingEnable": true, "ShortPollingTimeMills": int64(1000),
		"SlaveReadEnable": false, "TraceOn": true, "RegionID": "DefaultRegion",
		"ClientChannelExpiredTimeout": int64(120000), "FlushConsumerOffsetInterval": 5000,
		"EnableDLegerCommitLog": false, "HTTPPort": 0, "LogLevel": "info", "NamesrvAddr": "",
	}
	rv := reflect.ValueOf(b).Elem()
	for name, v := range want {
		if got := rv.FieldByName(name).Interface(); got != v {
			t.Errorf("%s = %#v, want %#v", name, got, v)
		}
	}
	levels, err := b.DelayLevels()
	if err != nil || len(levels) != 18 || levels[0] != time.Second || levels[17] != 2*time.Hour {
		t.Errorf("DelayLevels = %v, %v", levels, err)
	}

	n, _, err := LoadNamesrv(nil)
	if err != nil {
		t.Fatal(err)
	}
	if n.ListenAddr != "127.0.0.1:9876" || n.BrokerExpiry != 120000 || n.ScanNotActiveBrokerInterval != 5000 ||
		n.KvConfigPath != "/home/x/namesrv/kvConfig.json" || n.OrderMessageEnable || n.LogLevel != "info" {
		t.Errorf("namesrv defaults: %+v", n)
	}
}

// TestUnknownKeyWarns: an unknown key is a warning naming it, never an error.
func TestUnknownKeyWarns(t *testing.T) {
	p := writeFile(t, "brokerName=b1\nsendMessageThreadPoolNums=16\n")
	b, w, err := LoadBroker([]string{"-c", p})
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != 1 || !strings.Contains(w[0], `"sendMessageThreadPoolNums"`) {
		t.Errorf("warnings = %q", w)
	}
	if b.BrokerName != "b1" {
		t.Errorf("brokerName = %q", b.BrokerName)
	}
}

// TestBadValueNamesKey: a value that does not parse is an error naming key and value, from a
// file or from a flag.
func TestBadValueNamesKey(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-c", writeFile(t, "brokerId=x\n")}, `brokerId: invalid integer "x"`},
		{[]string{"-c", writeFile(t, "traceOn=yes\n")}, `traceOn: invalid boolean "yes"`},
		{[]string{"--listenPort", "abc"}, `listenPort: invalid integer "abc"`},
		{[]string{"--brokerRole", "MASTER"}, `brokerRole: must be one of`},
		{[]string{"--brokerRole", "SLAVE"}, `brokerId: a SLAVE needs brokerId > 0`},
		{[]string{"--diskMaxUsedSpaceRatio", "99"}, `diskMaxUsedSpaceRatio: must be within 10..95`},
		{[]string{"--flushDiskType", "SOMETIMES"}, `flushDiskType: must be`},
		{[]string{"--listenPort", "70000"}, `listenPort: must be within 0..65535`},
		{[]string{"--namesrvAddr", "nohostport"}, `namesrvAddr: bad address "nohostport"`},
		{[]string{"--messageDelayLevel", "1s 5x"}, `messageDelayLevel: bad level "5x"`},
		{[]string{"--deleteWhen", "25"}, `deleteWhen: bad hour "25"`},
		{[]string{"--brokerIP1", "::1"}, `brokerIP1: must be an IPv4 address`},
		{[]string{"--enableDLegerCommitLog", "--dLegerGroup", "g", "--dLegerPeers", "n0-127.0.0.1:1", "--dLegerSelfId", "n9"},
			`dLegerSelfId: "n9" is not an id in dLegerPeers`},
		{[]string{"extra"}, `unexpected argument "extra"`},
	}
	for _, c := range cases {
		_, _, err := LoadBroker(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("LoadBroker(%q) error = %v, want it to contain %q", c.args, err, c.want)
		}
	}
	var ke *KeyError
	if _, _, err := LoadBroker([]string{"--brokerRole", "X"}); !errors.As(err, &ke) || ke.Key != "brokerRole" {
		t.Errorf("error is not a *KeyError for brokerRole: %v", err)
	}
}

// TestFlagsOverrideFile: flags win over the file, derived values follow the final values, and
// -n is the short form of --namesrvAddr.
func TestFlagsOverrideFile(t *testing.T) {
	p := writeFile(t, "listenPort=20911\nstorePathRootDir=/file/root\nnamesrvAddr=1.1.1.1:9876\nautoCreateTopicEnable=true\n")
	b, _, err := LoadBroker([]string{"-c", p, "--listenPort", "30911", "--storePathRootDir=/tmp/x",
		"-n", "127.0.0.1:9876;127.0.0.1:9877", "--autoCreateTopicEnable=false", "--slaveReadEnable"})
	if err != nil {
		t.Fatal(err)
	}
	if b.ListenPort != 30911 || b.HAListenPort != 30912 {
		t.Errorf("listenPort/haListenPort = %d/%d", b.ListenPort, b.HAListenPort)
	}
	if b.StorePathRootDir != "/tmp/x" || b.StorePathCommitLog != "/tmp/x/commitlog" {
		t.Errorf("store paths = %q %q", b.StorePathRootDir, b.StorePathCommitLog)
	}
	if got := b.NamesrvAddrs(); !reflect.DeepEqual(got, []string{"127.0.0.1:9876", "127.0.0.1:9877"}) {
		t.Errorf("NamesrvAddrs = %q", got)
	}
	if b.AutoCreateTopicEnable || !b.SlaveReadEnable {
		t.Errorf("bools: autoCreateTopicEnable=%v slaveReadEnable=%v", b.AutoCreateTopicEnable, b.SlaveReadEnable)
	}

	n, _, err := LoadNamesrv([]string{"--listen", "127.0.0.1:19876", "--brokerExpiry=3000"})
	if err != nil || n.ListenAddr != "127.0.0.1:19876" || n.BrokerExpiry != 3000 {
		t.Errorf("namesrv flags: %+v %v", n, err)
	}
}

// TestNamesrvAddrs: ';'-separated list, blanks and empty entries dropped.
func TestNamesrvAddrs(t *testing.T) {
	b := NewBroker()
	b.NamesrvAddr = " 127.0.0.1:9876; ;10.0.0.2:9876;"
	if got := b.NamesrvAddrs(); !reflect.DeepEqual(got, []string{"127.0.0.1:9876", "10.0.0.2:9876"}) {
		t.Errorf("NamesrvAddrs = %q", got)
	}
	b.NamesrvAddr = ""
	if got := b.NamesrvAddrs(); len(got) != 0 {
		t.Errorf("empty NamesrvAddrs = %q", got)
	}
}

// TestAliasesAndNormalize: old key spellings map to the same field; masters get brokerId 0 with
// a warning; the consume-queue file size is rounded up to whole units.
func TestAliasesAndNormalize(t *testing.T) {
	p := writeFile(t, "mapedFileSizeCommitLog=8388608\nmappedFileSizeConsumeQueue=1001\nbrokerId=3\n")
	b, w, err := LoadBroker([]string{"-c", p})
	if err != nil {
		t.Fatal(err)
	}
	if b.MappedFileSizeCommitLog != 8<<20 || b.MapedFileSizeConsumeQueue != 1020 || b.BrokerID != 0 {
		t.Errorf("got %d %d %d", b.MappedFileSizeCommitLog, b.MapedFileSizeConsumeQueue, b.BrokerID)
	}
	if len(w) != 1 || !strings.HasPrefix(w[0], "brokerId:") {
		t.Errorf("warnings = %q", w)
	}
	if _, _, err := LoadBroker([]string{"--brokerRole", "SLAVE", "--brokerId", "1"}); err != nil {
		t.Errorf("slave with id 1: %v", err)
	}
}

// TestHelp returns ErrHelp and the usage lists generated flags.
func TestHelp(t *testing.T) {
	if _, _, err := LoadBroker([]string{"--help"}); !errors.Is(err, ErrHelp) {
		t.Errorf("err = %v, want ErrHelp", err)
	}
	u := BrokerUsage()
	for _, s := range []string{"-c, --config", "-n, --namesrvAddr", "--listenPort int", "--storePathRootDir string"} {
		if !strings.Contains(u, s) {
			t.Errorf("usage lacks %q:\n%s", s, u)
		}
	}
}

// TestPropertiesRoundTrip: the rendered effective configuration loads back to the same struct.
func TestPropertiesRoundTrip(t *testing.T) {
	b, _, err := LoadBroker([]string{"--listenPort", "1234", "--brokerName", "x y"})
	if err != nil {
		t.Fatal(err)
	}
	b2 := NewBroker()
	if w, err := ApplyProperties(b2, "rendered", []byte(Properties(b))); err != nil || len(w) != 0 {
		t.Fatalf("%v %v", w, err)
	}
	b2.Normalize()
	if !reflect.DeepEqual(b, b2) {
		t.Errorf("round trip differs:\n%+v\n%+v", b, b2)
	}
}

// GET_BROKER_CONFIG must never hand out the broker's secret key.
func TestRedactedPropertiesHidesSecrets(t *testing.T) {
	b := NewBroker()
	b.AccessKey = "rocketmq2"
	b.SecretKey = "topsecret"
	b.HTTPAuthToken = "httptoken"
	out := RedactedProperties(b)
	if strings.Contains(out, "topsecret") || strings.Contains(out, "httptoken") {
		t.Fatalf("secret leaked:\n%s", out)
	}
	for _, want := range []string{"secretKey=" + Redacted + "\n", "httpAuthToken=" + Redacted + "\n", "accessKey=rocketmq2\n", "brokerName=", "logFormat=text\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

// The HTTP port binds loopback unless told otherwise, and only to an IP address.
func TestHTTPBindAddress(t *testing.T) {
	b, _, err := LoadBroker(nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.HTTPBindAddress != "127.0.0.1" || b.EnablePprof || b.HTTPAuthToken != "" {
		t.Fatalf("defaults: httpBindAddress %q enablePprof %v httpAuthToken %q", b.HTTPBindAddress, b.EnablePprof, b.HTTPAuthToken)
	}
	for _, ok := range []string{"0.0.0.0", "::", "10.1.2.3", ""} {
		if _, _, err := LoadBroker([]string{"--httpBindAddress=" + ok}); err != nil {
			t.Errorf("httpBindAddress=%q: %v", ok, err)
		}
	}
	if _, _, err := LoadBroker([]string{"--httpBindAddress=example.com"}); err == nil || !strings.Contains(err.Error(), "httpBindAddress") {
		t.Errorf("httpBindAddress=example.com: err = %v, want one naming the key", err)
	}
	n, _, err := LoadNamesrv(nil)
	if err != nil {
		t.Fatal(err)
	}
	if n.HTTPBindAddress != "127.0.0.1" {
		t.Errorf("name server httpBindAddress default %q", n.HTTPBindAddress)
	}
	if _, _, err := LoadNamesrv([]string{"--httpBindAddress=nope"}); err == nil || !strings.Contains(err.Error(), "httpBindAddress") {
		t.Errorf("name server httpBindAddress=nope: err = %v", err)
	}
}

func TestLogFormatValidated(t *testing.T) {
	_, _, err := LoadBroker([]string{"--logFormat=xml"})
	if err == nil || !strings.Contains(err.Error(), "logFormat") {
		t.Fatalf("logFormat=xml: err = %v, want one naming logFormat", err)
	}
}

// TestPeerSecretKeys: peerSecret / peerSecretFile load a hex or raw secret of at least 16
// bytes; a short one, a missing file or both keys at once stop start-up naming peerSecret.
func TestPeerSecretKeys(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "peer.secret")
	if err := os.WriteFile(good, []byte("00112233445566778899aabbccddeeff\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		inline, file string
		ok           bool
	}{
		{"", "", true},
		{"", good, true},
		{"a raw secret of enough bytes", "", true},
		{"short", "", false},
		{"", filepath.Join(dir, "missing"), false},
		{"a raw secret of enough bytes", good, false},
	} {
		b := NewBroker()
		b.PeerSecret, b.PeerSecretFile = c.inline, c.file
		b.Normalize()
		err := b.Validate()
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), "peerSecret")) {
			t.Errorf("peerSecret=%q peerSecretFile=%q: %v, want ok %v", c.inline, c.file, err, c.ok)
		}
	}
}
