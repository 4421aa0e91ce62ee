package netlab

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// lockTimeout bounds the wait for another lab (in this process or another) to finish claiming
// its index; claiming takes one `ip netns add`, so a long wait means something is stuck.
const lockTimeout = 30 * time.Second

// lockDirs are tried in order for the lock file: /run/lock is the system's place for lock
// files (tmpfs, so the file is gone after a reboot); the temporary directory is the fallback.
var lockDirs = []string{"/run/lock", os.TempDir()}

// lockName is the lock file shared by every process that builds labs.
const lockName = "rocketraft-netlab.lock"

// lockLabs takes an exclusive flock that serialises "pick a free index, create the switch
// namespace" across goroutines and processes: flock locks belong to open file descriptions,
// so two opens in one process exclude each other, and the kernel drops the lock when its
// holder dies. The netns directory itself cannot serve: `ip netns add` flocks it too, and
// would then wait for us forever.
func lockLabs() (unlock func(), err error) {
	f, err := openLockFile()
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	deadline := time.Now().Add(lockTimeout)
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = unix.Flock(fd, unix.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("netlab: flock %s: %w", f.Name(), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// openLockFile opens (creating if needed) the lock file in the first usable lockDirs entry.
func openLockFile() (*os.File, error) {
	var errs []error
	for _, dir := range lockDirs {
		f, err := os.OpenFile(dir+"/"+lockName, os.O_RDONLY|os.O_CREATE, 0o600)
		if err == nil {
			return f, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("netlab: open lock file: %w", errors.Join(errs...))
}
