package integration

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestMqadminOpsCommands drives the operations commands against a live broker: getBrokerConfig
// (GET_BROKER_CONFIG, secrets redacted), updateBrokerConfig (an allow-listed key is applied and
// shows in getBrokerConfig; another key is refused with the broker's remark), clusterRT (RT rows
// per master), and wipeWritePerm/addWritePerm (the name server's topic counts).
func TestMqadminOpsCommands(t *testing.T) {
	t.Parallel()
	c := startCluster(t, withProp("accessKey", "opsKey"), withProp("secretKey", "opsVerySecret"))

	out := runAdmin(t, c, "getBrokerConfig", "-b", c.b.addr)
	for _, want := range []string{"============" + c.b.addr + "============", "brokerName", "=  " + c.b.name + "\n", "secretKey", "=  ******\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("getBrokerConfig lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "opsVerySecret") {
		t.Fatalf("getBrokerConfig leaked the secret key:\n%s", out)
	}
	var entries []struct{ Key, Value string }
	if err := json.Unmarshal([]byte(runAdmin(t, c, "getBrokerConfig", "-c", "DefaultCluster", "-o", "json")), &[]any{}); err != nil {
		t.Fatalf("getBrokerConfig -c -o json is not JSON: %v", err)
	}
	if err := json.Unmarshal([]byte(runAdmin(t, c, "getBrokerConfig", "-b", c.b.addr, "-o", "json")), &entries); err != nil || len(entries) < 50 {
		t.Fatalf("getBrokerConfig -o json: %d entries, %v", len(entries), err)
	}

	out = runAdmin(t, c, "updateBrokerConfig", "-b", c.b.addr, "-k", "slaveReadEnable", "-v", "true")
	if !strings.Contains(out, "update broker config success, "+c.b.addr) {
		t.Fatalf("updateBrokerConfig:\n%s", out)
	}
	if out := runAdmin(t, c, "getBrokerConfig", "-b", c.b.addr); !regexp.MustCompile(`(?m)^slaveReadEnable\s+=  true$`).MatchString(out) {
		t.Fatalf("slaveReadEnable not shown as changed:\n%s", out)
	}
	var errOut strings.Builder
	out, code := runAdminCode(c, &errOut, "updateBrokerConfig", "-c", "DefaultCluster", "-k", "listenPort", "-v", "1")
	if code != 1 || !strings.Contains(out, "update broker config failed, "+c.b.addr) || !strings.Contains(out, "code 16") ||
		!strings.Contains(out, "listenPort cannot be changed over the wire") {
		t.Fatalf("updateBrokerConfig of listenPort: exit %d\n%s\n%s", code, out, errOut.String())
	}

	out = runAdmin(t, c, "clusterRT", "-a", "5", "-s", "64")
	if !regexp.MustCompile(`(?m)^#Cluster Name\s+#Broker Name\s+#RT\s+#successCount\s+#failCount$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^DefaultCluster\s+`+regexp.QuoteMeta(c.b.name)+`\s+\d+\.\d\d\s+5\s+0\s*$`).MatchString(out) {
		t.Fatalf("clusterRT:\n%s", out)
	}
	out = runAdmin(t, c, "clusterRT", "-a", "2", "-p", "-m", "roomA")
	if !regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\|roomA\|DefaultCluster\|` + regexp.QuoteMeta(c.b.name) + `\|\d+\.\d\d$`).MatchString(out) {
		t.Fatalf("clusterRT -p:\n%s", out)
	}

	topic := uniq("OpsPerm")
	runAdmin(t, c, "updateTopic", "-b", c.b.addr, "-t", topic)
	waitTopicRoute(t, c, topic)
	out = runAdmin(t, c, "wipeWritePerm", "-b", c.b.name)
	m := regexp.MustCompile(`wipe write perm of broker\[` + regexp.QuoteMeta(c.b.name) + `\] in name server\[` + regexp.QuoteMeta(c.ns.addr) + `\] OK, (\d+)\n`).FindStringSubmatch(out)
	if m == nil || m[1] == "0" {
		t.Fatalf("wipeWritePerm:\n%s", out)
	}
	out = runAdmin(t, c, "addWritePerm", "-b", c.b.name)
	if !regexp.MustCompile(`add write perm of broker\[` + regexp.QuoteMeta(c.b.name) + `\] in name server\[` + regexp.QuoteMeta(c.ns.addr) + `\] OK, \d+\n`).MatchString(out) {
		t.Fatalf("addWritePerm:\n%s", out)
	}
}

// TestBrokerJSONLogsAndBanner: logFormat=json makes every log line a JSON object with a level;
// the start-up banner names the address, role, brokerId and data directories; SIGTERM exits 0
// with a shutdown line.
func TestBrokerJSONLogsAndBanner(t *testing.T) {
	t.Parallel()
	c := startCluster(t, withProp("logFormat", "json"))
	if err := c.b.stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.b.proc.exitErr; err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	logText := tail(c.b.proc.logPath, 1<<20)
	var jsonLines int
	var sawStarted bool
	for _, line := range strings.Split(logText, "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON log line: %q: %v", line, err)
		}
		if rec["@level"] == nil || rec["@timestamp"] == nil {
			t.Fatalf("JSON log line lacks @level/@timestamp: %q", line)
		}
		sawStarted = sawStarted || rec["@message"] == "broker started"
		jsonLines++
	}
	if jsonLines < 3 || !sawStarted || strings.Contains(logText, "[INFO]") {
		t.Fatalf("%d JSON lines, broker started=%v; log:\n%s", jsonLines, sawStarted, logText)
	}
	for _, want := range []string{"boot success", c.b.addr, "store=" + c.b.storeRoot, "role=ASYNC_MASTER brokerId=0", "commitlog=", "logFormat=json"} {
		if !strings.Contains(logText, want) {
			t.Errorf("banner lacks %q:\n%s", want, logText)
		}
	}
}
