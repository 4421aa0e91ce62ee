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

	"rocketraft/peerauth"
)

// haAuthByACL reports whether the HA link proves the broker's ACL account.
func (b *Broker) haAuthByACL() bool { return b.acl != nil && b.cfg.AccessKey != "" }

// haKeys is what the HA server requires of a slave (nil: nothing).
func (b *Broker) haKeys() peerauth.KeyFunc {
	if b.haAuthByACL() {
		store := b.acl
		return func(id string) ([]byte, bool) {
			a := store.Current().Accounts[id]
			if a == nil || !a.Admin {
				return nil, false
			}
			return []byte(a.SecretKey), true
		}
	}
	if b.peerKey != nil {
		return peerauth.SharedKey(b.peerKey)
	}
	return nil
}

// haCredential is what this broker proves as a slave (nil: nothing).
func (b *Broker) haCredential() *peerauth.Credential {
	if b.haAuthByACL() {
		return &peerauth.Credential{Identity: b.cfg.AccessKey, Key: []byte(b.cfg.SecretKey)}
	}
	if b.peerKey != nil {
		return &peerauth.Credential{Identity: b.cfg.BrokerName + "/" + strconv.FormatInt(b.cfg.BrokerID, 10), Key: b.peerKey}
	}
	return nil
}

// peerSecurityWarnings lists the peer ports that listen beyond loopback without
// authentication.
func (b *Broker) peerSecurityWarnings() []string {
	var w []string
	if b.cfg.EnableDLegerCommitLog && b.peerKey == nil {
		if self, err := b.cfg.SelfPeer(); err == nil && !peerauth.LoopbackOnly(self.Addr) {
			w = append(w, fmt.Sprintf("the Raft port %s listens beyond loopback without peer authentication: anyone who reaches it can disrupt elections and stop writes; set peerSecretFile (docs/security.md)", self.Addr))
		}
	}
	servesHA := b.cfg.EnableDLegerCommitLog || b.cfg.IsMaster()
	if servesHA && b.haKeys() == nil && listenHost(b.cfg.BrokerIP2) == "" {
		addr := net.JoinHostPort("0.0.0.0", strconv.Itoa(b.cfg.HAListenPort))
		w = append(w, fmt.Sprintf("the HA port %s listens beyond loopback without peer authentication: anyone who reaches it can read the whole commitlog; set peerSecretFile, or aclEnable with the broker's accessKey (docs/security.md)", addr))
	}
	return w
}

// warnPeerSecurity logs each peer-security warning loudly (Start calls it).
func (b *Broker) warnPeerSecurity() {
	b.securityWarnings = b.peerSecurityWarnings()
	for _, w := range b.securityWarnings {
		b.logger.Warn("SECURITY: " + w)
	}
}
