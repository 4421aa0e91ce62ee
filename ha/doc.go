// Package ha is RocketMQ's classic master/slave replication (HAService, HAConnection,
// HAClient): a master streams its commitlog, byte for byte, to slaves that connect to its HA
// port (haListenPort), and learns from their reports how far each has stored it, which is what a
// SYNC_MASTER waits for before acknowledging a send. It knows nothing of the remoting protocol,
// topics or Raft: the master reads through a Source and the slave appends through a Target
// (storage.Store.AppendRaw), so the same code serves a classic master and the ready leader of a
// DLedger group (whose replicas are byte-identical, so a slave following the group continues on a
// new leader from the same offset).
//
// # Wire protocol (raw TCP, no remoting framing; all integers big-endian)
//
// With ServerConfig.Keys (the broker's peerSecret, or its ACL account), the connection first
// carries the peerauth handshake (purpose "ha"; the slave proves ClientConfig.Credential, the
// master proves the same key back); a peer that fails it is closed with nothing streamed and is
// never counted as a slave. Then:
//
// Slave to master, a stream of reports, one when the connection opens, one after each append
// and one every haSendHeartbeatInterval (5 s):
//
//	offset  size  field
//	0       8     the slave's commitlog max offset (where its next byte goes); never negative
//
// Master to slave, a stream of frames:
//
//	offset  size  field
//	0       8     masterPhyOffset  commitlog offset of the first body byte
//	8       4     bodySize         0..haTransferBatchSize (0 = heartbeat, sent after
//	                               haSendHeartbeatInterval without data)
//	12      n     body             the master's commitlog bytes [masterPhyOffset, +bodySize)
//
// The master starts at the slave's first report (a report beyond its own max offset, or below
// its min offset, closes the connection) and sends blocks cut at arbitrary byte positions but
// never across a commitlog file. The slave checks that every frame's masterPhyOffset is the
// offset of the next byte it expects; a mismatch closes the connection (the slave reconnects and
// reports, and the master restarts from there). The slave keeps the bytes of an incomplete record
// until the rest arrives and appends whole records (plus the end-of-file blank marker, after
// which it skips the zeros up to the file end) with AppendRaw, which also builds its consume
// queues and index. Either side closes a connection silent for haHousekeepingInterval (20 s).
//
// A malformed or hostile peer (a bad report, a frame larger than allowed, bytes that are not
// records where records must start) closes its own connection, with a log line saying why, and
// nothing else: the server keeps serving its other slaves, the client reconnects later.
//
// # Locks
//
// Server.mu (connection set, ack wake-up channel) and Client.mu (current connection) are leaves:
// nothing else is locked while one is held, and Source and Target are called without them. A
// client connection's write mutex serialises its reports (after appends, heartbeats) and is a
// leaf too. The broker's replication.Service.serverMu (broker/replication) (start/stop on DLedger role changes) is taken before
// Server.mu (Close).
package ha
