package dledger

import (
	"bytes"
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// commitLogMark is the Extensions of every command entry a leader on the commitlog store
// proposes (propose.go). Such a leader stamps its entries' queue offsets (Config.Sequencer) and
// every node writes the records where the entry says; a node on raft-wal or bolt assigns the
// offsets as it applies and lays the commitlog out without entry headers. The two cannot serve
// one group: a node on the other store would apply the same entries differently and diverge
// without a word, so each entry says which kind of leader proposed it and storeGuard refuses the
// others. Four bytes, as it travels and is stored with every entry.
var commitLogMark = []byte("RRC1")

// EntryExtensions is what a leader whose Raft log store is logStore puts in the Extensions of the
// command entries it proposes (commitLogMark for the commitlog store, nothing for the others):
// for a test or a tool that speaks for a leader, whose entries the followers would refuse
// otherwise.
func EntryExtensions(logStore string) []byte {
	if logStore == LogStoreCommitLog {
		return commitLogMark
	}
	return nil
}

// storeGuard refuses to store a command entry proposed by a leader on the other kind of log store
// (commitLogMark), before anything is written: the entry is not acknowledged, Raft's leader backs
// off and retries, and this node logs why until its store is fixed. It wraps the store outside
// the disk-failure reporting, since a refusal is not a failed write.
type storeGuard struct {
	raft.LogStore
	commitLog bool // this node's store is the commitlog
	log       hclog.Logger
	warned    *atomic.Bool
	// refusing holds the last refusal while the leader's entries are refused (Status shows it),
	// nil once command entries pass again.
	refusing *atomic.Pointer[string]
}

func newStoreGuard(s raft.LogStore, commitLog bool, log hclog.Logger) storeGuard {
	return storeGuard{LogStore: s, commitLog: commitLog, log: log, warned: new(atomic.Bool), refusing: new(atomic.Pointer[string])}
}

// refusal is the last refusal while this node refuses its leader's entries, "" otherwise.
func (g storeGuard) refusal() string {
	if p := g.refusing.Load(); p != nil {
		return *p
	}
	return ""
}

// StoreLog implements raft.LogStore.
func (g storeGuard) StoreLog(l *raft.Log) error { return g.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore.
func (g storeGuard) StoreLogs(logs []*raft.Log) error {
	commands, err := g.check(logs)
	if err != nil {
		if !g.warned.Swap(true) {
			g.log.Error("RAFT LOG STORE MISMATCH: refusing the leader's entries; set the same dLegerLogStore on every node of the group", "error", err)
		}
		msg := err.Error()
		g.refusing.Store(&msg)
		return err
	}
	if commands && g.refusing.Load() != nil {
		g.refusing.Store(nil)
	}
	return g.LogStore.StoreLogs(logs)
}

// check finds the first command entry whose proposer's store differs from this node's; commands
// says whether logs held any command entry.
func (g storeGuard) check(logs []*raft.Log) (commands bool, err error) {
	for _, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		commands = true
		if marked := bytes.Equal(l.Extensions, commitLogMark); marked != g.commitLog {
			mine, theirs := LogStoreCommitLog, "wal or bolt"
			if !g.commitLog {
				mine, theirs = theirs, mine
			}
			return true, fmt.Errorf("dledger: raft entry %d (term %d) was proposed by a leader whose dLegerLogStore is %s, this node's is %s: %w", l.Index, l.Term, theirs, mine, ErrLogStoreMismatch)
		}
	}
	return commands, nil
}

// IsMonotonic passes on the store's answer (see logCache.IsMonotonic).
func (g storeGuard) IsMonotonic() bool {
	m, ok := g.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}
