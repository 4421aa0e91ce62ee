package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"sort"
)

// Ext field names of a signed request (RocketMQ's SessionCredentials).
const (
	ExtAccessKey     = "AccessKey"
	ExtSignature     = "Signature"
	ExtSecurityToken = "SecurityToken"
	// extUniqueKeyQuery is the flag Java's queryMessage adds; older Java clients add it after
	// signing, newer ones sign it, so verification tries both.
	extUniqueKeyQuery = "_UNIQUE_KEY_QUERY"
)

// Signature computes base64(HMAC-SHA1(secret, content)) where content is the values of ext
// sorted by key, leaving out Signature and every key in skip, followed by body.
func Signature(ext map[string]string, body []byte, secret string, skip ...string) string {
	keys := make([]string, 0, len(ext))
	for k := range ext {
		if k == ExtSignature || contains(skip, k) {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	mac := hmac.New(sha1.New, []byte(secret))
	for _, k := range keys {
		mac.Write([]byte(ext[k]))
	}
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Sign adds AccessKey and Signature to ext (a map the caller owns) the way the Java client
// does: every ext field is signed, AccessKey included. The broker uses it for its own
// requests to name servers and to its Raft leader.
func Sign(ext map[string]string, body []byte, accessKey, secretKey string) {
	delete(ext, ExtSignature)
	delete(ext, ExtSecurityToken)
	ext[ExtAccessKey] = accessKey
	ext[ExtSignature] = Signature(ext, body, secretKey)
}

// VerifySignature reports whether ext carries a valid signature by secret over ext and body,
// accepting the variants of the official clients: all fields (Java 4.9+/5.x, and the Go
// client without a security token), all but SecurityToken (Go client with a token), and all
// but _UNIQUE_KEY_QUERY (older Java clients, and what RocketMQ's broker computes).
func VerifySignature(ext map[string]string, body []byte, secret string) bool {
	got := ext[ExtSignature]
	if got == "" {
		return false
	}
	try := func(skip ...string) bool {
		want := Signature(ext, body, secret, skip...)
		return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
	}
	if try() {
		return true
	}
	_, tok := ext[ExtSecurityToken]
	_, uniq := ext[extUniqueKeyQuery]
	switch {
	case tok && uniq:
		return try(ExtSecurityToken) || try(extUniqueKeyQuery) || try(ExtSecurityToken, extUniqueKeyQuery)
	case tok:
		return try(ExtSecurityToken)
	case uniq:
		return try(extUniqueKeyQuery)
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
