package broker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"rocketraft/config"
	"rocketraft/remoting"
)

// configFixture is a configHandlers over a config with brokerPermission 6, counting immediate
// registrations.
type configFixture struct {
	h   *configHandlers
	reg *counter
}

func newConfigFixture() *configFixture {
	f := &configFixture{reg: &counter{}}
	cfg := config.NewBroker()
	cfg.BrokerPermission, cfg.SecretKey = 6, "s3cret"
	f.h = &configHandlers{cfg: cfg, rt: &runtimeConfig{}, logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Info}),
		brokerID: func() int64 { return 3 }, triggerRegisterNow: f.reg.inc}
	return f
}

func (f *configFixture) update(body string) *remoting.Command {
	return f.h.handleUpdateBrokerConfig(nil, remoting.NewRequest(remoting.UpdateBrokerConfig, nil, []byte(body)))
}

// UPDATE_BROKER_CONFIG changes only the allow-listed keys, all or nothing.
func TestUpdateBrokerConfigAllowList(t *testing.T) {
	f := newConfigFixture()
	perm := func() int32 { return f.h.rt.permission(f.h.cfg) }
	if r := f.update("aclEnable=false\n"); r.Code != remoting.NoPermission {
		t.Fatalf("aclEnable: %d %q", r.Code, r.Remark)
	}
	// All or nothing: one refused key stops the allowed one too.
	if r := f.update("brokerPermission=4\nstorePathRootDir=/x\n"); r.Code != remoting.NoPermission || perm() != 6 {
		t.Fatalf("mixed: %d %q, perm %d", r.Code, r.Remark, perm())
	}
	if r := f.update("brokerPermission=99\n"); r.Code != remoting.InvalidParameter {
		t.Fatalf("bad value: %d %q", r.Code, r.Remark)
	}
	if r := f.update(""); r.Code != remoting.InvalidParameter {
		t.Fatalf("empty: %d %q", r.Code, r.Remark)
	}
	if f.reg.n != 0 {
		t.Fatal("a refused change registered")
	}
	if r := f.update("brokerPermission=4\nslaveReadEnable=true\nlogLevel=warn\n"); r.Code != remoting.Success {
		t.Fatalf("allowed: %d %q", r.Code, r.Remark)
	}
	if perm() != 4 || !f.h.rt.slaveReadEnabled(f.h.cfg) || f.h.logger.GetLevel() != hclog.Warn || f.reg.n != 1 {
		t.Fatalf("not applied: perm %d slaveRead %v level %v registrations %d", perm(), f.h.rt.slaveReadEnabled(f.h.cfg), f.h.logger.GetLevel(), f.reg.n)
	}
	for _, k := range RuntimeConfigKeys {
		if _, ok := runtimeKeys[k]; !ok {
			t.Errorf("RuntimeConfigKeys lists %s without a parser", k)
		}
	}
	if len(RuntimeConfigKeys) != len(runtimeKeys) {
		t.Errorf("RuntimeConfigKeys and runtimeKeys differ")
	}
}

// setterLog is a runtimeSetter that records what was set.
type setterLog []string

func (s *setterLog) setPermission(perm int32) { *s = append(*s, fmt.Sprintf("perm=%d", perm)) }

func (s *setterLog) setSlaveRead(on bool) {
	if on {
		*s = append(*s, "slaveRead=on")
	} else {
		*s = append(*s, "slaveRead=off")
	}
}

func (s *setterLog) setLogLevel(lvl hclog.Level) { *s = append(*s, "level="+lvl.String()) }

// Each key's parser validates its value and, only when applied, sets exactly its own setting.
func TestRuntimeKeyParsers(t *testing.T) {
	cases := []struct {
		key, value string
		want       string // the setter call, or "" for a refusal
	}{
		{"brokerPermission", " 4 ", "perm=4"},
		{"brokerPermission", "7", "perm=7"},
		{"brokerPermission", "16", ""},
		{"brokerPermission", "-2", ""},
		{"brokerPermission", "rw", ""},
		{"slaveReadEnable", "true", "slaveRead=on"},
		{"slaveReadEnable", "FALSE", "slaveRead=off"},
		{"slaveReadEnable", "yes", ""},
		{"logLevel", "DEBUG", "level=debug"},
		{"logLevel", "error", "level=error"},
		{"logLevel", "trace", ""},
	}
	for _, c := range cases {
		var log setterLog
		apply, err := runtimeKeys[c.key].parse(&log, c.value)
		if c.want == "" {
			if err == nil || !strings.Contains(err.Error(), c.key) {
				t.Errorf("%s=%q: error %v, want one naming the key", c.key, c.value, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s=%q: %v", c.key, c.value, err)
			continue
		}
		if len(log) != 0 {
			t.Errorf("%s=%q: parsing set %v before apply", c.key, c.value, log)
		}
		apply()
		if len(log) != 1 || log[0] != c.want {
			t.Errorf("%s=%q: applied %v, want %s", c.key, c.value, log, c.want)
		}
	}
}

// runtimeConfig's zero value reads the file's settings; a set value wins over them.
func TestRuntimeConfigOverrides(t *testing.T) {
	cfg := &config.Broker{BrokerPermission: 6, SlaveReadEnable: true}
	var rt runtimeConfig
	if rt.permission(cfg) != 6 || !rt.slaveReadEnabled(cfg) {
		t.Fatalf("zero value: perm %d slaveRead %v", rt.permission(cfg), rt.slaveReadEnabled(cfg))
	}
	rt.setPermission(0)
	rt.setSlaveRead(false)
	if rt.permission(cfg) != 0 || rt.slaveReadEnabled(cfg) {
		t.Fatalf("set: perm %d slaveRead %v", rt.permission(cfg), rt.slaveReadEnabled(cfg))
	}
	rt.setSlaveRead(true)
	if !rt.slaveReadEnabled(&config.Broker{}) {
		t.Fatal("slaveRead set on lost to the file's false")
	}
}

// GET_BROKER_CONFIG shows the runtime values, redacts secrets and names the broker id.
func TestGetBrokerConfig(t *testing.T) {
	f := newConfigFixture()
	if r := f.update("brokerPermission=4\nlogLevel=error\n"); r.Code != remoting.Success {
		t.Fatalf("update: %d %q", r.Code, r.Remark)
	}
	resp := f.h.handleGetBrokerConfig(nil, remoting.NewRequest(remoting.GetBrokerConfig, nil, nil))
	body := string(resp.Body)
	if resp.Code != remoting.Success || resp.ExtFields["brokerId"] != "3" {
		t.Fatalf("answer %d, brokerId %q", resp.Code, resp.ExtFields["brokerId"])
	}
	for _, want := range []string{"brokerPermission=4\n", "logLevel=error\n", "secretKey=" + config.Redacted + "\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("body lacks %q", want)
		}
	}
	if strings.Contains(body, "s3cret") {
		t.Error("the secret key left the process")
	}
	if f.h.cfg.BrokerPermission != 6 {
		t.Error("GET_BROKER_CONFIG changed the file's config")
	}
}
