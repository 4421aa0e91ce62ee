package ha

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"rocketraft/peerauth"
)

// TestAuthenticatedHA: with Keys set, a slave holding the key replicates; a peer sending a
// report without the handshake (8 zero bytes) or with the wrong key gets no commitlog byte,
// and never counts as a slave for WaitAck.
func TestAuthenticatedHA(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	master, _ := openStore(t)
	end := appendN(t, master, 50, "before")
	srv := NewServer(ServerConfig{Addr: "127.0.0.1:0", Source: storeSource{master}, Keys: peerauth.SharedKey(key),
		HeartbeatInterval: 200 * time.Millisecond, HousekeepingInterval: 2 * time.Second})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })

	// 8 zero bytes: the old "give me everything from offset 0".
	raw, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Write(make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	_ = raw.SetReadDeadline(time.Now().Add(8 * time.Second))
	got, err := io.ReadAll(raw)
	if len(got) != 0 {
		t.Fatalf("an unauthenticated peer received %d bytes", len(got))
	}
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the server kept an unauthenticated connection open past its handshake deadline")
		}
	}

	// A fake slave with the wrong key: refused at the handshake, cannot acknowledge.
	fake := NewClient(ClientConfig{MasterAddr: srv.Addr, Target: nil, FileSize: testFileSize, RetryInterval: 100 * time.Millisecond,
		Credential: &peerauth.Credential{Identity: "slave", Key: []byte("not the group secret at all")}})
	fake.Start()
	time.Sleep(500 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	if err := srv.WaitAck(ctx, 1); !errors.Is(err, ErrNoSlave) {
		t.Fatalf("WaitAck with only a refused slave: %v, want ErrNoSlave", err)
	}
	cancel()
	fake.Close()

	slave, _ := openStore(t)
	cl := NewClient(ClientConfig{MasterAddr: srv.Addr, Target: slave, FileSize: testFileSize, RetryInterval: 100 * time.Millisecond,
		HeartbeatInterval: 200 * time.Millisecond, HousekeepingInterval: 2 * time.Second,
		Credential: &peerauth.Credential{Identity: "slave", Key: key}})
	cl.Start()
	t.Cleanup(cl.Close)
	waitFor(t, 10*time.Second, "the authenticated slave connects", func() bool { return len(srv.Status()) == 1 })
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.WaitAck(ctx, end); err != nil {
		t.Fatalf("authenticated slave: WaitAck(%d): %v (slave at %d)", end, err, slave.CommitLogMaxOffset())
	}
}
