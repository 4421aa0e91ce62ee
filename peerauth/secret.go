package peerauth

import (
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strings"
)

// MinSecret is the shortest accepted secret, in bytes after decoding.
const MinSecret = 16

// ParseSecret turns a configured secret into key bytes: an even-length all-hex string (what
// `openssl rand -hex 32` prints) is decoded, anything else is taken as raw bytes. Surrounding
// blanks are trimmed. It must be at least MinSecret bytes.
func ParseSecret(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	key := []byte(s)
	if len(s)%2 == 0 && len(s) > 0 {
		if b, err := hex.DecodeString(s); err == nil {
			key = b
		}
	}
	if len(key) < MinSecret {
		return nil, fmt.Errorf("the secret has %d bytes, at least %d are needed (make one with: openssl rand -hex 32)", len(key), MinSecret)
	}
	return key, nil
}

// LoadSecret reads the secret from file when it is set (preferred: it keeps the secret out of
// the properties file), else from inline. Both empty: nil, no error (peer authentication off);
// both set: an error.
func LoadSecret(inline, file string) ([]byte, error) {
	switch {
	case inline != "" && file != "":
		return nil, fmt.Errorf("set peerSecret or peerSecretFile, not both")
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("peerSecretFile: %w", err)
		}
		key, err := ParseSecret(string(b))
		if err != nil {
			return nil, fmt.Errorf("peerSecretFile %s: %w", file, err)
		}
		return key, nil
	case inline != "":
		key, err := ParseSecret(inline)
		if err != nil {
			return nil, fmt.Errorf("peerSecret: %w", err)
		}
		return key, nil
	}
	return nil, nil
}

// LoopbackOnly reports whether a listen address (host:port, or a bare host) is reachable from
// this machine only: a 127.x or ::1 address or "localhost". An empty host (all interfaces) is
// not. Nodes warn when a peer port without authentication is not loopback-only.
func LoopbackOnly(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
