package broker

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"rocketraft/config"
	"rocketraft/remoting"
)

// aclAccounts writes an accounts file with an admin account for the broker and a plain user.
func aclAccounts(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "acl.yml")
	yml := "accounts:\n  - {accessKey: brokerAK, secretKey: brokerSK1, admin: true}\n  - {accessKey: userAK12, secretKey: userSK12}\n"
	if err := os.WriteFile(p, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// aclConfig is a broker configuration with ACL on the accounts file, signing with ak/sk.
func aclConfig(file, ak, sk string) *config.Broker {
	cfg := config.NewBroker()
	cfg.AclEnable, cfg.AclConfigFile, cfg.AccessKey, cfg.SecretKey = true, file, ak, sk
	return cfg
}

// The broker's own account must be an admin account of the file with the same secret key.
func TestOpenACLGateChecksOwnAccount(t *testing.T) {
	file := aclAccounts(t)
	for _, c := range []struct {
		name, ak, sk, err string
	}{
		{"admin", "brokerAK", "brokerSK1", ""},
		{"no account of its own", "", "", ""},
		{"unknown", "ghostAK1", "x", "is not an account"},
		{"wrong secret", "brokerAK", "other", "secretKey differs"},
		{"not admin", "userAK12", "userSK12", "must be an admin account"},
	} {
		g, err := openACLGate(aclConfig(file, c.ak, c.sk), hclog.NewNullLogger())
		switch {
		case c.err == "" && (err != nil || g.store == nil):
			t.Errorf("%s: %v (store %v)", c.name, err, g != nil && g.store != nil)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want %q", c.name, err, c.err)
		}
	}
	if _, err := openACLGate(aclConfig(filepath.Join(t.TempDir(), "missing.yml"), "", ""), hclog.NewNullLogger()); err == nil {
		t.Error("a missing accounts file opened")
	}
}

// With ACL off the gate has no store, lets everything through and signs nothing without an
// account.
func TestACLGateOff(t *testing.T) {
	g, err := openACLGate(config.NewBroker(), hclog.NewNullLogger())
	if err != nil || g.store != nil {
		t.Fatalf("ACL off: %v, store %v", err, g.store)
	}
	if r := g.check(nil, remoting.NewRequest(remoting.UpdateAndCreateTopic, nil, nil)); r != nil {
		t.Fatalf("ACL off refused: %d %q", r.Code, r.Remark)
	}
	if g.outgoingHook() != nil {
		t.Fatal("a broker without an account signs its requests")
	}
}

// Signed requests pass according to the account; unsigned ones, admin codes from a user and
// forwarding fields from a user are refused with NO_PERMISSION, and only the refusals log.
func TestACLGateDecides(t *testing.T) {
	file := aclAccounts(t)
	var logs bytes.Buffer
	g, err := openACLGate(aclConfig(file, "brokerAK", "brokerSK1"), hclog.New(&hclog.LoggerOptions{Output: &logs}))
	if err != nil {
		t.Fatal(err)
	}
	user := &aclGate{cfg: aclConfig(file, "userAK12", "userSK12")} // a client signing as the user
	signed := func(by *aclGate, code int32, ext map[string]string) *remoting.Command {
		req := remoting.NewRequest(code, ext, nil)
		if by != nil {
			by.outgoingHook()(req)
		}
		return req
	}
	for _, c := range []struct {
		name  string
		req   *remoting.Command
		allow bool
	}{
		{"admin creates a topic", signed(g, remoting.UpdateAndCreateTopic, map[string]string{"topic": "T"}), true},
		{"user heartbeats", signed(user, remoting.HeartBeat, nil), true},
		{"user creates a topic", signed(user, remoting.UpdateAndCreateTopic, map[string]string{"topic": "T"}), false},
		{"unsigned heartbeat", signed(nil, remoting.HeartBeat, nil), false},
		{"user claims a forward", signed(user, remoting.HeartBeat, map[string]string{extForwarded: "1"}), false},
		{"user claims a born host", signed(user, remoting.HeartBeat, map[string]string{extBornHost: "10.0.0.9:1"}), false},
		{"admin forwards", signed(g, remoting.HeartBeat, map[string]string{extForwarded: "1", extBornHost: "10.0.0.9:1"}), true},
	} {
		logs.Reset()
		r := g.decide("10.1.1.1:5000", c.req)
		if c.allow {
			if r != nil {
				t.Errorf("%s: refused %d %q", c.name, r.Code, r.Remark)
			}
			if logs.Len() != 0 {
				t.Errorf("%s: an allowed request logged %s", c.name, logs.String())
			}
			continue
		}
		if r == nil || r.Code != remoting.NoPermission {
			t.Errorf("%s: answer %+v, want NO_PERMISSION", c.name, r)
			continue
		}
		if !strings.Contains(logs.String(), "request refused by ACL") {
			t.Errorf("%s: refusal not logged: %s", c.name, logs.String())
		}
	}
}

// The outgoing hook signs with the broker's account, creating the fields when the request has
// none.
func TestACLGateSigns(t *testing.T) {
	g := &aclGate{cfg: aclConfig("", "brokerAK", "brokerSK1")}
	req := &remoting.Command{Code: remoting.RegisterBroker, Body: []byte("{}")}
	g.outgoingHook()(req)
	if req.ExtFields["AccessKey"] != "brokerAK" || req.ExtFields["Signature"] == "" {
		t.Fatalf("signed fields %v", req.ExtFields)
	}
	again := &remoting.Command{Code: remoting.RegisterBroker, Body: []byte("{}")}
	g.signRequest(again)
	if again.ExtFields["Signature"] != req.ExtFields["Signature"] {
		t.Fatal("the same request signed twice differs")
	}
}
