package storage

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/storage/vfs"
)

// FlushDiskType selects when appended bytes are made durable (RocketMQ flushDiskType).
type FlushDiskType string

const (
	// SyncFlush makes Append wait until a group-commit msync covers its bytes.
	SyncFlush FlushDiskType = "SYNC_FLUSH"
	// AsyncFlush flushes in the background every FlushIntervalCommitLog.
	AsyncFlush FlushDiskType = "ASYNC_FLUSH"
)

// ConsumeQueueUnitSize is the size of one consume-queue unit (§6.3).
const ConsumeQueueUnitSize = 20

// Config is the store's configuration. The tag of each field is RocketMQ's key name in
// broker.properties, so the broker can map its properties one to one (durations are
// milliseconds in broker.properties, fileReservedTime hours, ratios percent).
type Config struct {
	// StorePathRootDir holds consumequeue/, index/, checkpoint, abort and lock.
	StorePathRootDir string `key:"storePathRootDir"`
	// StorePathCommitLog is the commitlog directory; default <root>/commitlog.
	StorePathCommitLog string `key:"storePathCommitLog"`
	// MappedFileSizeCommitLog is the commitlog segment size in bytes (1 GiB).
	MappedFileSizeCommitLog int64 `key:"mappedFileSizeCommitLog"`
	// MappedFileSizeConsumeQueue is the consume-queue segment size in bytes, a multiple of 20
	// (300000 units = 6000000 bytes). RocketMQ spells the key with one p.
	MappedFileSizeConsumeQueue int64 `key:"mapedFileSizeConsumeQueue"`
	// FlushDiskType is SYNC_FLUSH or ASYNC_FLUSH (default).
	FlushDiskType FlushDiskType `key:"flushDiskType"`
	// FlushIntervalCommitLog is the ASYNC_FLUSH period (500 ms).
	FlushIntervalCommitLog time.Duration `key:"flushIntervalCommitLog"`
	// FlushCommitLogBytes (ours, not a key): with ASYNC_FLUSH, also flush as soon as this many
	// bytes are unflushed (0: only every FlushIntervalCommitLog). It bounds each flush's burst
	// of writes: one msync of everything written in 500 ms holds the disk long enough to stall
	// other fsyncs behind it, such as a DLedger node's Raft log (package fsm sets it).
	FlushCommitLogBytes int64
	// FlushIntervalConsumeQueue is how often consume queues, index and checkpoint are synced
	// (1 s); it bounds how much recovery re-dispatches.
	FlushIntervalConsumeQueue time.Duration `key:"flushIntervalConsumeQueue"`
	// SyncFlushTimeout bounds how long a SYNC_FLUSH Append waits (5 s).
	SyncFlushTimeout time.Duration `key:"syncFlushTimeout"`
	// FileReservedTime is how long commitlog files are kept, in hours (72).
	FileReservedTime int `key:"fileReservedTime"`
	// DeleteWhen lists the hours of day at which expired files are deleted, "04" or "04;10".
	DeleteWhen string `key:"deleteWhen"`
	// DiskMaxUsedSpaceRatio is the disk usage percentage above which expired files are
	// deleted at once, and writes refused if cleaning cannot get below it (75).
	DiskMaxUsedSpaceRatio int `key:"diskMaxUsedSpaceRatio"`
	// CleanResourceInterval is the retention check period (10 s).
	CleanResourceInterval time.Duration `key:"cleanResourceInterval"`
	// MaxMessageSize is the largest body accepted (4 MiB); a record may add 64 KiB of header.
	MaxMessageSize int `key:"maxMessageSize"`
	// MessageIndexEnable turns the key index on (true).
	MessageIndexEnable bool `key:"messageIndexEnable"`
	// MaxHashSlotNum is the number of hash slots per index file (5000000).
	MaxHashSlotNum int `key:"maxHashSlotNum"`
	// MaxIndexNum is the number of entries per index file (20000000).
	MaxIndexNum int `key:"maxIndexNum"`

	// FS is the file system (default vfs.OS{}); tests pass a *vfs.MemFS.
	FS vfs.FS `key:"-"`
	// Logger receives the store's logs (default: a null logger).
	Logger hclog.Logger `key:"-"`
	// OnDispatch is called after each appended record becomes visible in its consume queue;
	// long polling uses it to wake parked pulls. It runs on the appending goroutine and must
	// not block or call Append.
	OnDispatch func(topic string, queueID int32, queueOffset int64, tagsCode int64) `key:"-"`
	// Now is the clock for store timestamps, index file names and retention (default time.Now).
	Now func() time.Time `key:"-"`

	// Truncate makes Open cut the commitlog back to TruncateTo after crash recovery, together
	// with the consume-queue units and index entries of the records it removes (the Raft
	// state machine uses it to drop records written after its last applied-index marker, so
	// Raft's replay writes them again). TruncateTo must be a record boundary at or after the
	// commitlog min offset and at or before the end of valid data, else Open fails with
	// ErrTruncateBeyondEnd (the log is shorter than TruncateTo) or ErrTruncateInvalid.
	Truncate bool `key:"-"`
	// TruncateTo is the commitlog offset Open truncates to when Truncate is set.
	TruncateTo int64 `key:"-"`
	// EntryLog makes the commitlog also the Raft log (fsm's entry log, dLegerLogStore=commitlog):
	// bytes are written by WriteEntry before they are committed and made visible by
	// DispatchWritten once applied, so the store has a written end (WrittenEnd) ahead of the
	// dispatched end that every reader is bounded by (CommitLogMaxOffset). With Truncate set,
	// Open keeps the commitlog bytes after TruncateTo (Raft still needs them) and rolls back only
	// their consume-queue units and index entries; only a torn tail is cut. Append, AppendRaw
	// and their variants are refused (ErrEntryLog). The state machine calls FlushDispatched
	// before it records TruncateTo, so that Open never re-dispatches from the commitlog, which
	// holds the records it refused. Without Truncate everything valid is dispatched.
	EntryLog bool `key:"-"`
}

