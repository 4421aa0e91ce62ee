package broker

// POP state (broker/pop.Table) and how it changes: every change is an fsm.MetaOp (OpPopMessages,
// OpPopAck, OpPopChange); orderly POP (pop.go) uses the same ops. DLedger mode: the leader proposes it through Raft and answers once it
// is applied, so a POP, ACK or CHANGE the client saw survives a failover; every replica applies
// it through tables and the table is a file of the metadata snapshot. Classic mode: the op
// is applied directly and the table is saved to config/popState.json with the consumer offsets.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"rocketraft/broker/pop"
	"rocketraft/fsm"
)

// metaPopFile names the POP table in a metadata snapshot (and classic mode's file).
const metaPopFile = "popState.json"

// popService holds the POP table. mu serialises decisions with their proposals, so two POPs
// never hand out the same message and an ACK is checked against the state it changes.
type popService struct {
	b     *Broker
	mu    sync.Mutex
	table *pop.Table
	rr    atomic.Uint32 // round robin over queues for queueId -1
	path  string        // classic mode's file; "" in DLedger mode
	dirty atomic.Bool
}

func newPopService(b *Broker, configDir string, classic bool) (*popService, error) {
	s := &popService{b: b, table: pop.NewTable()}
	if !classic {
		return s, nil
	}
	s.path = filepath.Join(configDir, metaPopFile)
	data, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read POP state: %w", err)
	}
	if err := json.Unmarshal(data, s.table); err != nil {
		return nil, fmt.Errorf("decode POP state %s: %w", s.path, err)
	}
	return s, nil
}

// commit makes op happen through the place: through Raft in DLedger mode, directly in classic
// mode (both end in apply, through tables.applyChange).
func (s *popService) commit(op *fsm.MetaOp) error { return s.b.tables.changeMeta(op) }

// apply changes the table; every replica calls it with the same ops in the same order.
func (s *popService) apply(op *fsm.MetaOp) error {
	p := op.Pop
	if p == nil {
		return fmt.Errorf("%s without its POP fields", op.Op)
	}
	k := pop.Key{Group: p.Group, Topic: p.Topic, QueueID: p.QueueID}
	switch op.Op {
	case fsm.OpPopMessages:
		s.table.Pop(k, p.From, p.Next, p.Offsets, p.PopTime, p.InvisibleTime)
		for _, off := range p.Dropped {
			if e, ok := s.table.Get(k, off); ok {
				s.table.Ack(k, off, e.PopTime)
			}
		}
	case fsm.OpPopAck:
		// One offset from ACK_MESSAGE, several (one checkpoint's) from BATCH_ACK_MESSAGE.
		for _, off := range p.Offsets {
			s.table.Ack(k, off, p.PopTime)
		}
	case fsm.OpPopChange:
		s.table.Change(k, p.Offsets[0], p.PopTime, op.Now, p.InvisibleTime)
	default:
		return fmt.Errorf("not a POP op: %q", op.Op)
	}
	s.dirty.Store(true)
	return nil
}

// persist saves classic mode's table when it changed.
func (s *popService) persist() error {
	if s.path == "" || !s.dirty.Swap(false) {
		return nil
	}
	data, err := json.Marshal(s.table)
	if err != nil {
		return fmt.Errorf("encode POP state: %w", err)
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		s.dirty.Store(true)
		return fmt.Errorf("write POP state: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		s.dirty.Store(true)
		return fmt.Errorf("save POP state: %w", err)
	}
	return nil
}
