package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/clients"
	"rocketraft/broker/meta"
	"rocketraft/broker/pop"
	"rocketraft/config"
	"rocketraft/fsm"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// Replicated metadata (DLedger mode).
//
// Topic configs, subscription groups and consumer offsets are Raft entries (fsm.KindMetadata), so
// a new leader knows every topic and group the old one acknowledged and consumers resume where
// they committed. The leader proposes a MetaOp and answers once it is committed and applied on
// the leader (offsets: once queued, see offsetBatcher); every node applies it to its tables
// through tables, the fsm.MetaApplier below. A follower never writes a table itself: admin
// writes and UPDATE_CONSUMER_OFFSET are forwarded to the leader (forward.go), heartbeat- and
// pull-driven group creation is left to the leader (the consumer heartbeats every broker of its
// route, the leader included) and the pull commit bit is ignored, as a Java slave does.
//
// Classic mode takes the same path: the helpers here call the place (place.go), whose classic
// implementation applies each change to the tables at once through the same applyChange.
//
// tables owns that path: the tables themselves, the name locks that serialise a check with its
// change, the order of a client's offset commits, and the helpers the request handlers call
// (ensureTopic, groupOrCreate, commitOffset, ...). Broker keeps its own pointers to the tables
// for the many readers; every writer goes through tables.

// metaTimeout bounds one metadata proposal.
const metaTimeout = 5 * time.Second

// tables is the broker's metadata tables with the one path that changes them: it applies each
// committed change (fsm.MetaApplier and fsm.ScheduleApplier, so the state machine drives it with
// no Broker behind it) and offers the handlers the checked changes they make through the place.
// Its dependencies are wired in New; place is set once the place opened, since opening it
// (classic: apply, Raft: the state machine) needs the tables first.
type tables struct {
	cfg    *config.Broker
	logger hclog.Logger

	topics  *meta.Topics
	groups  *meta.Groups
	offsets *meta.Offsets
	delays  *meta.DelayOffsets
	// clients holds the queue locks (applied and snapshotted here, decided in locks.go).
	clients *clients.Manager
	// popTable is POP's in-flight table, which topic and group deletes clear and snapshots
	// carry; applyPop applies the POP ops to it (popService.apply, popstate.go).
	popTable *pop.Table
	applyPop func(op *fsm.MetaOp) error
	// topicsChanged tells the name servers' registration that the topic table changed
	// (registrar.trigger, register.go).
	topicsChanged func()

	// place makes a change happen (place.change) and records offsets; nil until New sets it.
	place place
	// names serialises the changes of one topic or group (check, change; namelocks.go).
	names nameLocks
	// order keeps each client's offset commits of a queue in arrival order (commitorder.go).
	order commitOrder
}

var (
	_ fsm.MetaApplier     = (*tables)(nil)
	_ fsm.ScheduleApplier = (*tables)(nil)
)

// Names of the metadata files in a snapshot (as in the store's config/ directory).
const (
	metaTopicsFile  = "topics.json"
	metaGroupsFile  = "subscriptionGroup.json"
	metaOffsetsFile = "consumerOffset.json"
	metaLocksFile   = "queueLocks.json" // ours: orderly-consumption locks (locks.go)
)

// ApplyMeta applies one committed operation with the entry's time (applyChange). A failed file
// save is only logged by the table (the Raft log is the source of truth), so it is not reported
// as the operation's outcome.
func (t *tables) ApplyMeta(op *fsm.MetaOp) error {
	_, err := t.applyChange(op)
	return err
}

