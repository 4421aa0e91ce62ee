package diskfail

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

// ExitCode is the broker's exit status after a disk failure: sysexits' EX_IOERR, so a
// supervisor (systemd Restart=on-failure, a container restart policy) tells it from a crash.
const ExitCode = 74

// LeaveWait bounds the leave step before the exit: the node still holds its Raft role meanwhile
// (a leader's heartbeats go on until the process ends), so failover waits for it.
const LeaveWait = time.Second

// Guard takes the node out of service on the first failed write.
type Guard struct {
	logger hclog.Logger
	once   sync.Once
	leave  atomic.Pointer[func()] // refuse writes and unregister; set once the broker is built
	exit   func(code int)         // os.Exit; tests record the call instead
}

// New returns a guard that logs to logger and exits the process.
func New(logger hclog.Logger) *Guard {
	return &Guard{logger: logger, exit: os.Exit}
}

// SetLeave sets what the node does before the exit (refuse writes, unregister).
func (d *Guard) SetLeave(leave func()) { d.leave.Store(&leave) }

// Report handles a failed write: the first call logs, leaves and exits; calls made meanwhile (on
// other goroutines) wait for it, so none of them returns into code that would go on.
func (d *Guard) Report(op string, err error) {
	d.once.Do(func() {
		d.logger.Error("DISK FAILURE: a write to this node's data directory failed; it stops serving, unregisters and exits with code 74 (EX_IOERR) without touching its files; fix the disk and start it again: it recovers from its files and rejoins its group by itself",
			"operation", op, "path", failedPath(err), "error", err)
		if f := d.leave.Load(); f != nil {
			done := make(chan struct{})
			go func() { (*f)(); close(done) }()
			select {
			case <-done:
			case <-time.After(LeaveWait):
				d.logger.Warn("DISK FAILURE: unregistering took too long; exiting anyway")
			}
		}
		d.exit(ExitCode)
	})
}

// Is reports whether err comes from a failed write to the data directory (the store's recovery
// could not write or sync a file).
func Is(err error) bool {
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
