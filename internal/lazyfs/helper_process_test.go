package lazyfs

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv, when set, makes the test binary act as a separate program
// using the mount. Page faults on a FUSE mapping must not happen in the
// process that serves the mount: a fault blocks its thread in the kernel
// outside any system call, which can stall the Go runtime that must answer
// it.
const helperEnv = "LAZYFS_TEST_HELPER"

// runHelper is the child's main. Both modes write TEXT at OFFSET of PATH
// through a shared writable mapping of the whole file and msync it if MSYNC
// is "1" (args: PATH OFFSET TEXT MSYNC). mmap-write then unmaps, closes and
// exits; mmap-hold prints "ready" and keeps the mapping until killed, like a
// broker caught by the power cut.
func runHelper(mode string, args []string) int {
	if (mode != "mmap-write" && mode != "mmap-hold") || len(args) != 4 {
		fmt.Fprintf(os.Stderr, "bad helper call %q %q\n", mode, args)
		return 2
	}
	off, err := strconv.Atoi(args[1])
	var m []byte
	if err == nil {
		m, err = mmapWrite(args[0], off, []byte(args[2]), args[3] == "1")
	}
	if err == nil && mode == "mmap-write" {
		err = unix.Munmap(m)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if mode == "mmap-hold" {
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
	}
	return 0
}

// mmapWrite maps the whole file shared and writable, writes text at off and
// msyncs if asked; the mapping outlives the descriptor.
func mmapWrite(path string, off int, text []byte, msync bool) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	copy(m[off:], text)
	if msync {
		if err := unix.Msync(m, unix.MS_SYNC); err != nil {
			return nil, fmt.Errorf("msync: %w", err)
		}
	}
	return m, nil
}

// runMmapWrite runs the mmap-write helper in a child process.
func runMmapWrite(t *testing.T, path string, off int, text string, msync bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	flag := "0"
	if msync {
		flag = "1"
	}
	cmd := exec.CommandContext(ctx, os.Args[0], path, strconv.Itoa(off), text, flag)
	cmd.Env = append(os.Environ(), helperEnv+"=mmap-write")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mmap helper: %v: %s", err, out)
	}
}

// startMmapHolder starts the mmap-hold helper and waits until it wrote; the
// caller stops and kills it.
func startMmapHolder(t *testing.T, path string, off int, text string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], path, strconv.Itoa(off), text, "0")
	cmd.Env = append(os.Environ(), helperEnv+"=mmap-hold")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("helper said %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("mmap holder: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("mmap holder did not get ready")
	}
	return cmd
}
