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

// Groups is the broker's subscription-group table, persisted as config/subscriptionGroup.json
// (SubscriptionGroupWrapper). The forbidden table is carried through unchanged.
type Groups struct {
	file  jsonFile
	saver *saver

	mu        sync.RWMutex
	table     map[string]*protocol.SubscriptionGroupConfig
	forbidden map[string]map[string]int32
	version   protocol.DataVersion
	gen       uint64 // bumped by every change (saver)
}

// OpenGroups loads the group table at path (or its backup); a missing file gives an empty table.
func OpenGroups(path string, logger hclog.Logger) (*Groups, error) {
	g := &Groups{file: newJSONFile(path, logger), table: map[string]*protocol.SubscriptionGroupConfig{}, forbidden: map[string]map[string]int32{}}
	g.saver = &saver{file: g.file, what: "subscription group table", snapshot: func() (any, uint64) {
		g.mu.RLock()
		defer g.mu.RUnlock()
		return g.wrapperLocked(), g.gen
	}}
	var w protocol.SubscriptionGroupWrapper
	found, err := g.file.load(&w)
	if err != nil {
		return nil, err
	}
	if !found {
		g.version = protocol.NewDataVersion()
		return g, nil
	}
	for name, c := range w.SubscriptionGroupTable {
		if c == nil {
			continue
		}
		cp := cloneGroup(c)
		if cp.GroupName == "" {
			cp.GroupName = name
		}
		g.table[name] = cp
	}
	for k, v := range w.ForbiddenTable {
		g.forbidden[k] = maps.Clone(v)
	}
	g.version = w.DataVersion
	return g, nil
}

// Get returns a copy of the group's config, or nil if absent.
func (g *Groups) Get(name string) *protocol.SubscriptionGroupConfig {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if c, ok := g.table[name]; ok {
		return cloneGroup(c)
	}
	return nil
}

// GetOrCreate returns the group's config; when absent it creates one with Java's defaults if
// autoCreate (autoCreateSubscriptionGroup) is set, else returns nil, false, nil.
func (g *Groups) GetOrCreate(name string, autoCreate bool) (*protocol.SubscriptionGroupConfig, bool, error) {
	return g.GetOrCreateAt(name, autoCreate, time.Now())
}

// GetOrCreateAt is GetOrCreate with the DataVersion timestamp given.
func (g *Groups) GetOrCreateAt(name string, autoCreate bool, now time.Time) (*protocol.SubscriptionGroupConfig, bool, error) {
	if c := g.Get(name); c != nil || !autoCreate {
		return c, false, nil
	}
	if name == "" {
		return nil, false, fmt.Errorf("%w: empty group name", ErrInvalid)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.table[name]; ok { // created meanwhile
		return cloneGroup(c), false, nil
	}
	c := protocol.NewSubscriptionGroupConfig(name)
	g.table[name] = c
	g.file.logger.Info("auto-created subscription group", "group", name)
	return cloneGroup(c), true, g.changedLocked(now)
}

// Put creates or replaces a group config, bumps the DataVersion and persists.
func (g *Groups) Put(cfg *protocol.SubscriptionGroupConfig) error { return g.PutAt(cfg, time.Now()) }

// PutAt is Put with the DataVersion timestamp given.
func (g *Groups) PutAt(cfg *protocol.SubscriptionGroupConfig, now time.Time) error {
	if cfg == nil || cfg.GroupName == "" {
		return fmt.Errorf("%w: group config without a name", ErrInvalid)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.table[cfg.GroupName] = cloneGroup(cfg)
	return g.changedLocked(now)
}

// Delete removes a group config (and its forbidden entries); it reports whether it existed.
func (g *Groups) Delete(name string) (bool, error) { return g.DeleteAt(name, time.Now()) }

// DeleteAt is Delete with the DataVersion timestamp given.
func (g *Groups) DeleteAt(name string, now time.Time) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.table[name]; !ok {
		return false, nil
	}
	delete(g.table, name)
	delete(g.forbidden, name)
	return true, g.changedLocked(now)
}

// Names returns the group names, sorted.
func (g *Groups) Names() []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return slices.Sorted(maps.Keys(g.table))
}

// DataVersion returns the table's current version.
func (g *Groups) DataVersion() protocol.DataVersion {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.version
}

// Wrapper returns a deep copy of the table, for GET_ALL_SUBSCRIPTIONGROUP_CONFIG.
func (g *Groups) Wrapper() protocol.SubscriptionGroupWrapper {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.wrapperLocked()
}

func (g *Groups) wrapperLocked() protocol.SubscriptionGroupWrapper {
	t := make(map[string]*protocol.SubscriptionGroupConfig, len(g.table))
	for k, v := range g.table {
		t[k] = cloneGroup(v)
	}
	f := make(map[string]map[string]int32, len(g.forbidden))
	for k, v := range g.forbidden {
		f[k] = maps.Clone(v)
	}
	return protocol.SubscriptionGroupWrapper{SubscriptionGroupTable: t, ForbiddenTable: f, DataVersion: g.version}
}

// ReplaceAll replaces the whole table, the forbidden table and the DataVersion with w's (a Raft
// snapshot restore in DLedger mode) and persists, like any mutation. A failed save leaves the new
// table in memory.
func (g *Groups) ReplaceAll(w protocol.SubscriptionGroupWrapper) error {
	table := make(map[string]*protocol.SubscriptionGroupConfig, len(w.SubscriptionGroupTable))
	for name, c := range w.SubscriptionGroupTable {
		if c == nil {
			continue
		}
		cp := cloneGroup(c)
		if cp.GroupName == "" {
			cp.GroupName = name
		}
		table[name] = cp
	}
	forbidden := make(map[string]map[string]int32, len(w.ForbiddenTable))
	for k, v := range w.ForbiddenTable {
		forbidden[k] = maps.Clone(v)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.table, g.forbidden, g.version = table, forbidden, w.DataVersion
	return g.persistLocked()
}

func (g *Groups) changedLocked(now time.Time) error {
	g.version = nextVersion(g.version, now.UnixMilli())
	return g.persistLocked()
}

// persistLocked hands the change to the saver (written now or within the flush interval);
// g.mu must be held for writing.
func (g *Groups) persistLocked() error {
	g.gen++
	if err := g.saver.changedLocked(g.gen, func() any { return g.wrapperLocked() }); err != nil {
		g.file.logger.Error("cannot persist subscription group table", "file", g.file.path, "error", err)
		return err
	}
	return nil
}

// SetFlushInterval makes changes within d of the last write of subscriptionGroup.json wait for
// one coalesced write at most d later (see saver); 0, the default, writes every change at once.
func (g *Groups) SetFlushInterval(d time.Duration) { g.saver.setInterval(d) }

// Flush writes a change still waiting for its coalesced write (call it at shutdown).
func (g *Groups) Flush() error { return g.saver.flush() }

func cloneGroup(c *protocol.SubscriptionGroupConfig) *protocol.SubscriptionGroupConfig {
	cp := *c
	cp.GroupRetryPolicy = slices.Clone(c.GroupRetryPolicy)
	cp.SubscriptionDataSet = slices.Clone(c.SubscriptionDataSet)
	cp.Attributes = maps.Clone(c.Attributes)
	return &cp
}
