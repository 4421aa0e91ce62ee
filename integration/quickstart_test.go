package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"rocketraft/admin"
)

// TestQuickStart follows the README's quick start from a fresh copy of the repository: build
// (make build), scripts/run.sh (what `make run` runs) with its ports moved by its environment
// variables, the printed producer command through the printed client address while the leader is
// killed with SIGKILL, the printed restart command, then Ctrl-C (SIGINT to the script's process
// group, as a terminal sends it). It asserts that the producer's longest gap between successful
// sends stays within 2 s, that the restarted node's first raftStatus shows its real applied index
// (at least what it had applied a marker sync before the kill) and a commit index not below it,
// and that Ctrl-C stops every process the script printed and ends it with status 0.
func TestQuickStart(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("the quick start needs make: %v", err)
	}
	clone := copyRepository(t)
	buildQuickStart(t, clone)

	data := filepath.Join(t.TempDir(), "data")
	ports := map[string]int{
		"NAMESRV_PORT":        freePort(t),
		"BROKER_PORT":         freePort(t, -2, 1, 8, 10, 11, 18, 20, 21),
		"RAFT_PORT":           freePort(t, 1, 2),
		"PROXY_PORT":          freePort(t),
		"PROXY_REMOTING_PORT": freePort(t),
		"HTTP_PORT":           freePort(t, 1, 2, 3, 4),
	}
	env := append(os.Environ(), "DATA="+data)
	for k, v := range ports {
		env = append(env, fmt.Sprintf("%s=%d", k, v))
	}

	out := &lockedBuffer{}
	script := exec.Command("./scripts/run.sh")
	script.Dir, script.Env = clone, env
	script.Stdout, script.Stderr = out, out
	script.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its own group, as a terminal's job
	startNotIgnoringSIGINT(t, script)
	exited := make(chan error, 1)
	go func() { exited <- script.Wait() }()
	var printedPIDs []int
	defer func() {
		// Leftovers of a failed run, by PID: the script's group, then what it printed.
		_ = syscall.Kill(-script.Process.Pid, syscall.SIGKILL)
		for _, p := range printedPIDs {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("scripts/run.sh output:\n%s", out.String())
		}
	}()

	waitOutput(t, out, exited, "Press Ctrl-C", 120*time.Second)
	banner := out.String()
	clients := mustMatch(t, banner, `(?m)^clients\s+: (\S+)`)
	if want := fmt.Sprintf("127.0.0.1:%d", ports["PROXY_REMOTING_PORT"]); clients != want {
		t.Fatalf("clients are given %s, want the proxy's remoting address %s", clients, want)
	}
	ns := fmt.Sprintf("127.0.0.1:%d", ports["NAMESRV_PORT"])
	pids := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^(?:name server|proxy|  (n[012]))\b.*?\bpid (\d+)`).FindAllStringSubmatch(banner, -1) {
		name := m[1]
		if name == "" {
			name = strings.Fields(m[0])[0]
		}
		pid, _ := strconv.Atoi(m[2])
		pids[name] = pid
		printedPIDs = append(printedPIDs, pid)
	}
	if len(pids) != 5 {
		t.Fatalf("printed PIDs %v, want the name server, the proxy and three nodes", pids)
	}
	leader := mustMatch(t, banner, `(?m)^  (n[012]) .*LEADER`)
	for _, url := range regexp.MustCompile(`http://127\.0\.0\.1:\d+/\S*`).FindAllString(banner, -1) {
		if code, body := httpStatus(t, "GET", url, ""); code != 200 {
			t.Errorf("printed status page %s: %d %s", url, code, body)
		}
	}
	produceCmd := mustMatch(t, banner, `(?m)^  (\./bin/mqbench produce .*)$`)
	if !strings.Contains(produceCmd, "-n "+clients) {
		t.Fatalf("the printed producer command %q does not use the client address %s", produceCmd, clients)
	}
	killCmd := mustMatch(t, banner, `(?m)^  (kill -9 \d+)`)
	if killCmd != fmt.Sprintf("kill -9 %d", pids[leader]) {
		t.Fatalf("printed %q, but the leader %s has pid %d", killCmd, leader, pids[leader])
	}
	restartCmd := mustMatch(t, banner, `(?m)^  (DATA=\S+ scripts/run\.sh restart n[012])`)
	if !strings.HasSuffix(restartCmd, " "+leader) {
		t.Fatalf("printed restart command %q is not the leader's (%s)", restartCmd, leader)
	}

	// The producer, as printed (shorter, and with its summary as JSON).
	args := append(strings.Fields(produceCmd)[1:], "-d", "16s", "--json")
	var prodOut, prodErr bytes.Buffer
	producer := exec.Command(filepath.Join(clone, "bin", "mqbench"), args...)
	producer.Dir, producer.Stdout, producer.Stderr = clone, &prodOut, &prodErr
	if err := producer.Start(); err != nil {
		t.Fatal(err)
	}
	prodDone := make(chan error, 1)
	go func() { prodDone <- producer.Wait() }()
	defer func() { _ = producer.Process.Kill() }()

	// What the leader has applied, a marker sync (1 s) and more before it is killed: its restart
	// must report at least that.
	time.Sleep(4 * time.Second)
	before := raftNode(t, clone, ns, leader)
	if before == nil || before.Status == nil || before.Status.AppliedIndex == 0 {
		t.Fatalf("leader %s before the kill: %+v", leader, before)
	}
	baseline := before.Status.AppliedIndex
	time.Sleep(2500 * time.Millisecond)
	if err := syscall.Kill(pids[leader], syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pids[leader], err)
	}
	waitOutput(t, out, exited, leader+" (pid "+strconv.Itoa(pids[leader])+") was killed by signal 9; restart it with: "+restartCmd, 10*time.Second)

	time.Sleep(time.Second)
	restart := exec.Command("sh", "-c", restartCmd)
	restart.Dir = clone
	restartOut, err := runBounded(restart, 30*time.Second)
	if err != nil {
		t.Fatalf("%s: %v\n%s", restartCmd, err, restartOut)
	}
	newPID, _ := strconv.Atoi(mustMatch(t, restartOut, `restarted `+leader+`: pid (\d+)`))
	printedPIDs = append(printedPIDs, newPID)

	// The restarted node's first status, and 1 s after it at most: its real indexes.
	var firstSeen time.Time
	var last *admin.RaftNode
	deadline := time.Now().Add(90 * time.Second)
	for {
		n := raftNode(t, clone, ns, leader)
		if n != nil && n.Status != nil && firstSeen.IsZero() {
			firstSeen = time.Now()
			t.Logf("restarted %s answers: commit %d applied %d (applied %d a marker sync before the kill)",
				leader, n.Status.CommitIndex, n.Status.AppliedIndex, baseline)
		}
		if n != nil && n.Status != nil {
			last = n
			if s := n.Status; s.AppliedIndex >= baseline && s.CommitIndex >= s.AppliedIndex {
				if d := time.Since(firstSeen); d > time.Second {
					t.Errorf("restarted %s showed its real indexes %v after it first answered", leader, d.Round(time.Millisecond))
				}
				break
			}
		}
		if !firstSeen.IsZero() && time.Since(firstSeen) > time.Second {
			t.Fatalf("restarted %s shows commit %d applied %d for over 1 s, want applied >= %d and commit >= applied",
				leader, last.Status.CommitIndex, last.Status.AppliedIndex, baseline)
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted %s did not answer raftStatus within 90 s", leader)
		}
		time.Sleep(100 * time.Millisecond)
	}

	select {
	case err := <-prodDone:
		if err != nil {
			t.Fatalf("producer: %v\n%s", err, prodErr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the producer did not end within 60 s\n%s", prodErr.String())
	}
	var sum struct {
		TotalMsgs    uint64  `json:"total_msgs"`
		TotalErrors  uint64  `json:"total_errors"`
		Retried      uint64  `json:"retried"`
		LongestGapMs float64 `json:"longest_gap_ms"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(prodOut.Bytes()), &sum); err != nil {
		t.Fatalf("producer summary %q: %v\n%s", prodOut.String(), err, prodErr.String())
	}
	t.Logf("producer through %s: %d msgs, %d errors, %d retried, longest gap %.0f ms", clients, sum.TotalMsgs, sum.TotalErrors, sum.Retried, sum.LongestGapMs)
	if sum.TotalMsgs == 0 || sum.LongestGapMs > 2000 {
		t.Errorf("producer through %s: %d msgs, longest gap %.0f ms, want messages and a gap of at most 2 s\n%s",
			clients, sum.TotalMsgs, sum.LongestGapMs, prodErr.String())
	}

	// Ctrl-C.
	if err := syscall.Kill(-script.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("scripts/run.sh after Ctrl-C: %v, want exit status 0", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("scripts/run.sh did not end within 90 s of Ctrl-C")
	}
	for _, p := range printedPIDs {
		if err := syscall.Kill(p, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d still exists after Ctrl-C (kill -0: %v)", p, err)
		}
	}
}

// copyRepository copies the files of this repository a fresh clone would have (tracked ones and
// new ones not ignored, as they are in the working tree) into a temporary directory.
func copyRepository(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	list, err := exec.Command("git", "-C", src, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v", src, err)
	}
	dst := filepath.Join(t.TempDir(), "rocketraft")
	for _, rel := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		from := filepath.Join(src, rel)
		info, err := os.Lstat(from)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if !info.Mode().IsRegular() {
			continue
		}
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// buildQuickStart runs `make build` in the copy. Its compiled packages come from the build cache
// (make build uses -trimpath, so a copy elsewhere compiles to the same cache entries): what is
// left is linking the six binaries.
func buildQuickStart(t *testing.T, dir string) {
	t.Helper()
	start := time.Now()
	out, err := runBounded(exec.Command("make", "-C", dir, "build"), 10*time.Minute)
	if err != nil {
		t.Fatalf("make build in a fresh copy: %v\n%s", err, out)
	}
	t.Logf("make build in a fresh copy took %v", time.Since(start).Round(time.Millisecond))
}

// startNotIgnoringSIGINT starts cmd with SIGINT at its default disposition even if this process
// ignores it (a shell that started it in the background without job control): a signal ignored
// on entry cannot be trapped by the script, and Ctrl-C is what the test sends.
func startNotIgnoringSIGINT(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if signal.Ignored(os.Interrupt) {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt) // a handler, which exec resets to the default
		defer signal.Stop(ch)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

// runBounded runs cmd in a process group of its own, killing the group after limit (make's
// children too), and returns its combined output.
func runBounded(cmd *exec.Cmd, limit time.Duration) (string, error) {
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second // a grandchild holding the output open does not hold Wait
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(limit):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return out.String(), fmt.Errorf("did not finish within %v", limit)
	}
}

// raftNode returns node id's entry in `mqadmin raftStatus -o json`, or nil if the command failed
// or does not list it.
func raftNode(t *testing.T, clone, ns, id string) *admin.RaftNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(clone, "bin", "mqadmin"), "raftStatus", "-n", ns, "-o", "json")
	cmd.Stderr = io.Discard
	out, _ := cmd.Output() // an unreachable node makes it exit non-zero, with the JSON printed
	var groups []admin.RaftGroup
	if err := json.Unmarshal(out, &groups); err != nil {
		return nil
	}
	for _, g := range groups {
		for i, n := range g.Nodes {
			if n.NodeID == id || n.Status != nil && n.Status.NodeID == id {
				return &g.Nodes[i]
			}
		}
	}
	return nil
}

// waitOutput waits until out contains want, failing the test if the script exits or limit passes.
func waitOutput(t *testing.T, out *lockedBuffer, exited chan error, want string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !strings.Contains(out.String(), want) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("scripts/run.sh exited (%v) before printing %q", err, want)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("scripts/run.sh did not print %q within %v", want, limit)
		}
	}
}

// mustMatch returns the first group of re's first match in s.
func mustMatch(t *testing.T, s, re string) string {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no match for %s in:\n%s", re, s)
	}
	return m[1]
}

// lockedBuffer is a bytes.Buffer several goroutines write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
