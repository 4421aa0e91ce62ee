// Package peerauth proves group membership on the links between nodes (Raft, classic HA) before
// either side speaks its own protocol: a mutual HMAC-SHA256 challenge-response over a secret the
// members share (peerSecret / peerSecretFile, or the broker's ACL account on the HA link).
//
// Why HMAC and not mutual TLS: one secret per group in configuration, nothing that expires and no
// CA to run; the Raft byte stream after the handshake is hashicorp/raft's own wire format, so the
// replication hot path pays nothing per byte; and the same handshake serves the HA stream, whose
// key can be the ACL account's secret (RocketMQ's ACL is HMAC as well). The limit: it
// authenticates the connection, it does not encrypt or integrity-protect what follows, so peers
// belong on a private network or a tunnel (an on-path attacker who can rewrite TCP segments
// could still hijack an authenticated connection).
//
// # Wire format (all integers big-endian)
//
//	client → server  hello      "RRPA" | version 1 | purpose len (1) | purpose |
//	                            identity len (2, ≤ 256) | identity | client nonce (32)
//	server → client  challenge  "RRPA" | version 1 | server nonce (32) |
//	                            server proof (32) = HMAC(key, transcript("server"))
//	client → server  proof      client proof (32) = HMAC(key, transcript("client"))
//	server → client  verdict    1 byte: 0 accepted, 1 refused (then the server closes)
//
// transcript(direction) is a length-prefixed encoding of a fixed label, the direction, the
// purpose ("raft", "ha"), the claimed identity and both nonces. Both nonces are fresh per
// connection, so a recorded proof is useless later (replay); the direction is bound in, so the
// server's proof cannot be sent back as a client's (reflection); the purpose is bound in, so an
// HA handshake cannot open a Raft connection. Proofs are compared in constant time. The whole
// handshake runs under one deadline (DefaultTimeout) and every length read is capped, so a
// silent or hostile peer costs one goroutine for a few seconds and a few hundred bytes. An
// unknown identity gets a challenge under a random key (indistinguishable from a wrong
// secret), so the handshake does not reveal which identities exist.
package peerauth
