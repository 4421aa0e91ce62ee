// Package sysmon keeps the Go runtime's system monitor thread (sysmon) out of its deep sleep, so
// that a broker going idle and busy again many times a second does not wake it with every
// system call.
//
// Why: sysmon sleeps deeply whenever every scheduler processor is idle, and the first system
// call made after that (the read of the next request, say) wakes it and sets its poll back to
// every 20 us, which it keeps for about a millisecond before backing off again. A three-node
// group serving a lone synchronous producer goes idle and busy several times per message on
// every node: half of the brokers' context switches were sysmon's (its polls and its deep
// sleeps), CPU spent per message (docs/benchmarks.md, "sysmon out of deep sleep"). Out of deep
// sleep, sysmon backs off to one poll every 10 ms while it finds nothing to do, and keeps its
// duties: a processor blocked in a system call is still taken back, a goroutine running too long
// still preempted, the network still polled.
//
// How: the Go runtime skips sysmon's deep sleep while GODEBUG's schedtrace is set (the scheduler
// trace needs sysmon awake to print on time). Setting holds a period so long (2^31-1 ms) that
// the trace line is printed at most once per 24.8 days of the host's uptime, and the runtime
// reads GODEBUG only when a process starts, hence Reexec.
package sysmon

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Setting is the GODEBUG entry that keeps sysmon out of its deep sleep.
const Setting = "schedtrace=2147483647"

// InEffect reports whether this process started with schedtrace set in GODEBUG (Setting, or
// whatever value the operator chose: theirs stands).
func InEffect() bool { return setsSchedtrace(os.Getenv("GODEBUG")) }

// setsSchedtrace reports whether a GODEBUG value has a schedtrace entry, read as the runtime
// reads it (keys exactly as written).
func setsSchedtrace(godebug string) bool {
	for _, field := range strings.Split(godebug, ",") {
		if k, _, ok := strings.Cut(field, "="); ok && k == "schedtrace" {
			return true
		}
	}
	return false
}

// Env returns environ with Setting added to GODEBUG (after the entries already there), and
// false with environ unchanged when GODEBUG already sets schedtrace. Of several GODEBUG entries
// the first is the one a Go program reads; Env keeps that one's settings, in a single entry.
func Env(environ []string) ([]string, bool) {
	out := make([]string, 0, len(environ)+1)
	godebug, found := "", false
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			if !found {
				godebug, found = v, true
			}
			continue
		}
		out = append(out, kv)
	}
	if setsSchedtrace(godebug) {
		return environ, false
	}
	if godebug != "" {
		godebug += "," + Setting
	} else {
		godebug = Setting
	}
	return append(out, "GODEBUG="+godebug), true
}

// Reexec replaces the process with the same binary and arguments started with Env's
// environment, unless InEffect; the process id, open standard streams and everything else
// exec keeps stay. It returns nil when there was nothing to do and an error when exec failed
// (the process then goes on as it is). It must run before the process opens anything it
// would not want closed (descriptors Go opens are close-on-exec) and before it starts serving.
func Reexec() error {
	if InEffect() {
		return nil
	}
	env, changed := Env(os.Environ())
	if !changed {
		return nil
	}
	// /proc/self/exe is the running binary even when its path was replaced or removed since.
	if err := syscall.Exec("/proc/self/exe", os.Args, env); err != nil {
		return fmt.Errorf("re-execute with GODEBUG=%s: %w", Setting, err)
	}
	return nil // not reached
}
