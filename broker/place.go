package broker

import (
	"context"
	"errors"
	"time"

	"rocketraft/config"
	"rocketraft/fsm"
	"rocketraft/metrics"
	"rocketraft/storage"
)

// place is this node's place in its group, decided once in New (newPlace): a classic broker
// (classicPlace: its own store, a configured master or slave, metadata changed in its own tables)
// or a member of a Raft group (raftPlace: a replicated store, a role Raft decides, metadata
// changed through the log). Everything that differs between the two modes is a method here, so
// the rest of the package asks the place instead of testing the mode.
type place interface {
	// CommitLog appends a send's records: straight into the store, or through the Raft batcher.
	CommitLog

	// acquire returns the store reads go to and the function that gives it back (see
	// Broker.acquireStore for the rules).
	acquire() (*storage.Store, func(), error)

	// change makes one metadata change happen (topics, groups, locks, POP state): applied to
	// the tables at once, with their persistence error, or proposed through Raft and answered
	// once applied on this node. A caller that checks before it changes holds the name's lock
	// (tables.names or queueLocks.mu) across the check and the change.
	change(ctx context.Context, op *fsm.MetaOp) error
	// deliver makes one delay-scheduler step happen: its records appended and the level's
	// progress moved (schedule.go), as one change.
	deliver(ctx context.Context, s *fsm.ScheduleDeliver) error
	// decides reports whether this node may change metadata now: a classic node always (its
	// tables are its own), a Raft member only as the ready leader.
	decides() bool
	// master reports whether this node acts as its group's master now: delivers delayed
	// messages, resolves transactions (a classic master, or the ready Raft leader).
	master() bool
	// forwardsWrites reports whether a write that reaches this node while it is not the master
	// is forwarded to the master (a Raft member; forward.go). Such a node also waits for
	// producers to move away before it closes (shutdown.go).
	forwardsWrites() bool
	// leaderID names the group's leader and this node's id when the place knows them ("" ids:
	// none known; classic mode never does).
	leaderID() (leader, self string)
	// registers reports whether this node has a role to register with the name servers yet.
	registers() bool
	// leaderSince is when this node last became the master its clients may take over locks
	// from (locks.go): the zero time for a classic node, whose table is its own.
	leaderSince() time.Time

	// haPart is this node's part in classic HA replication (ha.go).
	haPart() haPart

	// commitOffset records a consumer offset (ahead: never move it back). The returned wait
	// blocks until the commit is durable in the group (Raft: its entry applied); it is never
	// nil.
	commitOffset(o fsm.OffsetCommit, ahead bool) (wait func(context.Context) error)
	// queryOffset is the offset QUERY_CONSUMER_OFFSET answers: on a Raft leader, after the
	// commits queued before the query settled.
	queryOffset(group, topic string, qid int32) (int64, bool)
	// latestOffset is this node's latest view of an offset for internal readers (commits still
	// queued on a Raft leader win over the table).
	latestOffset(group, topic string, qid int32) (int64, bool)

	// roleName, brokerID and writable describe the node to the name servers and clients.
	roleName() string
	brokerID() int64
	writable() (ok bool, remark string)
	// onRoleChange subscribes fn to role changes (called on the place's watcher goroutine,
	// after the change); a classic node's role never changes.
	onRoleChange(fn func(role int32))
	// leave takes the node out of service (a failed disk): no more writes or registrations.
	leave()
	// raft is the Raft group's administration (membership, status, digests), or errNotRaft.
	raft() (*raftPlace, error)
	// newApplyHistogram is the histogram replicated appends are timed into (metrics.go); nil
	// when appends are not replicated.
	newApplyHistogram() *metrics.Histogram

	// start runs the place's background work (the Raft role watch) until b stops; close hands
	// off and stops it, then closes the store (the table flush runs between, see flush).
	start(b *Broker)
	handOff()
	close(flushTables func()) error
}

// haPart is what a node does in classic HA replication (ha.go).
type haPart int

const (
	haMaster      haPart = iota // classic master: serves slaves from start
	haSlave                     // classic slave: copies its master's commitlog and metadata
	haWhileLeader               // Raft member: serves legacy slaves while it is the ready leader
)

// errNotRaft answers the Raft administration requests on a classic broker.
var errNotRaft = errors.New("this broker is not in DLedger mode (enableDLegerCommitLog=false)")

// placeSpec is the mode decided once, before anything opens: where the metadata tables live and
// how the commitlog opens. newPlace is the only place that reads enableDLegerCommitLog.
type placeSpec struct {
	// configDir holds the metadata tables' files.
	configDir string
	// ownsTables: the tables are this node's own (classic), saved by the broker, and its POP
	// state is a file of its own; false: Raft's, restored from its snapshot and log.
	ownsTables bool
	// ha is the node's part in classic HA replication (the place's haPart, known before it opens:
	// the replication service is built first, since the store notifies it).
	ha   haPart
	open func(b *Broker) (place, error)
}

// newPlace decides the mode from the configuration.
func newPlace(cfg *config.Broker) placeSpec {
	if cfg.EnableDLegerCommitLog {
		return placeSpec{configDir: raftConfigDir(cfg), ha: haWhileLeader, open: openRaftPlace}
	}
	return placeSpec{configDir: classicConfigDir(cfg), ownsTables: true, ha: classicHAPart(cfg), open: openClassicPlace}
}

// noWait is the wait of a commit that is durable when it returns.
func noWait(context.Context) error { return nil }
