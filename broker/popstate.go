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

	"rocketraft/broker/meta"
	"rocketraft/broker/pop"
	"rocketraft/config"
	"rocketraft/fsm"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// metaPopFile names the POP table in a metadata snapshot (and classic mode's file).
const metaPopFile = "popState.json"

// popDeps are what POP needs from the rest of the broker, wired in New. The service is built
// before the place opens (Raft's replay applies POP ops to its table), so the store and the
// metadata change path come as func values that reach the place only when called.
type popDeps struct {
	cfg    *config.Broker
	topics *meta.Topics
	stats  *stats
	// acquire hands out the store for reads (Broker.acquireStore).
	acquire func() (*storage.Store, func(), error)
	// commit makes a POP op happen through the place (tables.changeMeta): through Raft in
	// DLedger mode, directly in classic mode; both end in apply.
	commit func(op *fsm.MetaOp) error
	// forwardOrRefuse relays a request that reached a DLedger follower to the leader.
	forwardOrRefuse func(conn *remoting.Conn, req *remoting.Command) *remoting.Command
	// refuseBadNames answers an invalid group or topic name (names.go).
	refuseBadNames func(req *remoting.Command, checks ...nameCheck) *remoting.Command
	// groupOrCreate, committedOffset and commitOffset are the metadata change path
	// (metachange.go): the group a POP names, where a queue never popped starts, and the
	// group's consumer offset an ACK moves.
	groupOrCreate   func(name string) (*protocol.SubscriptionGroupConfig, error)
	committedOffset func(group, topic string, qid int32) (int64, bool)
	commitOffset    func(group, topic string, qid int32, off int64)
	// stop ends the long polls still waiting when the broker closes.
	stop <-chan struct{}
}

// popService serves POP consumption (pop.go) and holds its table. mu serialises decisions with
// their proposals, so two POPs never hand out the same message and an ACK is checked against the
// state it changes.
type popService struct {
	popDeps
	mu    sync.Mutex
	table *pop.Table
	rr    atomic.Uint32 // round robin over queues for queueId -1
	path  string        // classic mode's file; "" in DLedger mode
	dirty atomic.Bool
}

// newPopService builds the service over deps; classic mode loads the table saved in configDir.
func newPopService(deps popDeps, configDir string, classic bool) (*popService, error) {
	s := &popService{popDeps: deps, table: pop.NewTable()}
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
