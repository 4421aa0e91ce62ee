package peerauth

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

var (
	groupKey = []byte("0123456789abcdef-group")
	otherKey = []byte("fedcba9876543210-other")
)

// pair runs the server side on one end of a pipe and the client side on the other.
func pair(t *testing.T, purpose string, cred Credential, keys KeyFunc, serverPurpose string) (clientErr, serverErr error, id string) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		id, serverErr = Server(b, serverPurpose, keys, 2*time.Second)
		if serverErr != nil {
			b.Close()
		}
	}()
	clientErr = Client(a, purpose, cred, 2*time.Second)
	a.Close()
	<-done
	return clientErr, serverErr, id
}

func TestHandshake(t *testing.T) {
	t.Run("good", func(t *testing.T) {
		cerr, serr, id := pair(t, PurposeRaft, Credential{"n1", groupKey}, SharedKey(groupKey), PurposeRaft)
		if cerr != nil || serr != nil || id != "n1" {
			t.Fatalf("client %v, server %v, id %q", cerr, serr, id)
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		cerr, serr, _ := pair(t, PurposeRaft, Credential{"n1", otherKey}, SharedKey(groupKey), PurposeRaft)
		// The client checks the server's proof first: it sees the server holds another key.
		if !errors.Is(cerr, ErrBadProof) || serr == nil {
			t.Fatalf("client %v, server %v", cerr, serr)
		}
	})
	t.Run("wrong identity", func(t *testing.T) {
		keys := func(id string) ([]byte, bool) {
			if id == "admin" {
				return groupKey, true
			}
			return nil, false
		}
		cerr, serr, _ := pair(t, PurposeHA, Credential{"intruder", groupKey}, keys, PurposeHA)
		if cerr == nil || !errors.Is(serr, ErrBadProof) || !strings.Contains(serr.Error(), "unknown identity") {
			t.Fatalf("client %v, server %v", cerr, serr)
		}
		cerr, serr, id := pair(t, PurposeHA, Credential{"admin", groupKey}, keys, PurposeHA)
		if cerr != nil || serr != nil || id != "admin" {
			t.Fatalf("the known identity: client %v, server %v", cerr, serr)
		}
	})
	t.Run("wrong purpose", func(t *testing.T) {
		cerr, serr, _ := pair(t, PurposeHA, Credential{"n1", groupKey}, SharedKey(groupKey), PurposeRaft)
		if cerr == nil || !errors.Is(serr, ErrMalformed) {
			t.Fatalf("client %v, server %v", cerr, serr)
		}
	})
}

// scripted is a client that speaks raw bytes: it sends hello, reads the challenge, and lets
// the test choose the proof.
func scripted(t *testing.T, keys KeyFunc, helloBytes []byte, makeProof func(ch []byte) []byte) (challengeBytes []byte, serverErr error) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	done := make(chan error, 1)
	go func() {
		_, err := Server(b, PurposeRaft, keys, 2*time.Second)
		b.Close()
		done <- err
	}()
	_ = a.SetDeadline(time.Now().Add(3 * time.Second))
	go func() { _, _ = a.Write(helloBytes) }()
	ch := make([]byte, len(Magic)+1+NonceSize+ProofSize)
	if _, err := io.ReadFull(a, ch); err != nil {
		return nil, <-done
	}
	_, _ = a.Write(makeProof(ch))
	var v [1]byte
	_, _ = io.ReadFull(a, v[:])
	return ch, <-done
}

// TestNoReplayNoReflection: a proof recorded from one handshake does not open another (fresh
// server nonce), and the server's own proof sent back as the client's is refused (direction
// bound in).
func TestNoReplayNoReflection(t *testing.T) {
	keys := SharedKey(groupKey)
	h := hello{purpose: PurposeRaft, identity: "n1"}
	copy(h.nonce[:], bytes.Repeat([]byte{7}, NonceSize))
	hb := h.append(nil)

	var recorded []byte
	ch, err := scripted(t, keys, hb, func(ch []byte) []byte {
		p := proof(groupKey, "client", PurposeRaft, "n1", h.nonce[:], ch[5:5+NonceSize])
		recorded = p[:]
		return recorded
	})
	if err != nil || ch == nil {
		t.Fatalf("honest scripted client refused: %v", err)
	}
	if _, err := scripted(t, keys, hb, func([]byte) []byte { return recorded }); !errors.Is(err, ErrBadProof) {
		t.Fatalf("replayed proof: %v, want refused", err)
	}
	if _, err := scripted(t, keys, hb, func(ch []byte) []byte { return ch[5+NonceSize:] }); !errors.Is(err, ErrBadProof) {
		t.Fatalf("reflected server proof: %v, want refused", err)
	}
}

