// Package acl is RocketMQ 4.x "plain ACL" for rocketraft: accounts read from a
// plain_acl.yml-compatible file, the clients' request signatures, and the permission model.
//
// # File format (plain_acl.yml)
//
//	globalWhiteRemoteAddresses:      # addresses that skip every check (optional)
//	  - 10.10.103.*
//	  - 192.168.0.0/16
//	accounts:
//	  - accessKey: <at least 6 characters>
//	    secretKey: <at least 6 characters>
//	    whiteRemoteAddress: 10.0.0.5  # requests from here skip this account's signature check
//	    admin: false                  # admin accounts may send every request, admin codes included
//	    defaultTopicPerm: DENY        # DENY | PUB | SUB | PUB|SUB; absent = DENY
//	    defaultGroupPerm: SUB
//	    topicPerms: [topicA=DENY, topicB=PUB|SUB]
//	    groupPerms: [groupA=SUB]
//
// Address patterns: "*" (any), an exact IPv4/IPv6 address, a CIDR block, or an IPv4 pattern
// whose segments are a number, "*", a range "a-b", or (last segment only) a set "{a,b,c}".
//
// # Signature
//
// A signed request carries ext fields AccessKey and Signature (and optionally SecurityToken).
// Signature is base64(HMAC-SHA1(secretKey, content)), where content is the values of the ext
// fields sorted by key (AccessKey included, Signature excluded) concatenated as UTF-8, followed
// by the body bytes. Clients differ in what they put in the sorted set: the Go client leaves
// SecurityToken out although it sends it, older Java clients sign their header fields but not
// the _UNIQUE_KEY_QUERY flag added later. Verify accepts each of these variants.
//
// Unlike RocketMQ, malformed input is an error rather than a silent DENY: an unknown
// permission word, a bad address pattern, a duplicate or too short key, or the placeholder
// credentials of the shipped example file stop loading with a message naming the entry.
package acl
