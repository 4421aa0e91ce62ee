package broker

import (
	"strings"
	"testing"

	"rocketraft/config"
)

// TestPeerSecurityWarnings: a Raft or HA port beyond loopback without peer authentication is a
// warning; loopback, or a peer secret, is not.
func TestPeerSecurityWarnings(t *testing.T) {
	mk := func(ip, peers string, key []byte) *Broker {
		cfg := config.NewBroker()
		cfg.BrokerIP1, cfg.BrokerIP2 = ip, ip
		cfg.ListenPort = 10911
		cfg.Normalize()
		if peers != "" {
			cfg.EnableDLegerCommitLog, cfg.DLegerPeers, cfg.DLegerSelfID = true, peers, "n0"
		}
		return &Broker{cfg: cfg, peerKey: key}
	}
	if w := mk("127.0.0.1", "n0-127.0.0.1:20911;n1-127.0.0.1:20912", nil).peerSecurityWarnings(); len(w) != 0 {
		t.Fatalf("loopback: %q", w)
	}
	w := mk("10.0.0.5", "n0-10.0.0.5:20911;n1-10.0.0.6:20911", nil).peerSecurityWarnings()
	if len(w) != 2 || !strings.Contains(w[0], "Raft port 10.0.0.5:20911") || !strings.Contains(w[1], "HA port") {
		t.Fatalf("open DLedger node: %q", w)
	}
	if w := mk("10.0.0.5", "", nil).peerSecurityWarnings(); len(w) != 1 || !strings.Contains(w[0], "HA port") {
		t.Fatalf("open classic master: %q", w)
	}
	if w := mk("10.0.0.5", "n0-10.0.0.5:20911;n1-10.0.0.6:20911", []byte("0123456789abcdef")).peerSecurityWarnings(); len(w) != 0 {
		t.Fatalf("with a peer secret: %q", w)
	}
}
