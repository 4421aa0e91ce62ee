package dledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A node stores command entries proposed for its own kind of log store and refuses the others
// before writing anything; entries Raft itself writes (no-ops, configurations) carry no mark and
// pass everywhere.
func TestStoreGuard(t *testing.T) {
	marked := &raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("a"), Extensions: commitLogMark}
	plain := &raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("a")}
	noop := &raft.Log{Index: 1, Term: 1, Type: raft.LogNoop}
	for _, c := range []struct {
		name      string
		commitLog bool
		l         *raft.Log
		refused   bool
	}{
		{"commitlog node, commitlog leader", true, marked, false},
		{"commitlog node, wal leader", true, plain, true},
		{"wal node, wal leader", false, plain, false},
		{"wal node, commitlog leader", false, marked, true},
		{"commitlog node, no-op", true, noop, false},
		{"wal node, no-op", false, noop, false},
	} {
		store := raft.NewInmemStore()
		g := newStoreGuard(store, c.commitLog, testLogger("guard"))
		err := g.StoreLogs([]*raft.Log{c.l})
		if refused := errors.Is(err, ErrLogStoreMismatch); refused != c.refused {
			t.Errorf("%s: %v, want refused %v", c.name, err, c.refused)
		}
		if last, _ := store.LastIndex(); c.refused && last != 0 {
			t.Errorf("%s: the refused entry was stored", c.name)
		}
		if got := g.refusal(); (got != "") != c.refused {
			t.Errorf("%s: refusal %q, want one: %v", c.name, got, c.refused)
		}
	}

	// The refusal is reported until command entries pass again; no-ops change nothing.
	g := newStoreGuard(raft.NewInmemStore(), true, testLogger("guard"))
	_ = g.StoreLogs([]*raft.Log{plain})
	_ = g.StoreLogs([]*raft.Log{{Index: 1, Term: 2, Type: raft.LogNoop}})
	if g.refusal() == "" {
		t.Fatal("a no-op cleared the refusal")
	}
	if err := g.StoreLogs([]*raft.Log{{Index: 2, Term: 2, Type: raft.LogCommand, Extensions: commitLogMark}}); err != nil || g.refusal() != "" {
		t.Fatalf("a matching entry: %v, refusal %q", err, g.refusal())
	}
}

// A group whose nodes were given different log stores does not diverge: with a raft-wal leader,
// the commitlog-store node refuses every entry (it stays behind, nothing applied) while the two
// raft-wal nodes commit and apply them.
func TestMixedLogStoresRefused(t *testing.T) {
	entries := &entryLogStub{InmemStore: raft.NewInmemStore()}
	c := newCluster(t, 3, func(cfg *Config) {
		if cfg.SelfID == "n0" {
			cfg.LogStore = LogStoreCommitLog
			cfg.EntryLog = entries
			cfg.Sequencer = &countingSeq{barrierOnTerm: true}
		}
	}, nil)
	lead := c.leader(10 * time.Second)
	if lead.ID() == "n0" {
		// n0's own entries cannot commit (no other node stores them): hand leadership over.
		if err := lead.raft.LeadershipTransfer().Error(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, func() error {
			if l := c.leader(10 * time.Second); l.ID() == "n0" {
				return fmt.Errorf("n0 still leads")
			}
			return nil
		})
		lead = c.leader(10 * time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 5; i++ {
		if _, err := lead.Apply(ctx, []byte(fmt.Sprintf("e%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	want := c.fsms[lead.ID()].(*testFSM).log()
	for id, f := range c.fsms {
		got := f.(*testFSM).log()
		switch {
		case id == "n0" && len(got) != 0:
			t.Errorf("n0 (commitlog store) applied %d entries of a raft-wal leader", len(got))
		case id != "n0":
			eventually(t, 10*time.Second, func() error {
				if n := len(f.(*testFSM).log()); n != len(want) {
					return fmt.Errorf("%s applied %d of %d", id, n, len(want))
				}
				return nil
			})
		}
	}
	if st := c.nodes["n0"].Status(); !strings.Contains(st.LogStoreMismatch, "dLegerLogStore") {
		t.Errorf("n0's status does not say why it refuses the leader's entries: %q", st.LogStoreMismatch)
	}
	if st := c.nodes[lead.ID()].Status(); st.LogStoreMismatch != "" {
		t.Errorf("the leader's status reports a mismatch: %q", st.LogStoreMismatch)
	}
	last, err := entries.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= last; i++ {
		var l raft.Log
		if err := entries.GetLog(i, &l); err == nil && l.Type == raft.LogCommand {
			t.Fatalf("n0's commitlog store holds command entry %d from a raft-wal leader", i)
		}
	}
}