// applyChange applies one metadata change to the tables: every change in both modes ends here
// (classicPlace.change calls it at once, ApplyMeta once Raft committed the change).
// Table methods are deterministic given op.Now. err says the change itself is invalid; saveErr
// that a table could not be saved to its file (classic mode reports it to the client).
func (t *tables) applyChange(op *fsm.MetaOp) (saveErr, err error) {
	now := time.UnixMilli(op.Now)
	switch op.Op {
	case fsm.OpPutTopic:
		if op.Topic == nil || op.Topic.TopicName == "" {
			return nil, fmt.Errorf("%w: topic config without a name", meta.ErrInvalid)
		}
		saveErr = t.topics.PutAt(op.Topic, now)
		t.topicsChanged()
	case fsm.OpDeleteTopic:
		var existed bool
		if existed, saveErr = t.topics.DeleteAt(op.Name, now); existed {
			t.topicsChanged()
		}
		t.offsets.DeleteTopic(op.Name)
		t.popTable.DeleteTopic(op.Name)
	case fsm.OpPutGroup:
		if op.Group == nil || op.Group.GroupName == "" {
			return nil, fmt.Errorf("%w: group config without a name", meta.ErrInvalid)
		}
		saveErr = t.groups.PutAt(op.Group, now)
	case fsm.OpDeleteGroup:
		_, saveErr = t.groups.DeleteAt(op.Name, now)
		if !op.KeepOffsets {
			t.offsets.DeleteGroup(op.Name)
		}
		t.popTable.DeleteGroup(op.Name)
	case fsm.OpCommitOffsets:
		// Overwrite in log order: an offset may legitimately move back (an operator's reset).
		// Every replica applies the same sequence, so they agree.
		for _, o := range op.Offsets {
			t.offsets.Commit(o.Group, o.Topic, o.QueueID, o.Offset)
		}
	case fsm.OpLockQueues:
		t.clients.GrantLocks(op.Lock.Group, op.Lock.ClientID, op.Lock.Queues, now)
	case fsm.OpUnlockQueues:
		t.clients.UnlockBatch(op.Lock.Group, op.Lock.ClientID, op.Lock.Queues)
	case fsm.OpPopMessages, fsm.OpPopAck, fsm.OpPopChange:
		return nil, t.applyPop(op)
	default:
		return nil, fmt.Errorf("unknown metadata op %q", op.Op)
	}
	return saveErr, nil
}

// SnapshotMeta serializes the tables: topics, groups, consumer offsets, the delay
// scheduler's progress (schedule.go), queue locks and the POP in-flight table (popstate.go).
func (t *tables) SnapshotMeta() ([]fsm.MetaFile, error) {
	topics, err := protocol.Encode(t.topics.Wrapper())
	if err != nil {
		return nil, fmt.Errorf("encode topics: %w", err)
	}
	groups, err := protocol.Encode(t.groups.Wrapper())
	if err != nil {
		return nil, fmt.Errorf("encode subscription groups: %w", err)
	}
	offsets, err := protocol.Encode(t.offsets.Wrapper())
	if err != nil {
		return nil, fmt.Errorf("encode consumer offsets: %w", err)
	}
	delays, err := protocol.Encode(t.delays.Wrapper())
	if err != nil {
		return nil, fmt.Errorf("encode delay offsets: %w", err)
	}
	locks, err := json.Marshal(t.clients.LockRecords())
	if err != nil {
		return nil, fmt.Errorf("encode queue locks: %w", err)
	}
	pops, err := json.Marshal(t.popTable)
	if err != nil {
		return nil, fmt.Errorf("encode POP state: %w", err)
	}
	return []fsm.MetaFile{{Name: metaTopicsFile, Data: topics}, {Name: metaGroupsFile, Data: groups},
		{Name: metaOffsetsFile, Data: offsets}, {Name: delayOffsetFile, Data: delays}, {Name: metaLocksFile, Data: locks},
		{Name: metaPopFile, Data: pops}}, nil
}

// RestoreMeta replaces the tables with a snapshot's (nil: empty tables), then adds this
// broker's system topics where missing: they derive from configuration every member of a group
// shares (cluster and broker name), so the leader's snapshot already holds them and the add is a
// no-op except on the empty tables of a start (fsm.New), before Raft's restore and replay.
func (t *tables) RestoreMeta(files []fsm.MetaFile) error {
	tw := protocol.TopicConfigSerializeWrapper{DataVersion: protocol.NewDataVersion()}
	gw := protocol.SubscriptionGroupWrapper{DataVersion: protocol.NewDataVersion()}
	var ow protocol.ConsumerOffsetSerializeWrapper
	var dw meta.DelayOffsetWrapper
	var locks []clients.LockRecord
	var pops []pop.QueueRecord
	for _, f := range files {
		var err error
		switch f.Name {
		case metaTopicsFile:
			err = protocol.Decode(f.Data, &tw)
		case metaGroupsFile:
			err = protocol.Decode(f.Data, &gw)
		case metaOffsetsFile:
			err = protocol.Decode(f.Data, &ow)
		case delayOffsetFile:
			err = protocol.Decode(f.Data, &dw)
		case metaLocksFile:
			err = json.Unmarshal(f.Data, &locks)
		case metaPopFile:
			err = json.Unmarshal(f.Data, &pops)
		default:
			t.logger.Warn("snapshot holds an unknown metadata file; ignored", "name", f.Name)
		}
		if err != nil {
			return fmt.Errorf("decode %s: %w", f.Name, err)
		}
	}
	// The file saves are logged by the tables; memory is what serves, and Raft can rebuild it.
	_ = t.topics.ReplaceAll(tw)
	_ = t.groups.ReplaceAll(gw)
	t.offsets.ReplaceAll(ow)
	t.delays.ReplaceAll(dw)
	t.clients.RestoreLocks(locks)
	t.popTable.Restore(pops)
	if _, err := t.topics.EnsureTopics(t.systemTopics(), time.UnixMilli(tw.DataVersion.Timestamp)); err != nil {
		t.logger.Warn("system topics after a metadata restore", "error", err)
	}
	t.topicsChanged()
	return nil
}

