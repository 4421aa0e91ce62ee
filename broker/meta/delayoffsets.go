package meta

import (
	"maps"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// DelayOffsetWrapper is delayOffset.json and the body of GET_ALL_DELAY_OFFSET: per delay
// level (1-based), the consume-queue offset of SCHEDULE_TOPIC_XXXX queue
// level-1 up to which messages have been delivered to their real topic.
type DelayOffsetWrapper struct {
	OffsetTable map[int32]int64 `json:"offsetTable"`
}

// DelayOffsets is the delay scheduler's progress per level. The scheduler is its only writer in
// classic mode; in DLedger mode the state machine sets it when it applies a delivery entry, so
// every replica agrees and a new leader continues where the old one stopped.
//
// Set only changes memory; Persist writes the file when something changed since the last
// successful Persist.
type DelayOffsets struct {
	file      jsonFile
	persistMu sync.Mutex

	mu        sync.RWMutex
	table     map[int32]int64
	changes   uint64
	persisted uint64
}

// OpenDelayOffsets loads the table at path (or its backup); a missing file is an empty table.
func OpenDelayOffsets(path string, logger hclog.Logger) (*DelayOffsets, error) {
	d := &DelayOffsets{file: newJSONFile(path, logger), table: map[int32]int64{}}
	var w DelayOffsetWrapper
	if _, err := d.file.load(&w); err != nil {
		return nil, err
	}
	for level, off := range w.OffsetTable {
		d.table[level] = off
	}
	return d, nil
}

// Get returns the offset delivered through for level (0 when none).
func (d *DelayOffsets) Get(level int32) int64 {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.table[level]
}

// Set records level's progress (in memory).
func (d *DelayOffsets) Set(level int32, offset int64) {
	d.mu.Lock()
	d.table[level] = offset
	d.changes++
	d.mu.Unlock()
}

// ReplaceAll replaces the whole table (a Raft snapshot restore in DLedger mode; nil: empty).
func (d *DelayOffsets) ReplaceAll(w DelayOffsetWrapper) {
	t := maps.Clone(w.OffsetTable)
	if t == nil {
		t = map[int32]int64{}
	}
	d.mu.Lock()
	d.table = t
	d.changes++
	d.mu.Unlock()
}

// Wrapper returns a copy of the table.
func (d *DelayOffsets) Wrapper() DelayOffsetWrapper {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return DelayOffsetWrapper{OffsetTable: maps.Clone(d.table)}
}

// Persist writes the file if the table changed since the last successful Persist.
func (d *DelayOffsets) Persist() error {
	d.persistMu.Lock()
	defer d.persistMu.Unlock()
	d.mu.RLock()
	changes := d.changes
	if changes == d.persisted {
		d.mu.RUnlock()
		return nil
	}
	w := DelayOffsetWrapper{OffsetTable: maps.Clone(d.table)}
	d.mu.RUnlock()
	if err := d.file.save(w); err != nil {
		d.file.logger.Error("cannot persist delay offsets", "file", d.file.path, "error", err)
		return err
	}
	d.mu.Lock()
	d.persisted = changes
	d.mu.Unlock()
	return nil
}
