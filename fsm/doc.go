// Package fsm is the Raft state machine of a DLedger-mode broker group: the raft.FSM that
// applies committed entries to the local store (package storage) and to the broker's metadata
// tables, so that every replica's commitlog is byte-identical and every entry takes effect
// exactly once per node, across crashes, restarts and replays.
//
// # Entry envelope
//
// Every Raft entry's Data starts with a kind byte; an entry of unknown kind, or whose payload
// does not decode, makes Apply panic: a state machine that skipped it would silently diverge.
//
// KindMessages (1): several appends (one per send; a batch send's records stay one append, so
// they stay contiguous), integers big-endian:
//
//	offset  size  field
//	0       1     kind = 1
//	1       4     A: number of appends (>= 1)
//	5       ...   A times: 4-byte record count R (>= 1), then R times a 4-byte record length
//	              L (>= 1) and L bytes of record (message.EncodeRecord layout, store timestamp
//	              and hosts stamped by the leader; queue and physical offsets are assigned
//	              at apply time)
//	end-4   4     CRC-32C (Castagnoli) of every byte before it
//
// KindMetadata (2): one operation as JSON (MetaOp), e.g.
//
//	offset  size  field
//	0       1     kind = 2
//	1       ...   {"op":"commitOffsets","now":1700000000000,"offsets":[{"group":"g","topic":"T","queueId":0,"offset":42}]}
//
// Ops: putTopic {topic}, deleteTopic {name}, putGroup {group}, deleteGroup {name},
// commitOffsets {offsets}, lockQueues and unlockQueues {lock: {group, clientId, queues}}
// (orderly-consumption locks, granted as of "now"), popMessages, popAck and popChange {pop: {group,
// topic, queueId, from, next, offsets, dropped, popTime, invisibleTime}} (POP consumption's
// in-flight table, broker/pop). "now" is the leader's clock at proposal time; it is the only time an
// op may use. Unknown members are rejected, so an entry from a newer version is not half applied.
//
// KindDigestCheck (5): a leader's digest of what it applied, checked by every replica (layout and
// behaviour in digest.go).
//
// KindScheduleDeliver (4): one step of the broker's delay scheduler, laid out in
// EncodeScheduleDeliver's doc: a delay level, the range [from, to) of its SCHEDULE_TOPIC_XXXX
// queue the step consumes, and the due messages re-encoded for their real topics. Apply is a
// compare-and-set on the level's progress (ScheduleApplier, a metadata table, so it is in
// snapshots and rebuilt by replay): iff the progress equals from, the records are appended and
// the progress set to to, in one step; otherwise nothing happens (ErrScheduleStale). A delivery
// is thereby applied once, whoever proposed it and however often.
//
// # Determinism
//
// The bytes Apply writes depend only on the entry and the store's prior state: Store.Append
// assigns queue offsets (per topic/queue) and physical offsets from the store's state, in log
// order, and keeps the record's STORETIMESTAMP (Apply refuses a record whose timestamp is 0,
// identically on every replica, rather than let the store stamp local time). No clock, no map
// iteration, no randomness. Outcomes that every replica reaches identically (a malformed
// record: storage.ErrMessageIllegal) are returned per append in AppendOutcome; outcomes that
// could differ between replicas are never returned. Disk usage differs between replicas, so
// Apply appends with storage.Store.AppendReplicatedBatch (all the appends of an entry in one
// call), which does not refuse over
// diskMaxUsedSpaceRatio: the leader's broker refuses sends before proposing them
// (storage.Store.CheckDiskSpace, SERVICE_NOT_AVAILABLE "disk full", as in classic mode), and a
// committed entry is applied by every replica whatever its usage. A real write failure (ENOSPC
// creating a file, an I/O error) makes Apply log and panic before the applied index or the
// marker move past the entry: the replica stops rather than skip it and diverge; after the
// disk is fixed, a restart truncates to the marker and Raft replays the entry. Replicas must
// share mappedFileSizeCommitLog, mapedFileSizeConsumeQueue and maxMessageSize, which decide
// file rolls and validity.
//
// # Exactly once across crashes: the applied marker
//
// Raft (hashicorp/raft) re-applies every entry after its last snapshot when a node restarts,
// and a kill -9 can leave the memory-mapped commitlog ahead of anything the FSM recorded. The FSM
// records how far its store is in a small marker file in the store root, raftapplied (4 KiB; two
// 128-byte slots written alternately, the valid slot with the higher sequence wins, so a torn
// write leaves the previous one):
//
//	offset  size  field
//	0       4     magic 0x52524D4B ("RRMK")
//	4       2     version = 2
//	6       2     flags: bit 0 = the digests below are known
//	8       8     sequence number of this write
//	16      40    applied: the durable applied state (below)
//	56      40    floor: the latest applied state a full store flush made durable before a
//	              snapshot named it (Persist), a topic deletion, or a restore installed it
//	96      28    zero
//	124     4     CRC-32C of bytes 0..123
//
//	applied state: index (8) of the last entry whose effects are in the store, its term (8),
//	commitlog end offset right after it (8), index of the last metadata entry applied (8),
//	running digest of the entries through index (8, see digest.go)
//
// Version 1 (64-byte slots at 0 and 64, no digest, no floor) is still read; the first version-2
// write goes to the slot at 128, which does not overlap them.
//
// Ordering: the marker is written only with a state whose commitlog bytes are already durable,
// and synced at once. Apply only updates the state in memory; syncLoop, every
// Config.MarkerSyncInterval (1 s), captures it, flushes the commitlog to its end
// (storage.Store.FlushCommitLog) and then writes and syncs the marker; Persist, topic deletions
// and Close do the same. Whatever the kernel writes back of the marker page, and whichever
// unsynced pages of any file a power loss keeps or drops, the marker on disk therefore never
// names bytes the commitlog on disk lacks. (Earlier versions wrote the mapped marker per entry
// and synced it at snapshots after flushing the store while apply went on: the synced marker could
// name entries whose bytes were still unsynced, and a power loss left a node that refused to
// start.) The interval bounds what a node replays after a power loss to about a second of
// entries.
//
// New opens the store with storage.Config.Truncate set to the marker's end offset: recovery cuts
// the commitlog back to it, with the consume-queue units and index entries of the records it
// removes, and Apply skips message entries whose index is at or below the marker's. Entries
// after the marker are therefore applied again by Raft's replay onto exactly the state they
// were first applied to, and write the same bytes.
//
// A store shorter than the marker's end (storage.ErrTruncateBeyondEnd) lost bytes it had synced,
// which the ordering above rules out unless the disk lies; the node still does not refuse to
// start: it truncates to the marker's floor and restarts from there (the floor's index is at or
// after the latest snapshot's, whose Persist made it durable, so Raft's log holds every entry
// after it, and Raft's start-up Restore of that snapshot finds the store not behind it). Only a
// store shorter than even the floor fails New with ErrStoreBehindMarker, whose message says to
// rebuild the node from its group (removePeer, delete its data directory, restart it with
// dLegerJoin and addPeer: the leader sends a snapshot).
//
// The one store change a truncation cannot undo is a topic deletion (its consume queues are
// removed; later records of the topic restart at queue offset 0). Before deleting, Apply
// flushes the store and writes the marker with the floor at the current state, and again after,
// so neither the marker nor the floor falls back before a deletion.
//
// # The leader's own apply: reads it need not repeat
//
// The broker reads a plain send's properties once, to classify it (broker/sendplan.go); the
// store needs some of the same values (tags code, KEYS and UNIQ_KEY index hashes, WAIT) for
// each record it appends. On the leader, Config.Scans (LeaderScans) carries that read from the
// proposer (broker/raftgroup.go's batcher encodes the entry, Puts the reads under the entry's
// bytes, proposes, and Drops them once the send has its outcome) to the apply of the very same
// entry, which hashicorp/raft hands the leader's state machine as the same Data slice; any
// other apply (a replica, a replay, an entry received or read back) finds nothing and reads the
// records, as before. The entry format is untouched, and the store checks each read against its
// record's bytes (storage.Scanned), so what is applied, and every replica's bytes, do not
// depend on whether a read was found: determinism holds, and a missed read costs one scan.
// leaderscans.go argues the table cannot leak or hand an entry another's reads.
//
// # The commitlog as the Raft log (Config.EntryLog)
//
// With dLegerLogStore=commitlog the FSM also provides Raft's log store (EntryLog, entrylog.go):
// each entry is written into the commitlog when Raft stores it, a header record first
// (entryheader.go), and Apply dispatches its records where they lie (entryapply.go) instead of
// copying them. What the determinism rules above say of Store.Append holds with one change: the
// queue offsets are in the entry, stamped by the leader's Sequencer when it proposes; the store
// checks them at dispatch and refuses, on every replica alike, a send whose offsets are not its
// queues' next (storage.ErrQueueOffsetStale). The marker keeps its meaning; its writes wait for the
// consume queues and the index as well as the commitlog (storage.Store.FlushDispatched), and
// recovery rolls back only those past the marker's end: the commitlog bytes after it are Raft's
// log. docs/write-path.md has the design and its measurements.
//
// # Metadata exactly once
//
// The metadata tables are rebuilt, not trusted: New resets them (MetaApplier.RestoreMeta(nil)),
// Raft's start-up Restore gives them the latest snapshot's state, and Raft's replay applies
// every metadata entry after it once. The FSM keeps "metaThrough", the index up to which the
// tables hold every metadata entry; a metadata entry is applied to the tables iff its index is
// above it, and to the store (topic deletion) iff above the marker. This needs Raft to restore
// its snapshot at start: raft.Config.NoSnapshotRestoreOnStart must stay false. That restore is
// cheap: when the snapshot is not ahead of the local store, Restore reads only the header and
// the metadata files and keeps the store.
//
// # Snapshots
//
// Snapshot runs under the FSM lock and reads no file data: it records the applied index and
// term, the commitlog range, the list of commitlog and consume-queue segments with how many
// bytes of each to ship (storage.Store.Manifest), and the metadata tables' files from
// MetaApplier.SnapshotMeta. Persist writes a reference snapshot: the header (version 2), the
// metadata files and, per store file, its name, size, data length and a checksum of its first
// 4 KiB, but not its data, which the store keeps (appends only write past the recorded ends).
// It flushes the store and syncs the marker first, so a restart never truncates below what it
// names. A few KiB every snapshot instead of a copy of the whole store. ExpandSnapshot, which the
// node's snapshot store calls on every Open (a restore at start, an InstallSnapshot to a
// follower), turns it into the full stream below, read from the store while Apply goes on, a
// 1 MiB chunk at a time under the segment lock, never holding the store in memory, and logging
// progress every 256 MiB. Files retention removed from the front since are left out; a file
// gone otherwise, or whose first bytes changed (a deleted topic's queue sent to again), fails the
// expansion, and Raft's next snapshot serves instead. A follower stores the full stream it
// received as its snapshot. Consume queues are shipped, not rebuilt:
// they carry state the commitlog alone cannot give back (a deleted topic's restarted queue, a
// queue whose front retention removed), and that state decides the next queue offsets. Index
// files are not shipped; the restored store rebuilds them from the commitlog.
//
// Stream (integers big-endian):
//
//	header (64 bytes)
//	offset  size  field
//	0       4     magic 0x52525350 ("RRSP")
//	4       2     version = 1 (2: a reference snapshot, store files named only)
//	6       1     store kind: 0 unknown (older snapshots), 2 raft-wal or bolt node, 3 a node
//	              whose Raft log is its commitlog; Restore refuses the other kind
//	7       1     zero
//	8       8     applied index of the store
//	16      8     its term
//	24      8     commitlog min offset
//	32      8     commitlog end offset
//	40      8     metaThrough
//	48      4     M: metadata files
//	52      4     S: store files
//	56      4     zero
//	60      4     CRC-32C of bytes 0..59
//
//	then M metadata frames, then S store frames, each:
//	1       kind (1 metadata, 2 store file)
//	2       name length n (1..4096)
//	n       name: a MetaFile name, or a store path ("commitlog/<20 digits>",
//	        "consumequeue/<topic>/<queueId>/<20 digits>")
//	8       file size (a store file's mapped size; must equal this node's configuration)
//	8       data length L (the file's leading bytes that hold data; the rest is zeros)
//	L       data
//	4       CRC-32C of the data
//
// A reference snapshot (what Persist stores) has version 2 in its header, the same metadata
// frames, and S reference frames in place of the store frames: kind 3, name length, name, file
// size, data length L, then 4 bytes, the CRC-32C of the file's first min(L, 4 KiB) bytes; no
// data, no data CRC.
//
// Restore: if the snapshot is not ahead of the local store (applied index and commitlog end
// at or below the marker's), only the metadata is restored. Otherwise the files are written
// (storage.Installer) into <DataDir>/<root name>.restore with a checkpoint that vouches for the
// shipped consume queues, a marker at the snapshot's index and, last, a "restore-complete"
// file. Then the store is closed, the root renamed to <root name>.replaced, the staging
// directory renamed to the root, the old root removed and the store reopened (recovery rebuilds
// the index). A crash between the two renames is finished by New (root missing, staging
// complete); a crash before leaves the old store and discards the staging directory. Errors
// before the swap leave the current store as it was. Before closing the store the swap waits for
// the readers that hold it (see "Readers and restores").
//
// # Readers and restores
//
// Readers (the broker's pulls, queries, offset lookups, admin reads) get the store through
// Acquire, which returns it with a release function, and hold it only for their reads. Each
// opened store is published with a reference count (storeref.go): Acquire is an atomic pointer
// load and an atomic add, release an atomic add; no lock, no allocation. Before Restore (or
// Close) closes a store it retires it: new Acquire calls stop taking it and wait for its
// successor, and Restore waits for the count to reach zero (logging every second while it
// waits). Only then is the store closed and unmapped, so no reader touches unmapped memory or a
// closed store. Readers are never waited for longer than Config.DrainTimeout (30 s): past it the
// restore is abandoned with ErrReadersHoldStore, the old store stays in service, and Raft retries
// the snapshot later. After the swap readers get the new store, or ErrNoStore if it could not
// be reopened. A reader must not Acquire again while holding a reference: a restore waiting in
// between would wait for it.
//
// # Locking
//
// FSM.mu (Apply, Snapshot, Restore, Close) -> storage's own locks. Acquire takes no lock;
// Restore and Close wait, under FSM.mu, for readers, who never take FSM.mu. Persist takes no
// FSM lock and no reference; it reads through the store's segment locks and fails cleanly if a
// file it streams is removed (retention, a restore, a topic deletion).
package fsm