// DelayOffset implements fsm.ScheduleApplier: the replicated progress table of the delay
// scheduler (schedule.go).
func (t *tables) DelayOffset(level int32) int64 { return t.delays.Get(level) }

// ApplyDelayOffset implements fsm.ScheduleApplier.
func (t *tables) ApplyDelayOffset(level int32, offset int64) { t.delays.Set(level, offset) }

// systemTopics are the topics every broker of this name and cluster has (meta.SystemTopics).
func (t *tables) systemTopics() []*protocol.TopicConfig {
	return meta.SystemTopics(t.cfg.BrokerClusterName, t.cfg.BrokerName, t.cfg.AutoCreateTopicEnable, int32(t.cfg.DefaultTopicQueueNums))
}

// errNotLeaderMeta is returned by the metadata helpers on a DLedger follower.
var errNotLeaderMeta = errors.New("this node is not the Raft leader; metadata changes go through the leader")

// lockName locks the changes of the named topic or group (kind "topic" or "group") for a caller
// that checks before it changes, and returns the unlock.
func (t *tables) lockName(kind, name string) (unlock func()) {
	return t.names.lock(kind, name)
}

// changeMeta makes op happen through the place (place.change), bounded by metaTimeout.
func (t *tables) changeMeta(op *fsm.MetaOp) error {
	ctx, cancel := context.WithTimeout(context.Background(), metaTimeout)
	defer cancel()
	return t.place.change(ctx, op)
}

// answerChange makes op happen under the lock of the named topic or group (names, kind "topic"
// or "group") and answers the admin request: SUCCESS, or the failure as what.
func (t *tables) answerChange(req *remoting.Command, what, kind, name string, op *fsm.MetaOp) *remoting.Command {
	unlock := t.names.lock(kind, name)
	err := t.changeMeta(op)
	unlock()
	if err != nil {
		return metaErrorResponse(req, what, err)
	}
	return req.NewResponse(remoting.Success, "")
}

// ensureTopic stores tc unless a topic of that name exists (%RETRY%, %DLQ% topics) and returns
// the existing or new config. Only a node that decides (place.decides) creates
// (errNotLeaderMeta otherwise); changes for one name are serialised by names (namelocks.go) and
// the table is checked again under it, so concurrent creations of one topic change it once and
// never overwrite an admin's config.
func (t *tables) ensureTopic(tc *protocol.TopicConfig) (*protocol.TopicConfig, bool, error) {
	if err := message.ValidateTopic(tc.TopicName); err != nil {
		return nil, false, fmt.Errorf("create topic: %w", err)
	}
	if old := t.topics.Get(tc.TopicName); old != nil {
		return old, false, nil
	}
	if !t.place.decides() {
		return nil, false, errNotLeaderMeta
	}
	defer t.names.lock("topic", tc.TopicName)()
	if old := t.topics.Get(tc.TopicName); old != nil {
		return old, false, nil
	}
	if err := t.changeMeta(&fsm.MetaOp{Op: fsm.OpPutTopic, Topic: tc}); err != nil {
		return nil, false, err
	}
	return t.topics.Get(tc.TopicName), true, nil
}

// createTopicFromDefault is send-time auto-creation: the config derived from defaultTopic
// (meta.Topics.FromDefault), created through ensureTopic. nil, false, nil: nothing may be
// created.
func (t *tables) createTopicFromDefault(topic, defaultTopic string, queueNums, sysFlag int32) (*protocol.TopicConfig, bool, error) {
	if err := message.ValidateTopic(topic); err != nil {
		return nil, false, fmt.Errorf("create topic: %w", err)
	}
	if old := t.topics.Get(topic); old != nil {
		return old, false, nil
	}
	tc := t.topics.FromDefault(topic, defaultTopic, queueNums, sysFlag)
	if tc == nil {
		return nil, false, nil
	}
	got, created, err := t.ensureTopic(tc)
	if created {
		t.logger.Info("auto-created topic", "topic", topic, "default_topic", defaultTopic, "queues", tc.WriteQueueNums, "perm", protocol.PermString(tc.Perm))
	}
	return got, created, err
}

