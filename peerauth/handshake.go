package peerauth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Protocol constants (see the package doc).
const (
	Magic   = "RRPA"
	Version = 1
	// NonceSize is each side's nonce length; ProofSize an HMAC-SHA256 length.
	NonceSize = 32
	ProofSize = sha256.Size
	// MaxIdentity caps the claimed identity (a node id or an ACL access key).
	MaxIdentity = 256
	// MaxPurpose caps the purpose label.
	MaxPurpose = 16
	// DefaultTimeout bounds a whole handshake, either side.
	DefaultTimeout = 5 * time.Second
)

// Purposes: the link a handshake opens.
const (
	PurposeRaft = "raft"
	PurposeHA   = "ha"
)

const (
	verdictAccepted = 0
	verdictRefused  = 1
)

// Errors a handshake ends with (wrapped with context).
var (
	// ErrMalformed: the peer sent bytes that are not this protocol (wrong magic, version,
	// purpose, or a length beyond its cap).
	ErrMalformed = errors.New("peerauth: malformed handshake")
	// ErrRefused: the server did not accept this client's proof (wrong secret or identity).
	ErrRefused = errors.New("peerauth: the peer refused our credential")
	// ErrBadProof: the other side's proof is wrong: it does not hold the secret.
	ErrBadProof = errors.New("peerauth: the peer failed to prove the shared secret")
)

// Credential is what a client proves: who it claims to be and the key it holds.
type Credential struct {
	Identity string
	Key      []byte
}

// KeyFunc returns the key an identity must prove (ok false: an unknown identity).
type KeyFunc func(identity string) (key []byte, ok bool)

// SharedKey is a KeyFunc for a group secret: every non-empty identity proves the same key.
func SharedKey(key []byte) KeyFunc {
	return func(id string) ([]byte, bool) { return key, id != "" }
}

// hello is the client's first message.
type hello struct {
	purpose  string
	identity string
	nonce    [NonceSize]byte
}

func (h *hello) append(b []byte) []byte {
	b = append(b, Magic...)
	b = append(b, Version, byte(len(h.purpose)))
	b = append(b, h.purpose...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.identity)))
	b = append(b, h.identity...)
	return append(b, h.nonce[:]...)
}

// readHello reads a client hello, refusing anything beyond the caps before allocating.
func readHello(r io.Reader) (hello, error) {
	var h hello
	var head [6]byte // magic, version, purpose length
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return h, fmt.Errorf("read hello: %w", err)
	}
	if string(head[:4]) != Magic {
		return h, fmt.Errorf("%w: bad magic %q", ErrMalformed, head[:4])
	}
	if head[4] != Version {
		return h, fmt.Errorf("%w: version %d, want %d", ErrMalformed, head[4], Version)
	}
	pl := int(head[5])
	if pl == 0 || pl > MaxPurpose {
		return h, fmt.Errorf("%w: purpose length %d", ErrMalformed, pl)
	}
	buf := make([]byte, pl+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return h, fmt.Errorf("read hello purpose: %w", err)
	}
	h.purpose = string(buf[:pl])
	il := int(binary.BigEndian.Uint16(buf[pl:]))
	if il == 0 || il > MaxIdentity {
		return h, fmt.Errorf("%w: identity length %d (1..%d)", ErrMalformed, il, MaxIdentity)
	}
	id := make([]byte, il)
	if _, err := io.ReadFull(r, id); err != nil {
		return h, fmt.Errorf("read hello identity: %w", err)
	}
	h.identity = string(id)
	if _, err := io.ReadFull(r, h.nonce[:]); err != nil {
		return h, fmt.Errorf("read hello nonce: %w", err)
	}
	return h, nil
}

// challenge is the server's answer to a hello.
type challenge struct {
	nonce [NonceSize]byte
	proof [ProofSize]byte
}

func (c *challenge) append(b []byte) []byte {
	b = append(b, Magic...)
	b = append(b, Version)
	b = append(b, c.nonce[:]...)
	return append(b, c.proof[:]...)
}

func readChallenge(r io.Reader) (challenge, error) {
	var c challenge
	var b [len(Magic) + 1 + NonceSize + ProofSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return c, fmt.Errorf("read challenge: %w", err)
	}
	if string(b[:4]) != Magic {
		return c, fmt.Errorf("%w: bad magic %q in the challenge (is this a peer port?)", ErrMalformed, b[:4])
	}
	if b[4] != Version {
		return c, fmt.Errorf("%w: challenge version %d, want %d", ErrMalformed, b[4], Version)
	}
	copy(c.nonce[:], b[5:])
	copy(c.proof[:], b[5+NonceSize:])
	return c, nil
}

// proof is HMAC-SHA256(key, transcript): every field length-prefixed, so no two different
// transcripts encode alike.
func proof(key []byte, direction, purpose, identity string, clientNonce, serverNonce []byte) [ProofSize]byte {
	m := hmac.New(sha256.New, key)
	for _, f := range [][]byte{[]byte("rocketraft-peerauth-v1"), []byte(direction), []byte(purpose), []byte(identity), clientNonce, serverNonce} {
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(len(f)))
		m.Write(l[:])
		m.Write(f)
	}
	var out [ProofSize]byte
	copy(out[:], m.Sum(nil))
	return out
}

