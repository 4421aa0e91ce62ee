package diskfail

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/storage"
)

// TestDiskFailureReportsOnceAndExits: the first failed write logs one DISK FAILURE line with the
// operation, the path and the error, runs the leave step, and exits with 74; concurrent and
// later reports add nothing.
func TestDiskFailureReportsOnceAndExits(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := hclog.New(&hclog.LoggerOptions{Output: &syncWriter{w: &buf, mu: &mu}})
	d := New(logger)
	var exits, leaves atomic.Int32
	var code atomic.Int32
	d.exit = func(c int) { exits.Add(1); code.Store(int32(c)) }
	leave := func() { leaves.Add(1) }
	d.SetLeave(leave)
	err := fmt.Errorf("storage I/O error: %w", &fs.PathError{Op: "write", Path: "/data/store/commitlog/00000000000000000000", Err: syscall.EIO})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); d.Report("commitlog write applying raft entry 7", err) }()
	}
	wg.Wait()
	if exits.Load() != 1 || code.Load() != ExitCode || leaves.Load() != 1 {
		t.Fatalf("exits %d (code %d), leaves %d; want one exit with %d after one leave", exits.Load(), code.Load(), leaves.Load(), ExitCode)
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if strings.Count(out, "DISK FAILURE:") != 1 {
		t.Fatalf("log:\n%s", out)
	}
	for _, want := range []string{"raft entry 7", "path=/data/store/commitlog/00000000000000000000", "input/output error", "exits with code 74"} {
		if !strings.Contains(out, want) {
			t.Fatalf("log lacks %q:\n%s", want, out)
		}
	}
}

// TestDiskFailureLeaveIsBounded: an unregistration that hangs does not keep the node up.
func TestDiskFailureLeaveIsBounded(t *testing.T) {
	d := New(hclog.NewNullLogger())
	exited := make(chan int, 1)
	d.exit = func(c int) { exited <- c }
	block := make(chan struct{})
	defer close(block)
	leave := func() { <-block }
	d.SetLeave(leave)
	began := time.Now()
	d.Report("raft log write of entries 1-2", syscall.EIO)
	if c := <-exited; c != ExitCode {
		t.Fatalf("exit %d", c)
	}
	if el := time.Since(began); el < LeaveWait || el > LeaveWait+2*time.Second {
		t.Fatalf("exited after %v, want about %v", el, LeaveWait)
	}
}

type syncWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestIsDiskFailure: a start-up error wrapping the store's I/O error is a disk failure; others
// (a bad configuration, a divergence) are not.
func TestIs(t *testing.T) {
	io := fmt.Errorf("open state machine: fsm: recover store: %w", fmt.Errorf("%w: fdatasync: %w", storage.ErrIO, syscall.EIO))
	if !Is(io) {
		t.Fatalf("%v is a disk failure", io)
	}
	if Is(fmt.Errorf("dLegerPeers: %w", errors.New("bad peer"))) {
		t.Fatal("a configuration error is not a disk failure")
	}
}
