package broker

import "rocketraft/broker/diskfail"

// Disk failures in DLedger mode: package broker/diskfail stops the node (its package comment
// says why); this file is the broker's side of it.

// DiskFailureExitCode is the broker's exit status after a disk failure (sysexits' EX_IOERR).
const DiskFailureExitCode = diskfail.ExitCode

// IsDiskFailure reports whether err (from New) comes from a failed write to the data directory
// (the store's recovery could not write or sync a file): the caller exits with
// DiskFailureExitCode as a running node does, so a supervisor restarts it the same way.
func IsDiskFailure(err error) bool { return diskfail.Is(err) }

// leaveOnDiskFailure is what the broker does before the exit: no more writes or registrations
// (role unknown, as a removed node), then unregister.
func (b *Broker) leaveOnDiskFailure() {
	b.place.leave()
	b.reg.unregisterAll()
}