// deadline sets conn's deadline for a handshake of at most timeout and returns the function that
// clears it.
func deadline(conn net.Conn, timeout time.Duration) func() {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	return func() { _ = conn.SetDeadline(time.Time{}) }
}

// Client runs the client side on a fresh connection: it proves cred for purpose and checks the
// server's proof. On error the caller closes conn.
func Client(conn net.Conn, purpose string, cred Credential, timeout time.Duration) error {
	if len(cred.Identity) == 0 || len(cred.Identity) > MaxIdentity {
		return fmt.Errorf("peerauth: identity %q must have 1..%d bytes", cred.Identity, MaxIdentity)
	}
	if len(purpose) == 0 || len(purpose) > MaxPurpose {
		return fmt.Errorf("peerauth: purpose %q must have 1..%d bytes", purpose, MaxPurpose)
	}
	defer deadline(conn, timeout)()
	h := hello{purpose: purpose, identity: cred.Identity}
	if _, err := rand.Read(h.nonce[:]); err != nil {
		return fmt.Errorf("peerauth: nonce: %w", err)
	}
	if _, err := conn.Write(h.append(nil)); err != nil {
		return fmt.Errorf("peerauth: send hello: %w", err)
	}
	c, err := readChallenge(conn)
	if err != nil {
		return fmt.Errorf("peerauth handshake: %w", err)
	}
	want := proof(cred.Key, "server", purpose, cred.Identity, h.nonce[:], c.nonce[:])
	if !hmac.Equal(want[:], c.proof[:]) {
		return fmt.Errorf("%w (purpose %s, identity %s): a different secret, or not our peer", ErrBadProof, purpose, cred.Identity)
	}
	p := proof(cred.Key, "client", purpose, cred.Identity, h.nonce[:], c.nonce[:])
	if _, err := conn.Write(p[:]); err != nil {
		return fmt.Errorf("peerauth: send proof: %w", err)
	}
	var v [1]byte
	if _, err := io.ReadFull(conn, v[:]); err != nil {
		return fmt.Errorf("peerauth: read verdict: %w", err)
	}
	if v[0] != verdictAccepted {
		return fmt.Errorf("%w (purpose %s, identity %s)", ErrRefused, purpose, cred.Identity)
	}
	return nil
}

// Server runs the server side on an accepted connection: the client must prove the key keys
// returns for the identity it claims, for purpose. It returns that identity once proven. On error
// the caller closes conn and serves nothing on it.
func Server(conn net.Conn, purpose string, keys KeyFunc, timeout time.Duration) (string, error) {
	defer deadline(conn, timeout)()
	h, err := readHello(conn)
	if err != nil {
		return "", fmt.Errorf("hello: %w", err)
	}
	if h.purpose != purpose {
		return "", fmt.Errorf("%w: purpose %q on the %s port", ErrMalformed, h.purpose, purpose)
	}
	key, ok := keys(h.identity)
	if !ok {
		// Carry on under a random key: the client fails exactly as with a wrong secret.
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return "", fmt.Errorf("peerauth: key: %w", err)
		}
	}
	var c challenge
	if _, err := rand.Read(c.nonce[:]); err != nil {
		return "", fmt.Errorf("peerauth: nonce: %w", err)
	}
	c.proof = proof(key, "server", purpose, h.identity, h.nonce[:], c.nonce[:])
	if _, err := conn.Write(c.append(nil)); err != nil {
		return "", fmt.Errorf("peerauth: send challenge: %w", err)
	}
	var got [ProofSize]byte
	if _, err := io.ReadFull(conn, got[:]); err != nil {
		if !ok {
			return "", fmt.Errorf("%w: %q claimed on %s (unknown identity; the client hung up: %v)", ErrBadProof, h.identity, purpose, err)
		}
		return "", fmt.Errorf("peerauth: read proof of %q (a client with another secret hangs up here): %w", h.identity, err)
	}
	want := proof(key, "client", purpose, h.identity, h.nonce[:], c.nonce[:])
	if !ok || !hmac.Equal(want[:], got[:]) {
		_, _ = conn.Write([]byte{verdictRefused})
		why := "wrong secret"
		if !ok {
			why = "unknown identity"
		}
		return "", fmt.Errorf("%w: %q claimed on %s (%s)", ErrBadProof, h.identity, purpose, why)
	}
	if _, err := conn.Write([]byte{verdictAccepted}); err != nil {
		return "", fmt.Errorf("peerauth: send verdict: %w", err)
	}
	return h.identity, nil
}

// IsProbe reports whether err is a connection that ended before its first byte (a port probe or
// a health check), which callers log more quietly than a failed handshake.
func IsProbe(err error) bool {
	return errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF)
}
