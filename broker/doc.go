// Package broker serves RocketMQ's broker requests — sends, pulls with long
// polling, consumer offsets, client heartbeats, queue locks, queries,
// transactions (transaction.go; package broker/txn) and administration — over the
// remoting protocol, and keeps the broker registered with every name server.
//
// The broker appends through the CommitLog interface (a local store in classic
// mode, a Raft group in DLedger mode) and reads from the storage package
// directly, since every replica's store holds the same committed bytes.
// Metadata lives in broker/meta and client connections in broker/clients. In
// DLedger mode topic configs, subscription groups, consumer offsets and
// orderly-consumption queue locks are Raft entries too (replmeta.go,
// offsetbatch.go, locks.go): the leader proposes, every node applies, followers
// forward writes.
//
// Lock order: Broker.metaMu (one of its name locks, held while a topic or group proposal
// commits; never two at once) ->
// the fsm's lock (Apply) -> the meta tables' locks; nothing called under the
// fsm's lock takes metaMu. Broker.lockMu (held while a queue-lock proposal
// commits) -> the fsm's lock -> clients.Manager.lockMu; metaMu and lockMu are
// never held together.
//
// Lock order: longpoll.Holder.mu is never held while calling into the store or
// writing to a connection; the store's OnDispatch callback takes only
// longpoll.Holder.mu.
//
// Lock order (transactions, package broker/txn): a transaction's claim (held
// across the append that resolves or re-puts it, and the metaMu of creating
// TRANS_CHECK_MAX_TIME_TOPIC) -> txn.Service.mu (never held across an append or
// a network write) -> the store (acquireStore, reads only).
package broker
