package broker

import (
	"errors"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/storage"
)

// Disk failures in DLedger mode. A write to the node's data directory that fails (EIO or ENOSPC
// on a write, a failed fsync) in the Raft log, the stable store, the commitlog or the applied
// marker leaves this node unable to say what reached its disk: Linux reports a writeback error
// once and may mark the pages clean, so a later fsync that succeeds proves nothing, and a state
// machine that skipped the entry would diverge. The node therefore stops: it logs one
// "DISK FAILURE:" line with the operation, the path and the error, refuses writes, unregisters
// from the name servers (bounded by diskFailureLeaveWait) and exits with DiskFailureExitCode,
// without closing anything, as a crash would. Its Raft peers elect a new leader if it led; the
// others never depended on its unacknowledged writes. Started again once the disk works (by the
// operator, or a supervisor that restarts on failure), it recovers from its files as after a
// crash: the commitlog is truncated to the applied marker and Raft replays the rest from the log
// (or the leader sends it), so it rejoins by itself. Exiting, rather than staying up in a failed
// state, also covers the failures hashicorp/raft turns into a panic (a failed term write) and
// those that would leave its goroutines stuck.

// DiskFailureExitCode is the broker's exit status after a disk failure: sysexits' EX_IOERR, so a
// supervisor (systemd Restart=on-failure, a container restart policy) tells it from a crash.
const DiskFailureExitCode = 74

// diskFailureLeaveWait bounds the unregistration before the exit: the node still holds its Raft
// role meanwhile (a leader's heartbeats go on until the process ends), so failover waits for it.
const diskFailureLeaveWait = time.Second

// diskFailure takes the node out of service on the first failed write.
type diskFailure struct {
	logger hclog.Logger
	once   sync.Once
	leave  atomic.Pointer[func()] // refuse writes and unregister; set once the broker is built
	exit   func(code int)         // os.Exit; tests record the call instead
}

func newDiskFailure(logger hclog.Logger) *diskFailure {
	return &diskFailure{logger: logger, exit: os.Exit}
}

// report handles a failed write: the first call logs, leaves and exits; calls made meanwhile (on
// other goroutines) wait for it, so none of them returns into code that would go on.
func (d *diskFailure) report(op string, err error) {
	d.once.Do(func() {
		d.logger.Error("DISK FAILURE: a write to this node's data directory failed; it stops serving, unregisters and exits with code 74 (EX_IOERR) without touching its files; fix the disk and start it again: it recovers from its files and rejoins its group by itself",
			"operation", op, "path", failedPath(err), "error", err)
		if f := d.leave.Load(); f != nil {
			done := make(chan struct{})
			go func() { (*f)(); close(done) }()
			select {
			case <-done:
			case <-time.After(diskFailureLeaveWait):
				d.logger.Warn("DISK FAILURE: unregistering took too long; exiting anyway")
			}
		}
		d.exit(DiskFailureExitCode)
	})
}

// IsDiskFailure reports whether err (from New) comes from a failed write to the data directory
// (the store's recovery could not write or sync a file): the caller exits with
// DiskFailureExitCode as a running node does, so a supervisor restarts it the same way.
func IsDiskFailure(err error) bool {
	return errors.Is(err, storage.ErrIO)
}

// failedPath is the file named by err, or "" when it names none.
func failedPath(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.New
	}
	return ""
}

// leaveOnDiskFailure is what the broker does before the exit: no more writes or registrations
// (role unknown, as a removed node), then unregister.
func (b *Broker) leaveOnDiskFailure() {
	b.place.leave()
	b.unregisterAll()
}
