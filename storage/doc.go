// Package storage is the broker's local durable message store, in RocketMQ's on-disk layouts:
// a segmented, memory-mapped commitlog, one consume queue per (topic, queueId), hash index
// files, a checkpoint, an abort marker and a lock file. It knows nothing of Raft or the
// network: the broker (classic mode) or the Raft state machine (DLedger mode) calls Append
// with records encoded by package message, and pulls, queries and admin requests read back.
// Every file is reached through vfs.FS so tests can crash the store and inject I/O errors.
//
// # Directory layout (root = storePathRootDir)
//
//	commitlog/<20-digit start offset>                 commitlog segments (storePathCommitLog)
//	consumequeue/<topic>/<queueId>/<20-digit offset>  consume-queue segments
//	index/<yyyyMMddHHmmssSSS>                         index files
//	checkpoint                                        4 KiB, see below
//	abort                                             exists while the store is open
//	lock                                              flock'ed while the store is open
//
// # Commitlog segment (mappedFileSizeCommitLog bytes, default 1 GiB)
//
// Records (layout in package message) back to back from offset 0; global offset = file name
// + position. A record never spans files: when record size + 8 exceeds what is left, the file
// is closed with the blank marker and the record goes to offset 0 of the next file. One Append
// (a batch) is placed as a unit, so it is contiguous in one file.
//
//	offset  size  field
//	0       4     remaining bytes from here to the end of the file
//	4       4     0xCBD43194 (blank magic)
//	8       ...   zeros
//
// # Consume-queue unit (20 bytes; files of mapedFileSizeConsumeQueue bytes, default 300000 units)
//
//	offset  size  field
//	0       8     commitlog offset of the record
//	8       4     record size (TOTALSIZE)
//	12      8     tags code: Java hashCode of TAGS, sign-extended; 0 without tags
//
// Unit i is at byte i*20 of the queue; files are named by their first byte offset. Records
// whose transaction type is PREPARED or ROLLBACK get queue offset 0 and no unit.
//
// # Index file (40 + maxHashSlotNum*4 + maxIndexNum*20 bytes)
//
//	header (40 bytes)
//	offset  size  field
//	0       8     beginTimestamp   store time of the first entry
//	8       8     endTimestamp     store time of the last entry
//	16      8     beginPhyOffset   commitlog offset of the first entry
//	24      8     endPhyOffset     commitlog offset of the last entry
//	32      4     hashSlotCount    slots in use
//	36      4     indexCount       next entry number (starts at 1)
//
//	slot table at 40: maxHashSlotNum x int = number of the newest entry in the slot (0: none)
//
//	entry n at 40 + maxHashSlotNum*4 + n*20
//	offset  size  field
//	0       4     keyHash     abs(Java hashCode("<topic>#<key>")), 0 if still negative
//	4       8     commitlog offset
//	12      4     timeDiff    (storeTimestamp - beginTimestamp) / 1000, clamped to [0, 2^31-1]
//	16      4     previous entry in the same slot (0: end of chain)
//
// Each record's UNIQ_KEY and every space-separated KEYS element is indexed, except for
// ROLLBACK records. Lookups walk a slot's chain newest first.
//
// # Checkpoint (4 KiB)
//
//	offset  size  field
//	0       8     physicMsgTimestamp   store time of the last record when written
//	8       8     logicsMsgTimestamp   same (consume queues are flushed together)
//	16      8     indexMsgTimestamp    same (index is flushed together)
//	24      8     masterFlushedOffset  RocketMQ 5.x, unused (0)
//	32      8     confirmPhyOffset     RocketMQ 5.x, unused (0)
//	40      8     dispatchedOffset     rocketraft: all records before it have durable
//	                                   consume-queue units and index entries (in the index
//	                                   files before indexFileID), and the commitlog is
//	                                   durable at least that far
//	48      8     indexFileID          rocketraft: the index file active at that point
//	56      8     indexRebuildFrom     rocketraft: where that file's entries begin
//
// # Writing and durability
//
// Append validates records outside any lock, then under the append lock (Store.mu) assigns
// queue and physical offsets and stages a patched copy of the records; it writes the stage into
// the commitlog (through the mapping when small, else with one pwrite, which spares a page
// fault per fresh page: see vfs.Mapping.WriteAt), then writes their consume-queue units and
// index entries and publishes the new end, in that order, so a reader never follows a unit to
// bytes not yet written. AppendReplicatedBatch does the same for all the appends of a Raft
// entry under one lock, with one write per commitlog file. Nothing is synced there.
// AppendScanned and AppendReplicatedBatchScanned take, with the records, the reads of their
// properties the sender already made (Scanned), so the tags code, index keys and WAIT come from
// that read instead of a second scan; a read is used only for a record whose properties it
// describes (scanned.go), so the stored result is the same either way.
// A flusher goroutine does group commit (see flush.go): one msync covers every append waiting
// for it. Another goroutine syncs consume queues and the sealed index files every
// flushIntervalConsumeQueue and then writes the checkpoint; the active index file is synced only
// by a full flush (Close, Flush), since crash recovery rebuilds it from the commitlog anyway.
// Crash recovery (recovery.go) rebuilds whatever the checkpoint does not vouch for from the
// commitlog.
//
// The file being appended to is advised against read-around from the end of its data on
// (vfs.AdviceAppend, segments.go), since a sync writes back each dirty folio whole and the
// kernel's read-around makes large ones; behind the writer, and in full files, read-around
// serves cold readers again.
//
// # Truncation and snapshots (Raft state machine support)
//
// The Raft state machine appends with AppendReplicatedBatch, which never refuses over
// diskMaxUsedSpaceRatio nor waits for a flush (every replica must apply every committed entry
// alike); the leader asks CheckDiskSpace before proposing instead.
//
// Config.Truncate makes Open cut the commitlog back to Config.TruncateTo (a record boundary)
// after crash recovery, removing the consume-queue units and index entries of the records it
// drops, so that a replayed Raft log writes them again identically; a log shorter than
// TruncateTo is ErrTruncateBeyondEnd. Manifest lists, under the append lock and without reading
// data, the commitlog and consume-queue segments (and how many bytes of each) that make up the
// store at that moment; CopyFile streams one while appends go on. An Installer writes such
// files into an empty directory with a checkpoint vouching for the shipped consume queues and
// an abort marker, so that Open keeps the queues and rebuilds the index from the commitlog.
//
// # The commitlog as the Raft log (Config.EntryLog, entrylog.go)
//
// With dLegerLogStore=commitlog, Raft's log store writes each entry (a header record of topic
// message.RaftEntryTopic, rolled back so no reader dispatches it, then the entry's records with
// the queue offsets the leader assigned) with WriteEntry at the written end, before the entry
// commits, and syncs it with SyncWritten. The store then has two ends: the written end
// (WrittenEnd) and, behind it, the dispatched end (CommitLogMaxOffset), which bounds every
// reader. Applying the entry calls DispatchWritten, which writes the units and index entries of
// the groups whose queue offsets still match their queues (others get ErrQueueOffsetStale and
// stay in the commitlog, never visible) and moves the dispatched end. Raft may cut an
// uncommitted tail (TruncateWritten). Append and its variants are refused (ErrEntryLog). The
// state machine calls FlushDispatched before recording its applied end; Open with Truncate then
// rolls back only the dispatch past TruncateTo, keeping the written bytes for Raft.
//
// # Lock ordering
//
//	Store.clFlushMu -> Store.logicsMu -> Store.mu (append) -> Store.qmu (queue map)
//	    -> indexService.mu -> segmentList.mu
//
// clFlushMu serializes commitlog flushes and logicsMu consume-queue/index/checkpoint flushes;
// Close takes both to unmap. Nothing holding Store.mu takes a flush mutex.
//
// Readers take only qmu, indexService.mu and segmentList.mu, for reading. The flusher takes
// Store.mu only briefly to snapshot positions. A segment's bytes are touched only while its
// segmentList.mu is held (for reading), so retention cannot unmap them underneath.
package storage
