package broker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rocketraft/acl"
	"rocketraft/config"
)

// TestPeerSecurityWarnings: a Raft or HA port beyond loopback without peer authentication is a
// warning; loopback, or a peer secret, is not.
func TestPeerSecurityWarnings(t *testing.T) {
	mk := func(ip, peers string) *config.Broker {
		cfg := config.NewBroker()
		cfg.BrokerIP1, cfg.BrokerIP2 = ip, ip
		cfg.ListenPort = 10911
		cfg.Normalize()
		if peers != "" {
			cfg.EnableDLegerCommitLog, cfg.DLegerPeers, cfg.DLegerSelfID = true, peers, "n0"
		}
		return cfg
	}
	secret := peerPolicy{peerKey: []byte("0123456789abcdef")}
	if w := warningsFor(mk("127.0.0.1", "n0-127.0.0.1:20911;n1-127.0.0.1:20912"), peerPolicy{}); len(w) != 0 {
		t.Fatalf("loopback: %q", w)
	}
	w := warningsFor(mk("10.0.0.5", "n0-10.0.0.5:20911;n1-10.0.0.6:20911"), peerPolicy{})
	if len(w) != 2 || !strings.Contains(w[0], "Raft port 10.0.0.5:20911") || !strings.Contains(w[1], "HA port") {
		t.Fatalf("open DLedger node: %q", w)
	}
	if w := warningsFor(mk("10.0.0.5", ""), peerPolicy{}); len(w) != 1 || !strings.Contains(w[0], "HA port") {
		t.Fatalf("open classic master: %q", w)
	}
	if w := warningsFor(mk("10.0.0.5", "n0-10.0.0.5:20911;n1-10.0.0.6:20911"), secret); len(w) != 0 {
		t.Fatalf("with a peer secret: %q", w)
	}
	slave := mk("10.0.0.5", "")
	slave.BrokerRole, slave.BrokerID = config.RoleSlave, 1
	if w := warningsFor(slave, peerPolicy{}); len(w) != 0 {
		t.Fatalf("a classic slave serves no HA port: %q", w)
	}
}

// TestPeerPolicyHA: with aclEnable and the broker's account the HA link proves that account and
// requires an admin account of the ACL file; else the group secret under brokerName/brokerId;
// with neither, nothing.
func TestPeerPolicyHA(t *testing.T) {
	if k, c := (peerPolicy{}).haKeys(), (peerPolicy{}).haCredential(); k != nil || c != nil {
		t.Fatal("no secret, no ACL: no authentication")
	}
	shared := peerPolicy{peerKey: []byte("0123456789abcdef"), identity: "b/1"}
	if c := shared.haCredential(); c == nil || c.Identity != "b/1" || string(c.Key) != "0123456789abcdef" {
		t.Fatalf("group secret credential %+v", c)
	}
	if key, ok := shared.haKeys()("anyone"); !ok || string(key) != "0123456789abcdef" {
		t.Fatal("group secret keys")
	}
	p := filepath.Join(t.TempDir(), "acl.yml")
	yml := "accounts:\n  - {accessKey: brokerAK, secretKey: brokerSK1, admin: true}\n  - {accessKey: userAK12, secretKey: userSK12}\n"
	if err := os.WriteFile(p, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := acl.OpenStore(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	byACL := peerPolicy{acl: store, accessKey: "brokerAK", secretKey: "brokerSK1", peerKey: []byte("0123456789abcdef"), identity: "b/1"}
	if c := byACL.haCredential(); c == nil || c.Identity != "brokerAK" || string(c.Key) != "brokerSK1" {
		t.Fatalf("ACL credential %+v", c)
	}
	keys := byACL.haKeys()
	if key, ok := keys("brokerAK"); !ok || string(key) != "brokerSK1" {
		t.Fatal("the admin account is accepted with its secret")
	}
	if _, ok := keys("userAK12"); ok {
		t.Fatal("a non-admin account is refused")
	}
	if _, ok := keys("nobody"); ok {
		t.Fatal("an unknown account is refused")
	}
	noAccount := peerPolicy{acl: store, peerKey: []byte("0123456789abcdef"), identity: "b/1"}
	if c := noAccount.haCredential(); c == nil || c.Identity != "b/1" {
		t.Fatalf("ACL without the broker's account falls back to the group secret: %+v", c)
	}
}

// warningsFor is peerSecurityWarnings for a node configured by cfg, in the place New gives it.
func warningsFor(cfg *config.Broker, p peerPolicy) []string {
	return peerSecurityWarnings(cfg, p, newPlace(cfg).ha)
}
