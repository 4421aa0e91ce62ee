package meta

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/protocol"
)

// Topics is the broker's topic table, persisted as config/topics.json
// (TopicConfigSerializeWrapper). Every change bumps the table's DataVersion, which the name
// server compares to decide whether to rebuild the broker's queue data.
type Topics struct {
	file  jsonFile
	saver *saver

	mu         sync.RWMutex
	table      map[string]*protocol.TopicConfig
	version    protocol.DataVersion
	gen        uint64 // bumped by every change (saver)
	autoCreate bool
}

// OpenTopics loads the topic table at path (or its backup); a missing file gives an empty table
// with a fresh DataVersion.
func OpenTopics(path string, logger hclog.Logger) (*Topics, error) {
	t := &Topics{file: newJSONFile(path, logger), table: map[string]*protocol.TopicConfig{}, autoCreate: true}
	t.saver = &saver{file: t.file, what: "topic table", snapshot: func() (any, uint64) {
		t.mu.RLock()
		defer t.mu.RUnlock()
		return t.wrapperLocked(), t.gen
	}}
	var w protocol.TopicConfigSerializeWrapper
	found, err := t.file.load(&w)
	if err != nil {
		return nil, err
	}
	if !found {
		t.version = protocol.NewDataVersion()
		return t, nil
	}
	for name, tc := range w.TopicConfigTable {
		if tc == nil {
			continue
		}
		c := cloneTopic(tc)
		if c.TopicName == "" {
			c.TopicName = name
		}
		t.table[name] = c
	}
	t.version = w.DataVersion
	return t, nil
}

// SetAutoCreateTopicEnable mirrors the broker's autoCreateTopicEnable (default true). When it is
// false, CreateFromDefault treats TBW102 as not inheritable, as Java does (§10.5), so sends to
// unknown topics fail with TOPIC_NOT_EXIST even if an old TBW102 is still in the table.
func (t *Topics) SetAutoCreateTopicEnable(enabled bool) {
	t.mu.Lock()
	t.autoCreate = enabled
	t.mu.Unlock()
}

// Get returns a copy of the named topic's config, or nil if absent.
func (t *Topics) Get(name string) *protocol.TopicConfig {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if tc, ok := t.table[name]; ok {
		return cloneTopic(tc)
	}
	return nil
}

// Lookup copies the topic's configuration into *dst and reports whether the topic exists. Unlike
// Get it allocates nothing, which matters to the send path that reads its topic per message:
// dst.Attributes is then the table's own map, which the caller must only read (an entry is
// never changed in place; an update stores a new one).
func (t *Topics) Lookup(name string, dst *protocol.TopicConfig) bool {
	t.mu.RLock()
	tc, ok := t.table[name]
	if ok {
		*dst = *tc
	}
	t.mu.RUnlock()
	return ok
}

// Exists reports whether the topic is in the table, without copying it.
func (t *Topics) Exists(name string) bool {
	t.mu.RLock()
	_, ok := t.table[name]
	t.mu.RUnlock()
	return ok
}

// Put creates or replaces a topic config, bumps the DataVersion and persists.
func (t *Topics) Put(tc *protocol.TopicConfig) error { return t.PutAt(tc, time.Now()) }

// PutAt is Put with the DataVersion timestamp given (deterministic replay).
func (t *Topics) PutAt(tc *protocol.TopicConfig, now time.Time) error {
	if tc == nil || tc.TopicName == "" {
		return fmt.Errorf("%w: topic config without a name", ErrInvalid)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.table[tc.TopicName] = cloneTopic(tc)
	return t.changedLocked(now)
}

// Delete removes a topic; it reports whether the topic existed. Deleting an absent topic changes
// nothing (no version bump, no write).
func (t *Topics) Delete(name string) (bool, error) { return t.DeleteAt(name, time.Now()) }

// DeleteAt is Delete with the DataVersion timestamp given.
func (t *Topics) DeleteAt(name string, now time.Time) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.table[name]; !ok {
		return false, nil
	}
	delete(t.table, name)
	return true, t.changedLocked(now)
}

