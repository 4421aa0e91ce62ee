// Package broker serves RocketMQ's broker requests — sends, pulls with long
// polling, consumer offsets, client heartbeats, queue locks, queries,
// transactions (transaction.go; package broker/txn) and administration — over the
// remoting protocol, and keeps the broker registered with every name server.
//
// The mode is decided once, in New: the node's place in its group (place.go) is
// a classicPlace (a local store, the configured role, metadata changed in its
// own tables) or a raftPlace (a Raft group, the role Raft decides, metadata
// changed through the log). The rest of the package asks the place: append,
// acquire the store for reads, make a metadata change, role, brokerId,
// writable. Reads go to the storage package directly, since every replica's
// store holds the same committed bytes. The metadata tables live in broker/meta
// and client connections in broker/clients; every change of the tables (topic
// configs, subscription groups, consumer offsets, queue locks, POP state, the
// delay scheduler's progress) goes through place.change or place.deliver and
// ends in one applier (metachange.go). In DLedger mode the leader proposes,
// every node applies, followers forward writes (forward.go).
//
// The request table, with the file that handles each code, is handlers.go.
//
// Lock order: tables.names (one of its name locks, held while a topic or group proposal
// commits; never two at once) ->
// the fsm's lock (Apply) -> the meta tables' locks; nothing called under the
// fsm's lock takes tables.names. queueLocks.mu (held while a queue-lock proposal
// commits) -> the fsm's lock -> clients.Manager.lockMu; tables.names and queueLocks.mu are
// never held together.
//
// Lock order: longpoll.Holder.mu is never held while calling into the store or
// writing to a connection; the store's OnDispatch callback takes only
// longpoll.Holder.mu.
//
// Lock order (transactions, package broker/txn): a transaction's claim (held
// across the append that resolves or re-puts it, and the name lock of creating
// TRANS_CHECK_MAX_TIME_TOPIC) -> txn.Service.mu (never held across an append or
// a network write) -> the store (acquireStore, reads only).
package broker
