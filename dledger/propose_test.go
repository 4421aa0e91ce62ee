package dledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"rocketraft/fsm"
)

// The state machine's sequencer is what the broker plugs in.
var _ Sequencer = (*fsm.Sequencer)(nil)

// countingSeq stamps a running counter into bytes 1..8 of every entry starting with 'S', calls
// the barrier on each new term when barrierOnTerm is set, and counts what it is told.
type countingSeq struct {
	barrierOnTerm bool
	fail          error // Stamp's error, when set

	inside, overlap atomic.Bool
	lost            atomic.Int32
	barriers        atomic.Int32

	mu   sync.Mutex
	next uint64
	term uint64
}

func (s *countingSeq) Stamp(data []byte, term uint64, barrier func() error) error {
	if !s.inside.CompareAndSwap(false, true) {
		s.overlap.Store(true)
	}
	defer s.inside.Store(false)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	if s.barrierOnTerm && term != s.term {
		s.barriers.Add(1)
		if err := barrier(); err != nil {
			return fmt.Errorf("test sequencer: %w", err)
		}
		s.term = term
	}
	if len(data) >= 9 && data[0] == 'S' {
		binary.BigEndian.PutUint64(data[1:9], s.next)
		s.next++
	}
	return nil
}

func (s *countingSeq) Lost() { s.lost.Add(1) }

func (s *countingSeq) stamped() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

// stampableEntry returns an entry with room for a stamp, which testFSM applies as a plain
// command.
func stampableEntry(payload string) []byte {
	b := make([]byte, 9, 9+len(payload))
	b[0] = 'S'
	return append(b, payload...)
}

// stampCodec batches strings into one stampable entry; testFSM answers it with a plain string,
// so every item gets an empty result.
var stampCodec = BatchCodec[string, string]{
	Encode: func(items []string) []byte {
		j, _ := json.Marshal(items)
		return stampableEntry(string(j))
	},
	Split: func(resp any, n int) ([]Result[string], error) {
		if _, ok := resp.(string); !ok {
			return nil, fmt.Errorf("unexpected response %T", resp)
		}
		return make([]Result[string], n), nil
	},
}

// stamps returns the stamps of the stamped entries a testFSM applied, in apply order.
func stamps(f *testFSM) []uint64 {
	var out []uint64
	for _, d := range f.log() {
		if len(d) >= 9 && d[0] == 'S' {
			out = append(out, binary.BigEndian.Uint64(d[1:9]))
		}
	}
	return out
}

// clusterWithSequencers starts n nodes, each with its own countingSeq (by node id).
func clusterWithSequencers(t *testing.T, n int, barrierOnTerm bool) (*cluster, map[string]*countingSeq) {
	seqs := map[string]*countingSeq{}
	c := newCluster(t, n, func(cfg *Config) {
		s := &countingSeq{barrierOnTerm: barrierOnTerm}
		seqs[cfg.SelfID] = s
		cfg.Sequencer = s
	}, nil)
	return c, seqs
}

func TestProposeStampsInLogOrder(t *testing.T) {
	c, seqs := clusterWithSequencers(t, 3, true)
	lead := c.leader(10 * time.Second)
	b := NewBatcher(lead, stampCodec, BatchOptions{MaxInFlight: 4})
	defer b.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const workers, each = 6, 25
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := lead.Apply(ctx, stampableEntry(fmt.Sprintf("apply-%d-%d", w, i))); err != nil {
					errs <- err
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := b.Submit(ctx, fmt.Sprintf("item-%d-%d", w, i)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("proposal failed: %v", err)
	}

	ls := seqs[lead.ID()]
	if ls.overlap.Load() {
		t.Fatal("Stamp ran concurrently with itself")
	}
	if n := ls.lost.Load(); n != 0 {
		t.Fatalf("Lost called %d times with every proposal applied", n)
	}
	if n := ls.barriers.Load(); n != 1 {
		t.Fatalf("%d barriers on the leader in one term, want 1", n)
	}
	total := ls.stamped()
	if total < workers*each+1 {
		t.Fatalf("only %d entries stamped for %d applies and %d items", total, workers*each, workers*each)
	}
	// Every replica applies the leader's stamps in index order, so they are exactly 0..total-1.
	eventually(t, 10*time.Second, func() error {
		for id := range c.nodes {
			got := stamps(c.fsms[id].(*testFSM))
			if uint64(len(got)) != total {
				return fmt.Errorf("%s applied %d stamped entries, want %d", id, len(got), total)
			}
			for i, s := range got {
				if s != uint64(i) {
					return fmt.Errorf("%s: stamped entry %d applied with stamp %d: not in stamp order", id, i, s)
				}
			}
		}
		return nil
	})
}

func TestProposeLostWhenRaftRefuses(t *testing.T) {
	c, seqs := clusterWithSequencers(t, 3, false)
	lead := c.leader(10 * time.Second)
	follower := c.follower()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	_, err := follower.Apply(ctx, stampableEntry("on a follower"))
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("apply on a follower: %v, want ErrNotLeader", err)
	}
	fs := seqs[follower.ID()]
	if fs.stamped() != 1 || fs.lost.Load() != 1 {
		t.Fatalf("follower's sequencer: %d stamped, Lost called %d times; want 1 and 1", fs.stamped(), fs.lost.Load())
	}

	// The batcher's path tells the sequencer too.
	b := NewBatcher(follower, stampCodec, BatchOptions{})
	defer b.Close()
	if _, err := b.Submit(ctx, "x"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("submit on a follower: %v, want ErrNotLeader", err)
	}
	if fs.lost.Load() != 2 {
		t.Fatalf("Lost called %d times after two refused proposals, want 2", fs.lost.Load())
	}

	// An applied entry is not lost.
	if _, err := lead.Apply(ctx, stampableEntry("fine")); err != nil {
		t.Fatal(err)
	}
	if n := seqs[lead.ID()].lost.Load(); n != 0 {
		t.Fatalf("Lost called %d times on the leader", n)
	}
}

