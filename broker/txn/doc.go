// Package txn resolves transactional messages: the bookkeeping of unresolved half messages,
// END_TRANSACTION's commit and rollback records, and the check-back that asks a producer about a
// transaction it left open. The broker's send path stores the half messages
// (broker/transaction.go) and adapts END_TRANSACTION to Service.End; this package never sees a
// broker: it reads the store through Config.Acquire, writes through Config.Append, keeps its
// cursor through Config.CommittedOffset / CommitOffset and finds producers through
// Config.ProducerConn, so it is tested over a store in a temporary directory.
//
// # Records
//
// A half message is stored in RMQ_SYS_TRANS_HALF_TOPIC, queue 0, with REAL_TOPIC / REAL_QID and
// transaction bits NOT_TYPE (so the half queue indexes it). END_TRANSACTION commit appends, in
// one append, the real message (topic and queue from REAL_TOPIC / REAL_QID, which are removed with
// TRAN_MSG; sysFlag COMMIT; PREPAREDTRANSACTIONOFFSET = the half's commitlog offset;
// TRAN_PREPARED_QUEUE_OFFSET = the transaction's first half queue offset) and an op record
// naming the half; rollback appends the op record only; unknown (0) does nothing. One append is
// one Raft entry in DLedger mode, so a commit is never half done on any replica: the real
// message exists iff the op record does.
//
// Answers are idempotent: a second END_TRANSACTION for a transaction already resolved (the
// producer's late answer after a check-back's, a retried oneway) is answered SUCCESS and writes
// nothing; one naming an older copy of a re-put half acts on the current copy.
//
// # Check-back
//
// Every transactionCheckInterval the master reads the half and op queues up to their ends and,
// for each unresolved half born more than transactionTimeOut ago (or its
// CHECK_IMMUNITY_TIME_IN_SECONDS), oldest first:
//   - checked transactionCheckMax times already: it is discarded (a copy goes to
//     TRANS_CHECK_MAX_TIME_TOPIC with an op record for the half, in one append) and logged;
//   - no live producer connection of its PGROUP: skipped (not counted; asked at the next pass);
//   - else it is re-put: a copy with TRANSACTION_CHECK_TIMES + 1 and an op record for the old
//     half, in one append, then CHECK_TRANSACTION_STATE (39, oneway) goes to a random live
//     connection of the group, naming the copy. The producer answers END_TRANSACTION with
//     fromTransactionCheck=true.
//
// DLedger mode: only the ready leader checks and resolves (Config.IsMaster); its view is built
// from the replicated queues the first time it is needed, after the Barrier that made it leader,
// so transactions left unknown by a killed leader are checked by the next one.
//
// # Locking
//
// Service.mu guards the book and the claims; it is never held across an append or a network
// write. A claim (per transaction, by origin) is held across the append that resolves or re-puts
// it, so two answers for one transaction never both commit. Lock order: claim -> Service.mu ->
// store reads (Config.Acquire).
package txn
