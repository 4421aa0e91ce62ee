package ha

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"rocketraft/message"
	"rocketraft/storage"
)

// storeSource adapts a storage.Store to Source, as the broker does.
type storeSource struct{ s *storage.Store }

func (s storeSource) CommitLogMinOffset() (int64, error) { return s.s.CommitLogMinOffset(), nil }
func (s storeSource) CommitLogMaxOffset() (int64, error) { return s.s.CommitLogMaxOffset(), nil }
func (s storeSource) ReadCommitLog(off int64, n int) ([]byte, error) {
	return s.s.ReadCommitLog(off, n)
}

const testFileSize = 64 << 10

func openStore(t *testing.T) (*storage.Store, string) {
	t.Helper()
	root := t.TempDir()
	c := storage.DefaultConfig(root)
	c.MappedFileSizeCommitLog = testFileSize
	c.MappedFileSizeConsumeQueue = 1000 * storage.ConsumeQueueUnitSize
	c.MaxHashSlotNum, c.MaxIndexNum = 1000, 4000
	st, err := storage.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, root
}

func appendN(t *testing.T, st *storage.Store, n int, label string) int64 {
	t.Helper()
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	var end int64
	for i := range n {
		rec, err := message.EncodeRecord(&message.Message{Topic: "T", QueueID: int32(i % 3), BornHost: host, StoreHost: host,
			BornTimestamp: 1, Body: bytes.Repeat([]byte(fmt.Sprintf("%s-%d;", label, i)), 1+i%40)})
		if err != nil {
			t.Fatal(err)
		}
		res, err := st.Append(context.Background(), [][]byte{rec})
		if err != nil {
			t.Fatal(err)
		}
		end = res[0].PhysicalOffset + int64(res[0].Size)
	}
	return end
}

func startPair(t *testing.T, master, slave *storage.Store, masterAddr func() string) (*Server, *Client) {
	t.Helper()
	srv := NewServer(ServerConfig{Addr: "127.0.0.1:0", Source: storeSource{master}, TransferBatchSize: 1000,
		HeartbeatInterval: 200 * time.Millisecond, HousekeepingInterval: 2 * time.Second})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	if masterAddr == nil {
		masterAddr = srv.Addr
	}
	cl := NewClient(ClientConfig{MasterAddr: masterAddr, Target: slave, FileSize: testFileSize,
		HeartbeatInterval: 200 * time.Millisecond, HousekeepingInterval: 2 * time.Second, RetryInterval: 100 * time.Millisecond})
	cl.Start()
	t.Cleanup(cl.Close)
	return srv, cl
}

func waitFor(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func commitLogBytes(t *testing.T, root string) []byte {
	t.Helper()
	dir := filepath.Join(root, "commitlog")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// TestReplicateStores: a slave store follows a master store over several commitlog files, while
// appends go on; the slave's consume queues serve the messages; the commitlogs are identical;
// the master's ack offset reaches the end, and WaitAck returns.
func TestReplicateStores(t *testing.T) {
	master, mroot := openStore(t)
	slave, sroot := openStore(t)
	appendN(t, master, 300, "before")
	srv, cl := startPair(t, master, slave, nil)
	end := appendN(t, master, 700, "during")
	if end < 3*testFileSize {
		t.Fatalf("test data spans only %d bytes", end)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.WaitAck(ctx, end); err != nil {
		t.Fatalf("WaitAck(%d): %v (slave at %d)", end, err, slave.CommitLogMaxOffset())
	}
	if !srv.SlaveOK(end) {
		t.Fatal("slave not OK")
	}
	if got := slave.CommitLogMaxOffset(); got != master.CommitLogMaxOffset() {
		t.Fatalf("slave at %d, master at %d", got, master.CommitLogMaxOffset())
	}
	for q := int32(0); q < 3; q++ {
		if a, b := master.MaxOffset("T", q), slave.MaxOffset("T", q); a != b {
			t.Fatalf("queue %d: master %d slave %d", q, a, b)
		}
	}
	res := slave.GetMessages("T", 1, 0, 32, 0, nil)
	if res.Status != storage.Found || len(res.Records) != 32 {
		t.Fatalf("slave read: %v %d", res.Status, len(res.Records))
	}
	st := cl.Status()
	if !st.Connected || st.MaxOffset != end {
		t.Fatalf("client status %+v", st)
	}
	cl.Close()
	_ = srv.Close()
	if err := master.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := slave.Flush(); err != nil {
		t.Fatal(err)
	}
	m, s := commitLogBytes(t, mroot), commitLogBytes(t, sroot)
	if !bytes.Equal(m[:end], s[:end]) {
		t.Fatal("commitlogs differ")
	}
}

// TestHostileSlave: bad reports close only that connection; the real slave keeps replicating.
func TestHostileSlave(t *testing.T) {
	master, _ := openStore(t)
	slave, _ := openStore(t)
	end := appendN(t, master, 50, "x")
	srv, _ := startPair(t, master, slave, nil)
	for _, bad := range [][]byte{
		AppendReport(nil, -1),            // negative
		AppendReport(nil, end+1_000_000), // beyond the master
		{1, 2, 3},                        // then silence: dropped by housekeeping
	} {
		c, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write(bad)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = io.Copy(io.Discard, c) // returns once the master closes it
		c.Close()
		if err != nil {
			t.Fatalf("hostile report %x: connection not closed by the master: %v", bad, err)
		}
	}
	end = appendN(t, master, 50, "y")
	waitFor(t, 10*time.Second, "slave catches up", func() bool { return slave.CommitLogMaxOffset() == end })
}

// TestHostileMaster: a fake master sending garbage or a wrong offset makes the slave close the
// connection and append nothing.
func TestHostileMaster(t *testing.T) {
	slave, _ := openStore(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	payloads := [][]byte{
		append(AppendHeader(nil, Header{Offset: 4096, Size: 4}), 1, 2, 3, 4),                      // wrong offset
		append(AppendHeader(nil, Header{Offset: 0, Size: 16}), bytes.Repeat([]byte{0xff}, 16)...), // not records
		AppendHeader(nil, Header{Offset: 0, Size: 1 << 30}),                                       // oversized frame
	}
	closed := make(chan int, len(payloads))
	go func() {
		for i := range payloads {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			var rep [8]byte
			_, _ = io.ReadFull(c, rep[:])
			_, _ = c.Write(payloads[i])
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.Copy(io.Discard, c); err == nil {
				closed <- i
			}
			c.Close()
		}
	}()
	cl := NewClient(ClientConfig{MasterAddr: func() string { return ln.Addr().String() }, Target: slave, FileSize: testFileSize,
		HeartbeatInterval: time.Second, HousekeepingInterval: 10 * time.Second, RetryInterval: 50 * time.Millisecond})
	cl.Start()
	defer cl.Close()
	for range payloads {
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("the slave did not close a connection to a hostile master")
		}
	}
	if slave.CommitLogMaxOffset() != 0 {
		t.Fatalf("the slave stored something: %d", slave.CommitLogMaxOffset())
	}
}
