package netlab

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Sweep deletes the namespaces of labs whose creating process has exited: a test binary that
// was killed never ran its Close, and its namespaces would otherwise pile up and hold their
// subnets. It only considers names of the form "rrlab<pid>x<index>-...", so it never touches
// namespaces that belong to anything else. New runs it too. A PID that has been reused by an
// unrelated process makes its lab look alive; that lab is kept until the PID is free again.
func Sweep() error {
	unlock, err := lockLabs()
	if err != nil {
		return err
	}
	defer unlock()
	return sweepLocked()
}

// sweepLocked is Sweep for a caller that holds the netns lock.
func sweepLocked() error {
	list, err := labNamespaces()
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range list {
		if ns.pid == os.Getpid() || alive(ns.pid) {
			continue
		}
		if err := ip("netns", "del", ns.name); err != nil && nsExists(ns.name) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// alive reports whether a process with this PID exists. PIDs that cannot name a single
// process count as alive, so they are never swept.
func alive(pid int) bool {
	if pid <= 1 {
		return true
	}
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
