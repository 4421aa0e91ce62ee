package dledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// eventually retries f until it returns nil or timeout passes.
func eventually(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %v", timeout, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testLogger is silent unless DLEDGER_TEST_LOG names a level (debug, info, ...).
func testLogger(name string) hclog.Logger {
	lvl := os.Getenv("DLEDGER_TEST_LOG")
	if lvl == "" {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.LevelFromString(lvl), Output: os.Stderr})
}

// testFSM records every command it applies. A command starting with 'B' is a test batch (a JSON
// array of strings): the response is one string per item ("ok:"+item), an item starting with "bad"
// gets an error of its own, and an item "poison" fails the whole entry.
type testFSM struct {
	mu       sync.Mutex
	applied  [][]byte
	restores atomic.Int32
	poisoned [][]string    // items of entries that failed as a whole
	gate     chan struct{} // if set, an entry with the item "gate" waits for it to close
}

type itemError struct{ item string }

func (e itemError) Error() string { return "bad item " + e.item }

func (f *testFSM) Apply(l *raft.Log) any {
	if f.gate != nil && bytes.Contains(l.Data, []byte(`"gate"`)) {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, bytes.Clone(l.Data))
	if len(l.Data) == 0 || l.Data[0] != 'B' {
		return fmt.Sprintf("applied %d", len(f.applied))
	}
	var items []string
	if err := json.Unmarshal(l.Data[1:], &items); err != nil {
		return err
	}
	for _, it := range items {
		if it == "poison" {
			f.poisoned = append(f.poisoned, items)
			return errors.New("poisoned entry")
		}
	}
	out := make([]Result[string], len(items))
	for i, it := range items {
		if strings.HasPrefix(it, "bad") {
			out[i].Err = itemError{it}
		} else {
			out[i].Value = "ok:" + it
		}
	}
	return out
}

func (f *testFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	data, err := json.Marshal(f.applied)
	return snapshotBytes(data), err
}

func (f *testFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var applied [][]byte
	if err := json.NewDecoder(rc).Decode(&applied); err != nil {
		return err
	}
	f.mu.Lock()
	f.applied = applied
	f.mu.Unlock()
	f.restores.Add(1)
	return nil
}

func (f *testFSM) log() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.applied...)
}

type snapshotBytes []byte

func (s snapshotBytes) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s snapshotBytes) Release() {}

// testCodec is the Batcher codec matching testFSM.
var testCodec = BatchCodec[string, string]{
	Encode: func(items []string) []byte {
		b, _ := json.Marshal(items)
		return append([]byte{'B'}, b...)
	},
	Split: func(resp any, n int) ([]Result[string], error) {
		r, ok := resp.([]Result[string])
		if !ok {
			return nil, fmt.Errorf("unexpected response %T", resp)
		}
		return r, nil
	},
	Size: func(s string) int { return len(s) + 3 },
}

// cluster is an in-process Raft group on 127.0.0.1 with real TCP.
type cluster struct {
	t     testing.TB
	peers []Peer
	cfgs  map[string]Config
	nodes map[string]*Node // running nodes
	fsms  map[string]raft.FSM
}

// newCluster starts n bootstrapped nodes n0..n{n-1}; mod (optional) adjusts each Config.
func newCluster(t testing.TB, n int, mod func(*Config), newFSM func() raft.FSM) *cluster {
	t.Helper()
	if newFSM == nil {
		newFSM = func() raft.FSM { return &testFSM{} }
	}
	c := &cluster{t: t, cfgs: map[string]Config{}, nodes: map[string]*Node{}, fsms: map[string]raft.FSM{}}
	lns := make([]net.Listener, n)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		c.peers = append(c.peers, Peer{ID: fmt.Sprintf("n%d", i), Addr: ln.Addr().String()})
	}
	for i, p := range c.peers {
		cfg := Config{Group: "g", SelfID: p.ID, Peers: c.peers, DataDir: t.TempDir(), Listener: lns[i], Logger: testLogger(p.ID)}
		if mod != nil {
			mod(&cfg)
		}
		c.cfgs[p.ID] = cfg
		c.fsms[p.ID] = newFSM()
		node, err := Open(cfg, c.fsms[p.ID])
		if err != nil {
			t.Fatal(err)
		}
		c.nodes[p.ID] = node
	}
	t.Cleanup(c.shutdown)
	return c
}

func (c *cluster) shutdown() {
	for id, n := range c.nodes {
		if err := n.Shutdown(); err != nil {
			c.t.Errorf("shutdown %s: %v", id, err)
		}
		delete(c.nodes, id)
	}
}

// stop shuts one node down and returns how long it took.
func (c *cluster) stop(id string) {
	c.t.Helper()
	if err := c.nodes[id].Shutdown(); err != nil {
		c.t.Fatalf("shutdown %s: %v", id, err)
	}
	delete(c.nodes, id)
}

// restart reopens a stopped node on its existing DataDir with a fresh FSM.
func (c *cluster) restart(id string) *Node {
	c.t.Helper()
	cfg := c.cfgs[id]
	cfg.Listener = nil // listen on the peer address again
	c.fsms[id] = &testFSM{}
	n := openRetry(c.t, cfg, c.fsms[id])
	c.nodes[id] = n
	return n
}

// openRetry opens a node on its configured address, retrying while the port is taken (a freed
// port can briefly be some connection's ephemeral port).
func openRetry(t testing.TB, cfg Config, fsm raft.FSM) *Node {
	t.Helper()
	var n *Node
	eventually(t, 10*time.Second, func() error {
		var err error
		n, err = Open(cfg, fsm)
		if err != nil && !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("open %s: %v", cfg.SelfID, err)
		}
		return err
	})
	return n
}

// leader waits until one running node is leader with its barrier done and every running node
// agrees on it.
func (c *cluster) leader(timeout time.Duration) *Node {
	c.t.Helper()
	var lead *Node
	eventually(c.t, timeout, func() error {
		lead = nil
		for _, n := range c.nodes {
			if n.IsLeader() && n.leaderReady.Load() {
				lead = n
			}
		}
		if lead == nil {
			return errors.New("no ready leader")
		}
		for id, n := range c.nodes {
			if lid, _ := n.Leader(); lid != lead.ID() {
				return fmt.Errorf("%s sees leader %q, not %s", id, lid, lead.ID())
			}
		}
		return nil
	})
	return lead
}

func (c *cluster) follower() *Node {
	for _, n := range c.nodes {
		if !n.IsLeader() {
			return n
		}
	}
	c.t.Fatal("no follower")
	return nil
}

// sameLogs waits until every running node's testFSM applied exactly want commands, in order.
func (c *cluster) sameLogs(timeout time.Duration, want [][]byte) {
	c.t.Helper()
	eventually(c.t, timeout, func() error {
		for id := range c.nodes {
			got := c.fsms[id].(*testFSM).log()
			if len(got) != len(want) {
				return fmt.Errorf("%s applied %d commands, want %d", id, len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					return fmt.Errorf("%s command %d = %q, want %q", id, i, got[i], want[i])
				}
			}
		}
		return nil
	})
}

// applyN applies n commands "<prefix>-<i>" on lead and returns them.
func applyN(t testing.TB, lead *Node, prefix string, n int) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out [][]byte
	for i := 0; i < n; i++ {
		cmd := []byte(fmt.Sprintf("%s-%d", prefix, i))
		if _, err := lead.Apply(ctx, cmd); err != nil {
			t.Fatalf("apply %s: %v", cmd, err)
		}
		out = append(out, cmd)
	}
	return out
}