// groupOrCreate returns a subscription group's config, creating it with the defaults when
// autoCreateSubscriptionGroup allows. On a DLedger follower nothing is written: a missing group
// is answered with the defaults it would get (not stored), and the leader creates it when the
// consumer's heartbeat or pull reaches it.
func (t *tables) groupOrCreate(name string) (*protocol.SubscriptionGroupConfig, error) {
	if err := message.ValidateGroup(name); err != nil {
		return nil, fmt.Errorf("subscription group: %w", err)
	}
	if gc := t.groups.Get(name); gc != nil || !t.cfg.AutoCreateSubscriptionGroup {
		return gc, nil
	}
	if name == "" {
		return nil, fmt.Errorf("%w: empty group name", meta.ErrInvalid)
	}
	if !t.place.decides() {
		return protocol.NewSubscriptionGroupConfig(name), nil
	}
	defer t.names.lock("group", name)()
	if gc := t.groups.Get(name); gc != nil {
		return gc, nil
	}
	if err := t.changeMeta(&fsm.MetaOp{Op: fsm.OpPutGroup, Group: protocol.NewSubscriptionGroupConfig(name)}); err != nil {
		return nil, err
	}
	t.logger.Info("auto-created subscription group", "group", name)
	return t.groups.Get(name), nil
}

// commitOffset records a consumer offset through the place (place.commitOffset): in memory in
// classic mode (persisted periodically); in DLedger mode, on the leader, queued for the next
// commitOffsets entry, and dropped on a follower.
func (t *tables) commitOffset(group, topic string, qid int32, off int64) {
	t.commitOffsetFrom(commitOrigin{}, group, topic, qid, off)
}

// commitOffsetFrom is commitOffset for a commit a client's request carried (o, see commitOrder):
// dropped if a later request of the same connection already committed the queue.
func (t *tables) commitOffsetFrom(o commitOrigin, group, topic string, qid int32, off int64) {
	if !t.validOffsetNames(group, topic) {
		return
	}
	t.commitInOrder(o, fsm.OffsetCommit{Group: group, Topic: topic, QueueID: qid, Offset: off}, false)
}

// commitPullOffset records the commit offset a pull carries, but never moves the queue's offset
// back. A client builds each pull with its current offset, and the pull is served concurrently
// with the UPDATE_CONSUMER_OFFSET requests of the same connection, so a pull built before the
// client's last persist can be served after it and would undo it (the chaos suite's offset
// watcher caught one such step back, with no failover near it). Deliberate moves back (resets)
// come as UPDATE_CONSUMER_OFFSET or through the broker's own reset, which still overwrite. The
// reverse (a persist built before the pull, served after it) is commitOrder's: o is the pull's.
func (t *tables) commitPullOffset(o commitOrigin, group, topic string, qid int32, off int64) {
	if !t.validOffsetNames(group, topic) {
		return
	}
	t.commitInOrder(o, fsm.OffsetCommit{Group: group, Topic: topic, QueueID: qid, Offset: off}, true)
}

// commitInOrder records c through the place (ahead: never moving the queue back) unless a later
// request of o's connection already committed the queue (commitOrder). ok reports whether it
// recorded; wait then blocks until the commit is durable (place.commitOffset).
func (t *tables) commitInOrder(o commitOrigin, c fsm.OffsetCommit, ahead bool) (wait func(context.Context) error, ok bool) {
	ok = t.order.apply(offsetKey{c.Group, c.Topic, c.QueueID}, o, func() {
		wait = t.place.commitOffset(c, ahead)
	})
	return wait, ok
}

// validOffsetNames is commitOffset's last check (names.go): the request handlers refuse invalid
// names before they get here, so one that arrives anyway is dropped with a log line.
func (t *tables) validOffsetNames(group, topic string) bool {
	err := message.ValidateGroup(group)
	if err == nil {
		err = message.ValidateTopic(topic)
	}
	if err != nil {
		t.logger.Warn("consumer offset not recorded: invalid name", "group", group, "topic", topic, "error", err)
		return false
	}
	return true
}

// committedOffset is this node's latest view of a group's offset for internal readers
// (transaction checks, POP, resets, status): on the DLedger leader its own commits still queued
// or in flight in the batcher win over the replicated table.
func (t *tables) committedOffset(group, topic string, qid int32) (int64, bool) {
	return t.place.latestOffset(group, topic, qid)
}

// metaErrorResponse answers a failed metadata proposal with the code clients react to correctly
// (errorCode: not leader -> 14, outcome unknown -> 1).
func metaErrorResponse(req *remoting.Command, what string, err error) *remoting.Command {
	code, remark := errorCode(err)
	if errors.Is(err, meta.ErrInvalid) {
		code = remoting.InvalidParameter
	}
	return req.NewResponse(code, what+": "+remark)
}
