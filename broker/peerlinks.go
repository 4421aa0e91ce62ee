package broker

// Authentication of the links between nodes (package peerauth; docs/security.md "Peer links").
//
//   - Raft (DLedger mode): the group secret (peerSecret / peerSecretFile), proved on every
//     connection either way; dledger.Config.PeerSecret (raftgroup.go).
//   - HA (classic master and slave, and a DLedger leader serving legacy slaves): with aclEnable
//     and the broker's own account (accessKey/secretKey), a slave proves that account and the
//     master requires an admin account of its ACL file with that secret (RocketMQ's ACL is
//     HMAC as well, and the broker account is already the identity brokers use towards each
//     other); otherwise the group secret; with neither, no authentication (RocketMQ's
//     behaviour).
//
// Without authentication a Raft or HA port that listens beyond loopback is a warning, logged at
// start and listed in /status ("security_warnings").

import (
	"fmt"
	"net"
	"strconv"

	"rocketraft/acl"
	"rocketraft/config"
	"rocketraft/peerauth"
)

// peerPolicy is what decides the HA link's authentication: the ACL store (nil when aclEnable is
// off), the broker's own account, the group secret and the identity a slave proves with it.
type peerPolicy struct {
	acl                  *acl.Store
	accessKey, secretKey string
	peerKey              []byte
	identity             string // brokerName/brokerId
}

// peerPolicy is this broker's peer-link policy.
func (b *Broker) peerPolicy() peerPolicy {
	return peerPolicy{acl: b.acl, accessKey: b.cfg.AccessKey, secretKey: b.cfg.SecretKey, peerKey: b.peerKey,
		identity: b.cfg.BrokerName + "/" + strconv.FormatInt(b.cfg.BrokerID, 10)}
}

// haAuthByACL reports whether the HA link proves the broker's ACL account.
func (p peerPolicy) haAuthByACL() bool { return p.acl != nil && p.accessKey != "" }

// haKeys is what the HA server requires of a slave (nil: nothing).
func (p peerPolicy) haKeys() peerauth.KeyFunc {
	if p.haAuthByACL() {
		store := p.acl
		return func(id string) ([]byte, bool) {
			a := store.Current().Accounts[id]
			if a == nil || !a.Admin {
				return nil, false
			}
			return []byte(a.SecretKey), true
		}
	}
	if p.peerKey != nil {
		return peerauth.SharedKey(p.peerKey)
	}
	return nil
}

// haCredential is what this broker proves as a slave (nil: nothing).
func (p peerPolicy) haCredential() *peerauth.Credential {
	if p.haAuthByACL() {
		return &peerauth.Credential{Identity: p.accessKey, Key: []byte(p.secretKey)}
	}
	if p.peerKey != nil {
		return &peerauth.Credential{Identity: p.identity, Key: p.peerKey}
	}
	return nil
}

// peerSecurityWarnings lists the peer ports of cfg that listen beyond loopback without
// authentication under policy p, for a node whose part in HA replication is part (a Raft member
// serves HA while it leads, and has a Raft port).
func peerSecurityWarnings(cfg *config.Broker, p peerPolicy, part haPart) []string {
	var w []string
	if part == haWhileLeader && p.peerKey == nil {
		if self, err := cfg.SelfPeer(); err == nil && !peerauth.LoopbackOnly(self.Addr) {
			w = append(w, fmt.Sprintf("the Raft port %s listens beyond loopback without peer authentication: anyone who reaches it can disrupt elections and stop writes; set peerSecretFile (docs/security.md)", self.Addr))
		}
	}
	if part != haSlave && p.haKeys() == nil && listenHost(cfg.BrokerIP2) == "" {
		addr := net.JoinHostPort("0.0.0.0", strconv.Itoa(cfg.HAListenPort))
		w = append(w, fmt.Sprintf("the HA port %s listens beyond loopback without peer authentication: anyone who reaches it can read the whole commitlog; set peerSecretFile, or aclEnable with the broker's accessKey (docs/security.md)", addr))
	}
	return w
}

// warnPeerSecurity logs each peer-security warning loudly (Start calls it).
func (b *Broker) warnPeerSecurity() {
	b.securityWarnings = peerSecurityWarnings(b.cfg, b.peerPolicy(), b.place.haPart())
	for _, w := range b.securityWarnings {
		b.logger.Warn("SECURITY: " + w)
	}
}
