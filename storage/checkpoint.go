package storage

import (
	"encoding/binary"
	"fmt"
	"path/filepath"

	"rocketraft/storage/vfs"
)

const checkpointSize = 4096

// checkpoint is the 4 KiB checkpoint file (§6.5). RocketMQ's fields come first; rocketraft
// adds three fields after them that make recovery exact instead of time based.
type checkpoint struct {
	physicMsgTimestamp  int64 // 0: store time of the last flushed commitlog record
	logicsMsgTimestamp  int64 // 8: store time of the last record whose CQ unit is flushed
	indexMsgTimestamp   int64 // 16: store time of the last record whose index entries are flushed
	masterFlushedOffset int64 // 24: [5.x], unused
	confirmPhyOffset    int64 // 32: [5.x], unused
	// dispatchedOffset (40): every record before it has its consume-queue units and index
	// entries durable, and the commitlog is durable at least up to it.
	dispatchedOffset int64
	// indexFileID (48): the active index file when dispatchedOffset was recorded (0: none).
	// After a crash that file and newer ones may be inconsistent and are rebuilt.
	indexFileID int64
	// indexRebuildFrom (56): commitlog offset from which to rebuild those index files.
	indexRebuildFrom int64
}

type checkpointFile struct {
	m vfs.Mapping
	b []byte
}

func openCheckpoint(fsys vfs.FS, root string) (*checkpointFile, checkpoint, error) {
	m, err := fsys.Map(filepath.Join(root, "checkpoint"), checkpointSize)
	if err != nil {
		return nil, checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	f := &checkpointFile{m: m, b: m.Bytes()}
	return f, f.read(), nil
}

func (f *checkpointFile) read() checkpoint {
	g := func(off int) int64 { return int64(binary.BigEndian.Uint64(f.b[off:])) }
	return checkpoint{g(0), g(8), g(16), g(24), g(32), g(40), g(48), g(56)}
}

// write stores c and syncs it.
func (f *checkpointFile) write(c checkpoint) error {
	for i, v := range []int64{c.physicMsgTimestamp, c.logicsMsgTimestamp, c.indexMsgTimestamp, c.masterFlushedOffset, c.confirmPhyOffset, c.dispatchedOffset, c.indexFileID, c.indexRebuildFrom} {
		binary.BigEndian.PutUint64(f.b[i*8:], uint64(v))
	}
	if err := f.m.Sync(0, checkpointSize); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}
