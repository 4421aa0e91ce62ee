// Package diskfail takes a DLedger node out of service on a failed write to its data directory.
//
// Disk failures in DLedger mode. A write to the node's data directory that fails (EIO or ENOSPC
// on a write, a failed fsync) in the Raft log, the stable store, the commitlog or the applied
// marker leaves this node unable to say what reached its disk: Linux reports a writeback error
// once and may mark the pages clean, so a later fsync that succeeds proves nothing, and a state
// machine that skipped the entry would diverge. The node therefore stops: it logs one
// "DISK FAILURE:" line with the operation, the path and the error, refuses writes, unregisters
// from the name servers (bounded by LeaveWait) and exits with ExitCode,
// without closing anything, as a crash would. Its Raft peers elect a new leader if it led; the
// others never depended on its unacknowledged writes. Started again once the disk works (by the
// operator, or a supervisor that restarts on failure), it recovers from its files as after a
// crash: the commitlog is truncated to the applied marker and Raft replays the rest from the log
// (or the leader sends it), so it rejoins by itself. Exiting, rather than staying up in a failed
// state, also covers the failures hashicorp/raft turns into a panic (a failed term write) and
// those that would leave its goroutines stuck.
package diskfail