// DefaultConfig returns RocketMQ's defaults rooted at root.
func DefaultConfig(root string) Config {
	return Config{
		StorePathRootDir:           root,
		MappedFileSizeCommitLog:    1 << 30,
		MappedFileSizeConsumeQueue: 300000 * ConsumeQueueUnitSize,
		FlushDiskType:              AsyncFlush,
		FlushIntervalCommitLog:     500 * time.Millisecond,
		FlushIntervalConsumeQueue:  time.Second,
		SyncFlushTimeout:           5 * time.Second,
		FileReservedTime:           72,
		DeleteWhen:                 "04",
		DiskMaxUsedSpaceRatio:      75,
		CleanResourceInterval:      10 * time.Second,
		MaxMessageSize:             4 << 20,
		MessageIndexEnable:         true,
		MaxHashSlotNum:             5000000,
		MaxIndexNum:                20000000,
	}
}

// commitLogDir returns the commitlog directory.
func (c *Config) commitLogDir() string {
	if c.StorePathCommitLog != "" {
		return c.StorePathCommitLog
	}
	return filepath.Join(c.StorePathRootDir, "commitlog")
}

// maxRecordSize is the largest encoded record accepted: the body limit plus 64 KiB of header,
// topic and properties (§5.5).
func (c *Config) maxRecordSize() int { return c.MaxMessageSize + 64<<10 }

// validate fills in defaults for the non-key fields and names the first bad key.
func (c *Config) validate() error {
	if c.FS == nil {
		c.FS = vfs.OS{}
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	switch {
	case c.StorePathRootDir == "":
		return fmt.Errorf("storePathRootDir is empty")
	case c.MappedFileSizeCommitLog < 4096:
		return fmt.Errorf("mappedFileSizeCommitLog %d: must be at least 4096", c.MappedFileSizeCommitLog)
	case c.MappedFileSizeConsumeQueue < ConsumeQueueUnitSize || c.MappedFileSizeConsumeQueue%ConsumeQueueUnitSize != 0:
		return fmt.Errorf("mapedFileSizeConsumeQueue %d: must be a positive multiple of 20", c.MappedFileSizeConsumeQueue)
	case c.FlushDiskType != SyncFlush && c.FlushDiskType != AsyncFlush:
		return fmt.Errorf("flushDiskType %q: want SYNC_FLUSH or ASYNC_FLUSH", c.FlushDiskType)
	case c.FlushIntervalCommitLog <= 0:
		return fmt.Errorf("flushIntervalCommitLog %v: must be positive", c.FlushIntervalCommitLog)
	case c.FlushIntervalConsumeQueue <= 0:
		return fmt.Errorf("flushIntervalConsumeQueue %v: must be positive", c.FlushIntervalConsumeQueue)
	case c.SyncFlushTimeout <= 0:
		return fmt.Errorf("syncFlushTimeout %v: must be positive", c.SyncFlushTimeout)
	case c.FileReservedTime <= 0:
		return fmt.Errorf("fileReservedTime %d: must be positive", c.FileReservedTime)
	case c.DiskMaxUsedSpaceRatio < 10 || c.DiskMaxUsedSpaceRatio > 95:
		return fmt.Errorf("diskMaxUsedSpaceRatio %d: must be within [10, 95]", c.DiskMaxUsedSpaceRatio)
	case c.CleanResourceInterval <= 0:
		return fmt.Errorf("cleanResourceInterval %v: must be positive", c.CleanResourceInterval)
	case c.MaxMessageSize <= 0:
		return fmt.Errorf("maxMessageSize %d: must be positive", c.MaxMessageSize)
	case c.MaxHashSlotNum <= 0:
		return fmt.Errorf("maxHashSlotNum %d: must be positive", c.MaxHashSlotNum)
	case c.MaxIndexNum <= 1:
		return fmt.Errorf("maxIndexNum %d: must be at least 2", c.MaxIndexNum)
	}
	if _, err := parseDeleteWhen(c.DeleteWhen); err != nil {
		return err
	}
	return nil
}

// parseDeleteWhen turns "04;10" into the set of hours.
func parseDeleteWhen(s string) (map[int]bool, error) {
	hours := map[int]bool{}
	for _, p := range strings.Split(s, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		h, err := strconv.Atoi(p)
		if err != nil || h < 0 || h > 23 {
			return nil, fmt.Errorf("deleteWhen %q: %q is not an hour 0-23", s, p)
		}
		hours[h] = true
	}
	return hours, nil
}