// Names returns the topic names, sorted.
func (t *Topics) Names() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return slices.Sorted(maps.Keys(t.table))
}

// Wrapper returns a deep copy of the table with its DataVersion, for REGISTER_BROKER and
// GET_ALL_TOPIC_CONFIG.
func (t *Topics) Wrapper() protocol.TopicConfigSerializeWrapper {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.wrapperLocked()
}

func (t *Topics) wrapperLocked() protocol.TopicConfigSerializeWrapper {
	m := make(map[string]*protocol.TopicConfig, len(t.table))
	for k, v := range t.table {
		m[k] = cloneTopic(v)
	}
	return protocol.TopicConfigSerializeWrapper{TopicConfigTable: m, DataVersion: t.version}
}

// DataVersion returns the table's current version.
func (t *Topics) DataVersion() protocol.DataVersion {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.version
}

// CreateFromDefault implements send-time auto-creation (§10.5, Java
// createTopicInSendMessageMethod). An existing topic is returned as is (created=false).
// Otherwise, if defaultTopic exists and has PermInherit, topic is created with
// min(clientQueueNums, default.WriteQueueNums) read and write queues (never negative),
// perm = default.Perm without PermInherit, the default's filter type and the given sysFlag.
// With autoCreateTopicEnable off, TBW102 counts as not inheritable. When nothing is created the
// result is nil, false, nil.
func (t *Topics) CreateFromDefault(topic, defaultTopic string, clientQueueNums, topicSysFlag int32) (*protocol.TopicConfig, bool, error) {
	return t.CreateFromDefaultAt(topic, defaultTopic, clientQueueNums, topicSysFlag, time.Now())
}