func TestMalformedAndTruncated(t *testing.T) {
	good := (&hello{purpose: PurposeRaft, identity: "n1"}).append(nil)
	big := append([]byte(Magic), Version, 4)
	big = append(big, "raft"...)
	big = append(big, 0xff, 0xff) // identity length 65535
	cases := map[string][]byte{
		"empty":        nil,
		"8 zero bytes": make([]byte, 8),
		"truncated":    good[:len(good)-5],
		"bad version":  append([]byte(Magic), 9, 4),
		"oversize id":  big,
		"zero purpose": append([]byte(Magic), Version, 0),
		"huge purpose": append([]byte(Magic), Version, 200),
	}
	for name, in := range cases {
		_, err := readHello(bytes.NewReader(in))
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := readHello(bytes.NewReader(good)); err != nil {
		t.Fatal(err)
	}
	// A client that stops after part of its hello is dropped at the deadline, not held.
	a, b := net.Pipe()
	defer a.Close()
	go func() { _, _ = a.Write(good[:7]) }()
	began := time.Now()
	_, err := Server(b, PurposeRaft, SharedKey(groupKey), 300*time.Millisecond)
	if err == nil || time.Since(began) > 2*time.Second {
		t.Fatalf("stalled hello: %v after %v", err, time.Since(began))
	}
}

func TestSecrets(t *testing.T) {
	if _, err := ParseSecret("short"); err == nil {
		t.Fatal("short secret accepted")
	}
	k, err := ParseSecret(" 00112233445566778899aabbccddeeff\n")
	if err != nil || len(k) != 16 {
		t.Fatalf("hex secret: %v %d", err, len(k))
	}
	k, err = ParseSecret("a raw passphrase, long enough")
	if err != nil || string(k) != "a raw passphrase, long enough" {
		t.Fatalf("raw secret: %v %q", err, k)
	}
	if _, err := LoadSecret("x", "y"); err == nil {
		t.Fatal("both set accepted")
	}
	if k, err := LoadSecret("", ""); k != nil || err != nil {
		t.Fatal("none set must mean off")
	}
	for addr, want := range map[string]bool{"127.0.0.1:1": true, "[::1]:2": true, "localhost:3": true, "0.0.0.0:4": false, ":5": false, "10.0.0.1:6": false, "example.com:7": false} {
		if LoopbackOnly(addr) != want {
			t.Errorf("LoopbackOnly(%s) != %v", addr, want)
		}
	}
}

// FuzzReadHello: any bytes give a hello or an error, never a panic or a large allocation.
func FuzzReadHello(f *testing.F) {
	f.Add((&hello{purpose: PurposeRaft, identity: "n1"}).append(nil))
	f.Add(make([]byte, 8))
	f.Add(append([]byte(Magic), Version, 2, 'h', 'a', 0xff, 0xff))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := readHello(bytes.NewReader(b))
		if err == nil && (len(h.identity) > MaxIdentity || len(h.purpose) > MaxPurpose) {
			t.Fatalf("caps not enforced: %d/%d", len(h.identity), len(h.purpose))
		}
	})
}

// FuzzReadChallenge: the client's parser of the server's answer.
func FuzzReadChallenge(f *testing.F) {
	f.Add((&challenge{}).append(nil))
	f.Add([]byte("HTTP/1.1 400 Bad Request\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = readChallenge(bytes.NewReader(b))
	})
}

// BenchmarkHandshake: one full handshake over loopback TCP (paid once per new connection).
func BenchmarkHandshake(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = Server(c, PurposeRaft, SharedKey(groupKey), time.Second)
			}()
		}
	}()
	for b.Loop() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		if err := Client(c, PurposeRaft, Credential{"n1", groupKey}, time.Second); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

func TestLimiter(t *testing.T) {
	l := &Limiter{PerHost: 2, Total: 3}
	a := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 1}
	b := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 2), Port: 2}
	r1, ok1 := l.Acquire(a)
	_, ok2 := l.Acquire(a)
	_, ok3 := l.Acquire(a)
	if !ok1 || !ok2 || ok3 {
		t.Fatalf("per host: %v %v %v", ok1, ok2, ok3)
	}
	if _, ok := l.Acquire(b); !ok {
		t.Fatal("another host was kept out by the first one's flood")
	}
	if _, ok := l.Acquire(&net.TCPAddr{IP: net.IPv4(10, 0, 0, 3)}); ok {
		t.Fatal("total bound not enforced")
	}
	r1()
	r1() // idempotent
	if _, ok := l.Acquire(a); !ok {
		t.Fatal("released slot not reusable")
	}
}
