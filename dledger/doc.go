// Package dledger is a broker group's Raft replication: hashicorp/raft set up the way a DLedger
// group behaves (dLegerGroup, dLegerPeers, dLegerSelfId), with a group-commit batcher in front of
// it. The state machine is someone else's (package fsm, behind raft.FSM); the broker maps
// LeaderChanges onto its master/slave role.
//
// # Pieces
//
//   - transport: raft.NetworkTransport over TCP on self's dLegerPeers address, advertised verbatim
//     (host names stay host names, so NotLeaderError names the address operators configured),
//     for outbound RPCs; inbound RPCs are served by our own loop in the same wire format
//     (inbound.go), which knows the connection each came on. With PeerSecret every connection
//     first proves the group secret (package peerauth) and each RPC must carry the node id its
//     connection proved; whatever the secret, rpcgate.go bounds terms and honours TimeoutNow
//     and leadership-transfer votes only when they can be genuine.
//   - stable store: raft-boltdb/v2 (bbolt), fsync on.
//   - log store: hashicorp/raft-wal (default) or raft-boltdb/v2, behind an in-memory cache of the
//     newest entries (logCache: 512 entries and 8 MiB, see there why so small), fsync on. Chosen by measurement, see below. raft-wal v0.4.1, not v0.4.0: v0.4.0
//     could not reopen a log whose tail Raft had truncated (hashicorp/raft-wal#31).
//     With LogStore=commitlog the log store is the state machine's own commitlog (Config.EntryLog,
//     opened and closed by the state machine) behind the same cache, written serially: each
//     StoreLogs is durable when it returns, so the leader does not write in parallel (below). It
//     requires Config.Sequencer, with which the leader stamps each entry's queue offsets in log
//     order as it proposes it (propose.go), since every replica writes those bytes before the
//     entry commits.
//   - snapshots: raft.FileSnapshotStore, two retained, stored as the state machine persists them;
//     with a SnapshotExpander (fsm.FSM, whose snapshots name store files instead of holding them)
//     every Open gets the expanded stream and its size (snapshots.go).
//   - Open bootstraps the configuration from Peers (all voters) when DataDir has no Raft state,
//     and otherwise restarts from that state: membership then lives in the log, Peers is ignored.
//     A node added later starts with Join and waits for the leader's AddVoter.
//
// DataDir layout:
//
//	raft-stable.db   bbolt: current term, last vote
//	raft-wal/        raft-wal segments and wal-meta.db   (LogStore=wal)
//	raft-log.db      bbolt log                          (LogStore=bolt)
//	                 (LogStore=commitlog: none here, the log is the state machine's commitlog)
//	snapshots/       <term>-<index>-<ms>/{meta.json,state.bin}
//
// Open refuses a DataDir holding the other log store kind, which would otherwise read as an empty
// log beside a non-empty stable store.
//
// # Entries
//
// dledger defines no entry envelope: Node.Apply and the Batcher hand Raft the bytes the caller's
// encoder produced (the fsm codec) and return what FSM.Apply returned. A response that is an error
// is returned as the error.
//
// # Group commit
//
// hashicorp/raft fsyncs once per batch of log entries it dispatches, so the cost per message falls
// with the messages per entry. Batcher coalesces whatever Submit calls are pending into one entry
// (bounded by 4 MiB and 4096 items), keeps up to 4 entries in flight (raft.Apply futures awaited
// in their own goroutines; raft.Config.BatchApplyCh lets Raft write several with one fsync), and
// answers each caller with its own part of the FSM's response. While all in-flight slots are busy
// the queue grows: that, not a timer, is the batching window, so an idle broker pays no linger.
// Items are typed (Batcher[T, R]): the broker's item is one send (one or more encoded records) and
// its result that send's AppendResults, so a batch send stays one unit end to end.
// SubmitSlot is the same without a waiting goroutine: the codec's Done answers each item when its
// entry's outcome is known, so a broker answers every send of an entry from the goroutine that
// awaited it, and the item's record lives in the send's own state.
//
// # The leader's own write
//
// hashicorp/raft stores (and fsyncs) a batch on the leader loop before it wakes the replicators,
// so an entry waits for the leader's fsync and then the followers' in sequence. With raft-wal the
// leader instead writes its copy, replicates at once and fsyncs in the background
// (leaderwrite.go, the Raft thesis' §10.2.1): the state machine applies an entry, and the broker
// acknowledges it, only once the leader's copy is durable too, and followers are never told a
// commit index beyond it, so every applied entry is on disk on a majority, as before. A membership
// change, which Raft answers on commit without the state machine, is written synchronously. Measured
// with BenchmarkLogStore (wal+cache vs wal+cache+serial, 10 s, 2026-11-30): 63.6k/61.4k vs
// 42.8k/50.5k steady msg/s; in the broker the leader's commit went from 6.3-7.0 to 4.2-4.9 ms
// after dispatch (docs/benchmarks.md). SerialLeaderWrite keeps the library's order.
//
// Every raft-wal fsync (the leader's background one and a follower's inside its write) goes
// through the process's io_uring where there is one (internal/uring), so the goroutine that waits
// for the disk does not hold the node's Go processor meanwhile. With the commitlog as the log
// store the leader's background fsync does the same; a follower's fsync goes through the ring only
// while its state machine has entries to apply, and is made on its own thread otherwise
// (followerIdle in leaderwrite.go), where the ring's wake-ups would only lengthen the wait.
//
// # Choosing the log store (measured)
//
// BenchmarkLogStore, on the 2-core machine: three nodes in one process on loopback, fsync on,
// 1 KiB messages, 256 concurrent submitters through the Batcher, trivial FSM, ~20 s runs
// (steady-msg/s leaves out the first 5 s). Run 1 on a mostly idle machine; run 2 while another
// broker process shared the CPUs (load average ~4):
//
//	log store            run 1 msg/s (steady)   run 2 msg/s (steady)   msgs/entry
//	raft-wal + cache     36.4k (34.9k)          32.5k (31.4k)          41-43
//	raft-boltdb + cache  18.1k (18.2k)          22.5k (23.7k)          44-45
//	raft-wal             30.6k (32.5k)          -                      44
//	raft-boltdb          10.7k (10.6k)          -                      45
//
// raft-wal with the log cache beats raft-boltdb with it by 1.4-2x (our bolt+cache figures 18-24k,
// wal+cache 31-36k).
// The cache is worth 15-70 %. So the default is "wal". BenchmarkBatcherOptions (12 s runs, wal +
// cache) picked the in-flight bound: 1: 26k, 2: 25k, 4: 39k, 8: 30k steady msg/s; a 1 ms linger
// on top of 4 gave 37k, so there is none by default. raft-wal frees log space in whole segments
// (WALSegmentSize, 64 MiB): a follower that is behind is sent a snapshot only for entries already
// in freed segments.
//
// # Timing defaults
//
// hashicorp/raft: a follower starts an election after a random [HeartbeatTimeout,
// 2*HeartbeatTimeout) without hearing from the leader, which heartbeats every HeartbeatTimeout/10;
// a candidate waits ElectionTimeout..2*ElectionTimeout for votes; a leader that has not heard from
// a quorum for LeaderLeaseTimeout steps down. We take 500 ms / 500 ms / 500 ms (the library's
// defaults are 1 s / 1 s / 500 ms, DLedger's 6 s of missed heartbeats): on loopback or a LAN the
// round trip is well under a millisecond, so 500 ms is ten missed heartbeats and still rides out
// GC pauses and fsync stalls (heartbeats are served off Raft's main loop), while failover takes
// about 0.5-1.3 s (measured by TestLeaderFailover: 0.7-1.3 s from shutting the leader down to a
// ready new leader). The lease does not enter failover time (a dead leader is detected by the
// followers' heartbeat timeout; a cut-off leader cannot commit anyway), it only decides how soon
// a cut-off leader says so; at 250 ms a leader once stepped down spuriously in a -race run with 1000
// submitters while other test suites loaded the 2-core machine, so it equals the heartbeat
// timeout. CommitTimeout keeps the library's 50 ms: it only bounds how late an idle
// follower learns the commit index; under load every AppendEntries carries it.
//
// # Leadership
//
// LeaderChanges delivers true only after a Barrier on the new leader, so everything committed in
// earlier terms is applied before the broker registers as master, and false
// when leadership is lost. Shutdown does not hand leadership over; call TransferLeadership first for
// a graceful stop (it takes milliseconds instead of an election timeout).
//
// # Membership changes
//
// AddVoter makes a node a voter at once (no non-voter stage): with three voters and one new node
// the quorum is three of four, which the old members meet while the new one catches up. A joining
// node (Join, no state) gets the leader's latest snapshot when the leader's log no longer starts
// at its first entry (TrailingLogs entries are kept after each snapshot; raft-wal frees whole
// WALSegmentSize segments), then the log after it. Until the log reaches the AddVoter entry, its
// configuration is the snapshot's, which may not list it: Membership reports Voter false while
// a leader is still feeding it. RemoveVoter drops a member; the leader stops replicating to it
// after sending it the entries up to the change, so the removed node usually learns it is out.
// ShutdownOnRemove is off: a leader that removes itself steps down and keeps Raft running like
// any removed node, so the broker sees the same thing in both cases (Membership: configured, not
// a voter, no leader contact) and decides what to do.
//
// # Locks
//
// Batcher.mu guards its queue and is a leaf: nothing else is locked or awaited while it is held.
// syncTracker.mu is a leaf too; its waits (drain, awaitDurable) wait for the background fsync
// goroutine, which takes no other lock.
// Node.proposeMu (propose.go) is held around a Sequencer's Stamp and raft.Apply's hand-off, so
// entries reach the log in the order they were stamped. Under it Stamp may wait for a barrier
// and read the applied state (fsm.Sequencer takes the state machine's lock to load a counter),
// so the state machine must never propose, or wait for a proposal, while it applies. Without a
// Sequencer Node holds no locks of its own; hashicorp/raft's are internal to it.
package dledger