// CreateFromDefaultAt is CreateFromDefault with the DataVersion timestamp given.
func (t *Topics) CreateFromDefaultAt(topic, defaultTopic string, clientQueueNums, topicSysFlag int32, now time.Time) (*protocol.TopicConfig, bool, error) {
	if topic == "" {
		return nil, false, fmt.Errorf("%w: empty topic name", ErrInvalid)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if tc, ok := t.table[topic]; ok {
		return cloneTopic(tc), false, nil
	}
	tc := t.fromDefaultLocked(topic, defaultTopic, clientQueueNums, topicSysFlag)
	if tc == nil {
		return nil, false, nil
	}
	t.table[topic] = tc
	t.file.logger.Info("auto-created topic", "topic", topic, "default_topic", defaultTopic, "queues", tc.WriteQueueNums, "perm", protocol.PermString(tc.Perm))
	return cloneTopic(tc), true, t.changedLocked(now)
}

// FromDefault returns the config CreateFromDefault would create for topic, without storing it
// (DLedger mode proposes it through Raft instead). nil: the default topic is missing or not
// inheritable. It does not look at whether topic exists.
func (t *Topics) FromDefault(topic, defaultTopic string, clientQueueNums, topicSysFlag int32) *protocol.TopicConfig {
	if topic == "" {
		return nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.fromDefaultLocked(topic, defaultTopic, clientQueueNums, topicSysFlag)
}

func (t *Topics) fromDefaultLocked(topic, defaultTopic string, clientQueueNums, topicSysFlag int32) *protocol.TopicConfig {
	def, ok := t.table[defaultTopic]
	if !ok {
		t.file.logger.Warn("cannot auto-create topic: default topic not found", "topic", topic, "default_topic", defaultTopic)
		return nil
	}
	perm := def.Perm
	if defaultTopic == protocol.AutoCreateTopicKey && !t.autoCreate {
		perm = protocol.PermReadWrite
	}
	if !protocol.IsInherited(perm) {
		t.file.logger.Warn("cannot auto-create topic: default topic not inheritable", "topic", topic, "default_topic", defaultTopic, "perm", protocol.PermString(perm))
		return nil
	}
	n := min(clientQueueNums, def.WriteQueueNums)
	n = max(n, 0)
	tc := protocol.NewTopicConfig(topic)
	tc.ReadQueueNums, tc.WriteQueueNums = n, n
	tc.Perm = perm &^ protocol.PermInherit
	tc.TopicFilterType = def.TopicFilterType
	tc.TopicSysFlag = topicSysFlag
	return tc
}

// ReplaceAll replaces the whole table and its DataVersion with w's (a Raft snapshot restore in
// DLedger mode) and persists, like any mutation. A failed save leaves the new table in memory.
func (t *Topics) ReplaceAll(w protocol.TopicConfigSerializeWrapper) error {
	table := make(map[string]*protocol.TopicConfig, len(w.TopicConfigTable))
	for name, tc := range w.TopicConfigTable {
		if tc == nil {
			continue
		}
		c := cloneTopic(tc)
		if c.TopicName == "" {
			c.TopicName = name
		}
		table[name] = c
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.table, t.version = table, w.DataVersion
	return t.persistLocked()
}

// EnsureTopic stores tc if no topic of that name exists (system topics at start, %RETRY% and
// %DLQ% topics). It returns the existing or new config and whether it was created.
func (t *Topics) EnsureTopic(tc *protocol.TopicConfig) (*protocol.TopicConfig, bool, error) {
	return t.EnsureTopicAt(tc, time.Now())
}

// EnsureTopicAt is EnsureTopic with the DataVersion timestamp given.
func (t *Topics) EnsureTopicAt(tc *protocol.TopicConfig, now time.Time) (*protocol.TopicConfig, bool, error) {
	if tc == nil || tc.TopicName == "" {
		return nil, false, fmt.Errorf("%w: topic config without a name", ErrInvalid)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.table[tc.TopicName]; ok {
		return cloneTopic(old), false, nil
	}
	t.table[tc.TopicName] = cloneTopic(tc)
	return cloneTopic(tc), true, t.changedLocked(now)
}

// EnsureTopics is EnsureTopic for several configs with a single version bump and write, for the
// system topics at start. It returns the names it created.
func (t *Topics) EnsureTopics(tcs []*protocol.TopicConfig, now time.Time) ([]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var created []string
	for _, tc := range tcs {
		if tc == nil || tc.TopicName == "" {
			return created, fmt.Errorf("%w: topic config without a name", ErrInvalid)
		}
		if _, ok := t.table[tc.TopicName]; !ok {
			t.table[tc.TopicName] = cloneTopic(tc)
			created = append(created, tc.TopicName)
		}
	}
	if len(created) == 0 {
		return nil, nil
	}
	return created, t.changedLocked(now)
}

// changedLocked bumps the version and writes the file; t.mu must be held for writing.
func (t *Topics) changedLocked(now time.Time) error {
	t.version = nextVersion(t.version, now.UnixMilli())
	return t.persistLocked()
}

// persistLocked hands the change to the saver (written now or within the flush interval);
// t.mu must be held for writing.
func (t *Topics) persistLocked() error {
	t.gen++
	if err := t.saver.changedLocked(t.gen, func() any { return t.wrapperLocked() }); err != nil {
		t.file.logger.Error("cannot persist topic table", "file", t.file.path, "error", err)
		return err
	}
	return nil
}

// SetFlushInterval makes changes within d of the last write of topics.json wait for one
// coalesced write at most d later (see saver); 0, the default, writes every change at once.
func (t *Topics) SetFlushInterval(d time.Duration) { t.saver.setInterval(d) }

// Flush writes a change still waiting for its coalesced write (call it at shutdown).
func (t *Topics) Flush() error { return t.saver.flush() }

// Sync returns once every change made before the call is in topics.json, writing it now if a
// coalesced write is still pending; with nothing pending it only compares two counters. A
// classic broker syncs before it stores a message: topics.json is the only record of a topic
// there, and an acknowledged message in a topic a crash forgot would be out of every route.
func (t *Topics) Sync() error {
	if err := t.saver.sync(); err != nil {
		return fmt.Errorf("save topic table %s: %w", t.file.path, err)
	}
	return nil
}

func cloneTopic(tc *protocol.TopicConfig) *protocol.TopicConfig {
	c := *tc
	c.Attributes = maps.Clone(tc.Attributes)
	return &c
}
