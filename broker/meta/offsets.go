package meta

import (
	"maps"
	"slices"
	"sync"

	"github.com/hashicorp/go-hclog"

	"rocketraft/protocol"
)

// tg keys the offset tables by (topic, group) without building the "topic@group" string, so
// Commit and Query allocate nothing once a queue is known.
type tg struct{ topic, group string }

// Offsets holds committed consumer offsets, persisted as config/consumerOffset.json
// (ConsumerOffsetSerializeWrapper, key "topic@group"), plus the last pull offsets, which are
// only kept in memory for consume statistics.
//
// Commits only change memory; Persist writes the file when something changed since the last
// successful Persist.
type Offsets struct {
	file jsonFile

	persistMu sync.Mutex // serializes Persist

	mu        sync.RWMutex
	committed map[tg]map[int32]int64
	pulled    map[tg]map[int32]int64
	changes   uint64 // bumped by every mutation of committed
	persisted uint64 // value of changes written by the last successful Persist
}

// OpenOffsets loads the offset table at path (or its backup). Java's unquoted queue-id keys are
// accepted; entries whose key lacks the '@' separator are skipped with a warning.
func OpenOffsets(path string, logger hclog.Logger) (*Offsets, error) {
	o := &Offsets{file: newJSONFile(path, logger), committed: map[tg]map[int32]int64{}, pulled: map[tg]map[int32]int64{}}
	var w protocol.ConsumerOffsetSerializeWrapper
	if _, err := o.file.load(&w); err != nil {
		return nil, err
	}
	for key, queues := range w.OffsetTable {
		topic, group, ok := protocol.SplitOffsetKey(key)
		if !ok {
			o.file.logger.Warn("skipping malformed consumer offset key", "key", key, "file", path)
			continue
		}
		o.committed[tg{topic, group}] = maps.Clone(queues)
	}
	return o, nil
}

// Commit records a consumer group's offset for one queue (in memory).
func (o *Offsets) Commit(group, topic string, queueID int32, offset int64) {
	o.mu.Lock()
	set(o.committed, tg{topic, group}, queueID, offset)
	o.changes++
	o.mu.Unlock()
}

// CommitAhead is Commit unless the committed offset is already beyond offset; it reports
// whether it committed.
func (o *Offsets) CommitAhead(group, topic string, queueID int32, offset int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if cur, ok := o.committed[tg{topic, group}][queueID]; ok && offset < cur {
		return false
	}
	set(o.committed, tg{topic, group}, queueID, offset)
	o.changes++
	return true
}

// ReplaceAll replaces every committed offset with w's (a Raft snapshot restore in DLedger mode).
// As for Commit, only memory changes; the next Persist writes the file. Malformed keys are
// skipped, as by OpenOffsets. Last pull offsets (statistics) are kept.
func (o *Offsets) ReplaceAll(w protocol.ConsumerOffsetSerializeWrapper) {
	committed := make(map[tg]map[int32]int64, len(w.OffsetTable))
	for key, queues := range w.OffsetTable {
		topic, group, ok := protocol.SplitOffsetKey(key)
		if !ok {
			o.file.logger.Warn("skipping malformed consumer offset key", "key", key)
			continue
		}
		committed[tg{topic, group}] = maps.Clone(queues)
	}
	o.mu.Lock()
	o.committed = committed
	o.changes++
	o.mu.Unlock()
}

// Query returns the committed offset of a queue and whether there is one.
func (o *Offsets) Query(group, topic string, queueID int32) (int64, bool) {
	o.mu.RLock()
	off, ok := o.committed[tg{topic, group}][queueID]
	o.mu.RUnlock()
	return off, ok
}

// SetPullOffset records the nextBeginOffset of a group's last pull (not persisted).
func (o *Offsets) SetPullOffset(group, topic string, queueID int32, offset int64) {
	o.mu.Lock()
	set(o.pulled, tg{topic, group}, queueID, offset)
	o.mu.Unlock()
}

// PullOffset returns the offset recorded by SetPullOffset and whether there is one.
func (o *Offsets) PullOffset(group, topic string, queueID int32) (int64, bool) {
	o.mu.RLock()
	off, ok := o.pulled[tg{topic, group}][queueID]
	o.mu.RUnlock()
	return off, ok
}

func set(m map[tg]map[int32]int64, k tg, queueID int32, offset int64) {
	q := m[k]
	if q == nil {
		q = map[int32]int64{}
		m[k] = q
	}
	q[queueID] = offset
}

// Persist writes the file if any committed offset changed since the last successful Persist.
func (o *Offsets) Persist() error {
	o.persistMu.Lock()
	defer o.persistMu.Unlock()
	o.mu.RLock()
	changes := o.changes
	if changes == o.persisted {
		o.mu.RUnlock()
		return nil
	}
	w := o.wrapperLocked()
	o.mu.RUnlock()
	if err := o.file.save(w); err != nil {
		o.file.logger.Error("cannot persist consumer offsets", "file", o.file.path, "error", err)
		return err
	}
	o.mu.Lock()
	o.persisted = changes
	o.mu.Unlock()
	return nil
}

// Wrapper returns a copy of the committed offsets, for GET_ALL_CONSUMER_OFFSET. DataVersion is
// left nil (4.x form).
func (o *Offsets) Wrapper() protocol.ConsumerOffsetSerializeWrapper {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.wrapperLocked()
}

func (o *Offsets) wrapperLocked() protocol.ConsumerOffsetSerializeWrapper {
	t := make(map[string]map[int32]int64, len(o.committed))
	for k, q := range o.committed {
		t[protocol.OffsetKey(k.topic, k.group)] = maps.Clone(q)
	}
	return protocol.ConsumerOffsetSerializeWrapper{OffsetTable: t}
}

// GroupsOfTopic returns the groups with committed offsets on topic, sorted.
func (o *Offsets) GroupsOfTopic(topic string) []string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	var out []string
	for k := range o.committed {
		if k.topic == topic {
			out = append(out, k.group)
		}
	}
	slices.Sort(out)
	return out
}

// TopicsOfGroup returns the topics on which group has committed offsets, sorted.
func (o *Offsets) TopicsOfGroup(group string) []string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	var out []string
	for k := range o.committed {
		if k.group == group {
			out = append(out, k.topic)
		}
	}
	slices.Sort(out)
	return out
}

// QueueOffsets returns a copy of group's committed offsets on topic by queue id (nil if none).
func (o *Offsets) QueueOffsets(group, topic string) map[int32]int64 {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return maps.Clone(o.committed[tg{topic, group}])
}

// DeleteTopic forgets every group's offsets on topic.
func (o *Offsets) DeleteTopic(topic string) {
	o.deleteWhere(func(k tg) bool { return k.topic == topic })
}

// DeleteGroup forgets all of group's offsets.
func (o *Offsets) DeleteGroup(group string) {
	o.deleteWhere(func(k tg) bool { return k.group == group })
}

// DeleteGroupTopic forgets group's offsets on one topic.
func (o *Offsets) DeleteGroupTopic(group, topic string) {
	o.deleteWhere(func(k tg) bool { return k.group == group && k.topic == topic })
}

func (o *Offsets) deleteWhere(match func(tg) bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k := range o.committed {
		if match(k) {
			delete(o.committed, k)
			o.changes++
		}
	}
	for k := range o.pulled {
		if match(k) {
			delete(o.pulled, k)
		}
	}
}
