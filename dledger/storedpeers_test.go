package dledger

import (
	"bytes"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func TestPeerDiffs(t *testing.T) {
	voter := func(id, addr string) raft.Server {
		return raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr)}
	}
	stored := []raft.Server{voter("n0", "h:1"), voter("n1", "h:2"), voter("n2", "h:3")}
	same := []Peer{{"n0", "h:1"}, {"n1", "h:2"}, {"n2", "h:3"}}
	if d := peerDiffs(stored, same); d != nil {
		t.Fatalf("identical: %q", d)
	}
	moved := []Peer{{"n0", "h:1"}, {"n1", "h:22"}, {"n3", "h:4"}}
	nonvoter := append([]raft.Server(nil), stored...)
	nonvoter[0].Suffrage = raft.Nonvoter
	got := peerDiffs(nonvoter, moved)
	want := []string{
		"n0 is stored as a Nonvoter",
		"n1 is stored at h:2, configured at h:22",
		"n3 (h:4) is not a member",
		"n2 (h:3) is a member not in dLegerPeers",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("peerDiffs = %q\nwant %q", got, want)
	}
}

// A node restarted with an edited dLegerPeers says that the stored membership is what it uses.
func TestRestartWarnsWhenPeersDiffer(t *testing.T) {
	ln := mustListen(t)
	dir := t.TempDir()
	self := Peer{ID: "n0", Addr: ln.Addr().String()}
	cfg := Config{Group: "g", SelfID: "n0", Peers: []Peer{self}, DataDir: dir, Listener: ln, Logger: hclog.NewNullLogger()}
	n, err := Open(cfg, &testFSM{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}

	var buf lockedBuffer // Raft's goroutines log through it while the test reads it
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Warn})
	ln2 := mustListen(t)
	moved := Peer{ID: "n0", Addr: ln2.Addr().String()}
	cfg = Config{Group: "g", SelfID: "n0", Peers: []Peer{moved, {ID: "n1", Addr: "127.0.0.1:1"}}, DataDir: dir, Listener: ln2, Logger: log}
	n, err = Open(cfg, &testFSM{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	out := buf.String() // the check runs inside Open, before it returns
	for _, w := range []string{"dLegerPeers differs", "n0 is stored at " + self.Addr + ", configured at " + moved.Addr, "n1 (127.0.0.1:1) is not a member"} {
		if !strings.Contains(out, w) {
			t.Errorf("log lacks %q:\n%s", w, out)
		}
	}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
