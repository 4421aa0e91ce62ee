package namesrv

import (
	"os"
	"path/filepath"
	"testing"

	"rocketraft/acl"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// With ACL on, registrations need an admin signature; route reads stay open.
func TestACLRegistration(t *testing.T) {
	p := filepath.Join(t.TempDir(), "acl.yml")
	yml := "accounts:\n  - {accessKey: brokerAdmin1, secretKey: brokerSecret1, admin: true}\n  - {accessKey: appUser01, secretKey: appSecret01}\n"
	if err := os.WriteFile(p, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := acl.OpenStore(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, Config{ACL: store})
	body := registerBody(topic("T", 4, 6))
	plain := newTestClient(t, s.Addr())
	expectCode(t, registerFakeBroker(plain, "rogue", "10.0.0.9:10911", 0, body), remoting.NoPermission)

	signer := func(ak, sk string) *testClient {
		c := remoting.NewClient(remoting.ClientConfig{BeforeRequest: func(r *remoting.Command) { acl.Sign(r.ExtFields, r.Body, ak, sk) }})
		t.Cleanup(func() { _ = c.Close() })
		return &testClient{t: t, c: c, addr: s.Addr()}
	}
	expectCode(t, registerFakeBroker(signer("appUser01", "appSecret01"), "rogue", "10.0.0.9:10911", 0, body), remoting.NoPermission)
	expectCode(t, registerFakeBroker(signer("brokerAdmin1", "wrongSecret"), "broker-a", "10.0.0.1:10911", 0, body), remoting.NoPermission)
	expectCode(t, registerFakeBroker(signer("brokerAdmin1", "brokerSecret1"), "broker-a", "10.0.0.1:10911", 0, body), remoting.Success)

	h := protocol.GetRouteInfoRequestHeader{Topic: "T"}
	expectCode(t, plain.call(remoting.GetRouteInfoByTopic, h.ToExt(), nil), remoting.Success)
	expectCode(t, plain.call(remoting.PutKVConfig, map[string]string{"namespace": "n", "key": "k", "value": "v"}, nil), remoting.NoPermission)
}
