package netlab

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// inNamespace runs fn on an OS thread that has joined the named network namespace, so that
// the sockets fn creates belong to that namespace. The thread is locked and never unlocked:
// when the goroutine ends, the Go runtime retires the thread instead of reusing it, so the
// namespace switch cannot leak into other goroutines, and the runtime never clones new
// threads from a locked one. fn must do its work synchronously; goroutines it starts run
// elsewhere, in the process's own namespace.
func inNamespace(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- enterAndRun(ns, fn)
	}()
	return <-errc
}

// enterAndRun joins ns on the current (locked) thread and runs fn there.
func enterAndRun(ns string, fn func() error) error {
	fd, err := unix.Open(netnsDir+"/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netlab: open namespace %s: %w", ns, err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("netlab: enter namespace %s: %w", ns, err)
	}
	return fn()
}

// disableIPv6 turns IPv6 off for every interface created in ns from now on (lo, which
// already exists, keeps ::1). Lab links then carry no router solicitations, duplicate address
// detection or multicast listener reports: IPv4 and ARP only. Net sysctls are resolved against
// the namespace of the thread that opens them, so this writes from inside ns.
func disableIPv6(ns string) error {
	return inNamespace(ns, func() error {
		err := os.WriteFile("/proc/sys/net/ipv6/conf/default/disable_ipv6", []byte("1\n"), 0)
		if errors.Is(err, os.ErrNotExist) {
			return nil // kernel without IPv6: nothing to disable
		}
		if err != nil {
			return fmt.Errorf("netlab: disable IPv6 in %s: %w", ns, err)
		}
		return nil
	})
}