func TestProposeStampErrorFailsBeforeRaft(t *testing.T) {
	c, seqs := clusterWithSequencers(t, 1, true)
	lead := c.leader(10 * time.Second)
	s := seqs[lead.ID()]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	boom := errors.New("cannot stamp")
	s.mu.Lock()
	s.fail = boom
	s.mu.Unlock()
	if _, err := lead.Apply(ctx, stampableEntry("refused")); !errors.Is(err, boom) {
		t.Fatalf("apply with a failing Stamp: %v, want it wrapped", err)
	}
	s.mu.Lock()
	s.fail = nil
	s.mu.Unlock()
	if _, err := lead.Apply(ctx, stampableEntry("accepted")); err != nil {
		t.Fatal(err)
	}
	for _, d := range c.fsms[lead.ID()].(*testFSM).log() {
		if bytes.Contains(d, []byte("refused")) {
			t.Fatal("an entry whose Stamp failed reached the state machine")
		}
	}
	if s.lost.Load() != 0 {
		t.Fatalf("Lost called %d times for a proposal that never reached Raft", s.lost.Load())
	}
}

func TestProposeBarrierOnFollowerIsNotLeader(t *testing.T) {
	c, seqs := clusterWithSequencers(t, 3, true)
	c.leader(10 * time.Second)
	follower := c.follower()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := follower.Apply(ctx, stampableEntry("x"))
	var nle *NotLeaderError
	if !errors.As(err, &nle) {
		t.Fatalf("apply on a follower whose Stamp needs a barrier: %v, want a *NotLeaderError", err)
	}
	if s := seqs[follower.ID()]; s.barriers.Load() != 1 || s.stamped() != 0 {
		t.Fatalf("follower's sequencer: %d barriers, %d stamped; want 1 and 0", s.barriers.Load(), s.stamped())
	}
}

// entryLogStub is an in-memory entry log that records being closed.
type entryLogStub struct {
	*raft.InmemStore
	closed atomic.Bool
}

func (s *entryLogStub) Close() error {
	s.closed.Store(true)
	return nil
}

func TestOpenCommitLogValidation(t *testing.T) {
	base := func() Config {
		return Config{SelfID: "n0", DataDir: t.TempDir(), Peers: []Peer{{ID: "n0", Addr: "127.0.0.1:1"}},
			LogStore: LogStoreCommitLog, Logger: testLogger("n0")}
	}
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no entry log", func(c *Config) { c.Sequencer = &countingSeq{} }, "EntryLog"},
		{"no sequencer", func(c *Config) { c.EntryLog = raft.NewInmemStore() }, "Sequencer"},
		{"unknown store", func(c *Config) { c.LogStore = "mmap" }, `"commitlog"`},
		{"wal files", func(c *Config) {
			c.EntryLog, c.Sequencer = raft.NewInmemStore(), &countingSeq{}
			if err := os.MkdirAll(filepath.Join(c.DataDir, walDir), 0o755); err != nil {
				t.Fatal(err)
			}
		}, walDir},
	}
	for _, tc := range cases {
		cfg := base()
		tc.mod(&cfg)
		n, err := Open(cfg, &testFSM{})
		if err == nil {
			n.Shutdown()
			t.Fatalf("%s: Open succeeded", tc.name)
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != "dLegerLogStore" || !bytes.Contains([]byte(ce.Msg), []byte(tc.want)) {
			t.Errorf("%s: %v, want a dLegerLogStore ConfigError mentioning %s", tc.name, err, tc.want)
		}
	}
}

func TestOpenCommitLogStore(t *testing.T) {
	entries := &entryLogStub{InmemStore: raft.NewInmemStore()}
	c := newCluster(t, 1, func(cfg *Config) {
		cfg.LogStore = LogStoreCommitLog
		cfg.EntryLog = entries
		cfg.Sequencer = &countingSeq{barrierOnTerm: true}
	}, nil)
	lead := c.leader(10 * time.Second)
	if lead.cache == nil {
		t.Fatal("the entry log is not behind the log cache")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		if _, err := lead.Apply(ctx, stampableEntry(fmt.Sprintf("e%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	want := c.fsms[lead.ID()].(*testFSM).log()
	last, err := entries.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := entries.GetLog(last, &l); err != nil || !bytes.Equal(l.Data, want[len(want)-1]) {
		t.Fatalf("entry log's last entry %q (%v), want the last applied %q", l.Data, err, want[len(want)-1])
	}
	if !bytes.Equal(l.Extensions, commitLogMark) {
		t.Fatalf("entry log's last entry carries %q, want the commitlog store's mark", l.Extensions)
	}
	if _, err := os.Stat(filepath.Join(c.cfgs[lead.ID()].DataDir, walDir)); err == nil {
		t.Fatal("a raft-wal directory was created for the commitlog store")
	}

	id := lead.ID()
	c.stop(id)
	if entries.closed.Load() {
		t.Fatal("the node closed the state machine's entry log")
	}
	// Restarted on the same entry log, the node replays it.
	c.restart(id)
	c.leader(10 * time.Second)
	c.sameLogs(10*time.Second, want)
}
