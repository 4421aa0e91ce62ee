package integration

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"

	"rocketraft/internal/testport"
)

// binDir holds mqnamesrv and mqbroker, built once by TestMain; buildErr is set instead when
// the build failed (tests that need the binaries then fail at once; the codec tests still run).
var (
	binDir   string
	buildErr error
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The tests are I/O bound (they wait on child processes); run more of them at once than
	// the default GOMAXPROCS unless -parallel was given explicitly.
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "6")
	}
	rlog.SetLogLevel("error")
	if os.Getenv(tlsClientEnv) != "" { // this process is a TLS test's client (tls_test.go)
		os.Exit(tlsClientMain())
	}

	if err := loadLabHosts(); err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		os.Exit(1)
	}
	if d := os.Getenv("RR_BIN_DIR"); d != "" {
		binDir = d
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "rocketraft-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		os.Exit(1)
	}
	binDir, buildErr = dir, build(dir)
	if buildErr != nil {
		fmt.Fprintln(os.Stderr, "integration:", buildErr)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// build compiles the daemons into dir.
func build(dir string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goTool, "build", "-o", dir+string(os.PathSeparator),
		"rocketraft/cmd/mqnamesrv", "rocketraft/cmd/mqbroker", "rocketraft/cmd/mqproxy")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building mqnamesrv, mqbroker and mqproxy failed (%v):\n%s", err, out.String())
	}
	fmt.Fprintf(os.Stderr, "integration: built mqnamesrv, mqbroker and mqproxy in %v\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// needBinaries fails the test if the daemons could not be built.
func needBinaries(t testing.TB) {
	t.Helper()
	if buildErr != nil {
		t.Fatalf("the binaries were not built: %v", buildErr)
	}
}

// eventually calls f until it returns nil or timeout passes, then fails the test with f's last
// error. It polls every 50 ms at first, backing off to 500 ms.
func eventually(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	if err := poll(timeout, f); err != nil {
		t.Fatalf("%s: not done within %v: %v", what, timeout, err)
	}
}

// poll is eventually without the test: it returns f's last error on timeout.
func poll(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	wait := 50 * time.Millisecond
	for {
		err := f()
		if err == nil {
			return nil
		}
		var perm permanent
		if errors.As(err, &perm) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(wait)
		wait = min(wait*2, 500*time.Millisecond)
	}
}

var uniqCounter atomic.Int64

// uniq returns a name unique in this test process, e.g. for groups, topics and client
// instance names. (Go clients that share an instance name in one process share one
// connection pool and must also share name servers, so every client gets its own.)
func uniq(prefix string) string {
	return fmt.Sprintf("%s_%d_%d", prefix, os.Getpid()%100000, uniqCounter.Add(1))
}

// ---- ports ----

// freePort returns a loopback port below the kernel's ephemeral range that no other test in this
// process has been given (testport.Free); with lists offsets that must be free as well.
func freePort(t testing.TB, with ...int) int {
	t.Helper()
	return testport.Free(t, with...)
}

// ---- processes ----

// proc is one child process with its output in a log file.
type proc struct {
	name    string
	bin     string
	args    []string
	env     []string
	logPath string
	netns   string // run inside this network namespace (lab placement, labhosts_test.go)

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current run exits
	exitErr error
	runs    int
}

// start runs the process; its stdout and stderr are appended to the log file.
func (p *proc) start(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("%s: open log: %v", p.name, err)
	}
	p.runs++
	fmt.Fprintf(f, "==== run %d: %s %s\n", p.runs, p.bin, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	if p.netns != "" {
		// ip netns exec enters the namespace and execs the program: the PID is the program's.
		cmd = exec.Command("ip", append([]string{"netns", "exec", p.netns, p.bin}, p.args...)...)
	}
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("%s: start %s: %v", p.name, p.bin, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(done)
	}()
}

// running reports whether the current run has not exited.
func (p *proc) running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// exited returns a non-nil error describing the exit if the current run has ended.
func (p *proc) exited() error {
	if p.running() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Errorf("%s exited (%v); log tail:\n%s", p.name, p.exitErr, tail(p.logPath, 4096))
}

// signalAndWait sends sig to the process (by PID) and waits up to d for it to exit.
func (p *proc) signalAndWait(sig syscall.Signal, d time.Duration) bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return true
	}
	select {
	case <-done:
		return true
	default:
	}
	_ = syscall.Kill(cmd.Process.Pid, sig)
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// stop is a clean shutdown: SIGTERM, wait up to 15 s, then SIGKILL. It reports an error if
// SIGTERM was not enough.
func (p *proc) stop() error {
	if p.signalAndWait(syscall.SIGTERM, 15*time.Second) {
		return nil
	}
	// SIGQUIT makes a Go program print every goroutine's stack to its log and exit: what it
	// was waiting for.
	dumped := p.signalAndWait(syscall.SIGQUIT, 10*time.Second)
	if !dumped {
		p.signalAndWait(syscall.SIGKILL, 10*time.Second)
	}
	return fmt.Errorf("%s did not exit within 15s of SIGTERM; stopped with SIGQUIT (goroutine dump in %s: %v) or killed", p.name, p.logPath, dumped)
}

// kill is a crash: SIGKILL by PID and wait for the exit.
func (p *proc) kill() {
	if !p.signalAndWait(syscall.SIGKILL, 10*time.Second) {
		panic(p.name + ": still running 10s after SIGKILL")
	}
}

// tail returns the last n bytes of a file.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	st, _ := f.Stat()
	if st != nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// register arranges for p to be stopped in t.Cleanup and its log printed if t failed.
func register(t testing.TB, p *proc) {
	t.Cleanup(func() {
		if p.running() {
			if err := p.stop(); err != nil {
				t.Logf("cleanup: %v", err)
			}
		}
		if keep := os.Getenv("RR_KEEP_LOGS"); keep != "" {
			_ = os.MkdirAll(keep, 0o755)
			if b, err := os.ReadFile(p.logPath); err == nil {
				name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name() + "_" + p.name + ".log")
				_ = os.WriteFile(filepath.Join(keep, name), b, 0o644)
			}
		}
		if t.Failed() {
			t.Logf("---- %s log (last 32 KiB of %s) ----\n%s", p.name, p.logPath, tail(p.logPath, 32<<10))
		}
	})
}

// ---- name server ----

// namesrv is a running mqnamesrv.
type namesrv struct {
	*proc
	addr string
}

// startNamesrv starts a name server on a fresh loopback port and waits until it accepts TCP
// connections and answers a route query. extraArgs are added to its command line.
func startNamesrv(t testing.TB, extraArgs ...string) *namesrv {
	t.Helper()
	needBinaries(t)
	dir := t.TempDir()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		ip, netns := namesrvHost()
		addr := ip + ":" + strconv.Itoa(freePort(t))
		noteTLSArgs(addr, extraArgs)
		n := &namesrv{addr: addr, proc: &proc{
			name:    "mqnamesrv",
			bin:     filepath.Join(binDir, "mqnamesrv"),
			args:    append([]string{"--listen", addr}, extraArgs...),
			env:     []string{"HOME=" + dir},
			logPath: filepath.Join(dir, fmt.Sprintf("mqnamesrv-%d.log", attempt)),
			netns:   netns,
		}}
		n.start(t)
		register(t, n.proc)
		lastErr = poll(15*time.Second, func() error {
			if err := n.exited(); err != nil {
				return permanent{err}
			}
			return namesrvAlive(addr)
		})
		if lastErr == nil {
			return n
		}
		n.kill()
		if !strings.Contains(lastErr.Error(), "address already in use") {
			break
		}
	}
	t.Fatalf("mqnamesrv did not become ready: %v", lastErr)
	return nil
}

// namesrvAlive checks that addr answers GET_ROUTEINFO_BY_TOPIC (any response code).
func namesrvAlive(addr string) error {
	_, err := rawRequest(addr, codeGetRouteInfo, map[string]string{"topic": "TBW102"}, nil, 2*time.Second)
	return err
}

// permanent wraps an error that will not go away by waiting (e.g. the process died): poll
// returns it at once.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// ---- broker ----

// broker is one mqbroker process, restartable on the same ports and data directory.
type broker struct {
	*proc
	t          testing.TB
	name       string
	port       int
	addr       string // 127.0.0.1:port
	storeRoot  string
	nsAddr     string
	props      map[string]string // written to the -c file
	flags      map[string]string // passed as --key=value
	configPath string
	netns      string   // the network namespace it runs in ("": the test's own)
	env        []string // added to the test's environment
}

// brokerOpt adjusts the configuration of a broker before it starts.
type brokerOpt func(b *broker)

// withProp sets a key in the broker's properties file.
func withProp(key, value string) brokerOpt { return func(b *broker) { b.props[key] = value } }

// withHTTPPorts gives each broker it is applied to a free httpPort, recorded in ports under its
// dLegerSelfId.
func withHTTPPorts(t testing.TB, ports map[string]int) brokerOpt {
	return func(b *broker) {
		port := freePort(t)
		ports[b.props["dLegerSelfId"]] = port
		b.props["httpPort"] = strconv.Itoa(port)
	}
}

// withEnv adds KEY=value entries to the broker's environment.
func withEnv(kv ...string) brokerOpt { return func(b *broker) { b.env = append(b.env, kv...) } }

// withFlag passes --key=value on the broker's command line (flags override the file).
func withFlag(key, value string) brokerOpt { return func(b *broker) { b.flags[key] = value } }

// startBroker starts a broker registered with ns and waits until it is ready (see ready).
// Defaults for tests: 8 MiB commitlog segments, 3000-unit consume-queue files, ~4 MiB index
// files, 2 s registration period, ASYNC_FLUSH, autoCreateTopicEnable.
func startBroker(t testing.TB, ns *namesrv, opts ...brokerOpt) *broker {
	t.Helper()
	needBinaries(t)
	dir := t.TempDir()
	b := &broker{
		t:         t,
		name:      uniq("broker"),
		storeRoot: filepath.Join(dir, "store"),
		nsAddr:    ns.addr,
		props: map[string]string{
			"brokerClusterName":        "DefaultCluster",
			"brokerId":                 "0",
			"brokerRole":               "ASYNC_MASTER",
			"brokerIP1":                "127.0.0.1",
			"namesrvAddr":              ns.addr,
			"mappedFileSizeCommitLog":  strconv.Itoa(8 << 20),
			"flushDiskType":            "ASYNC_FLUSH",
			"autoCreateTopicEnable":    "true",
			"registerNameServerPeriod": "2000",
			// Small index and consume-queue files: a dozen brokers run at once.
			"maxHashSlotNum":            "50000",
			"maxIndexNum":               "200000",
			"mapedFileSizeConsumeQueue": strconv.Itoa(3000 * 20),
		},
		flags:      map[string]string{},
		configPath: filepath.Join(dir, "broker.properties"),
	}
	b.props["brokerName"] = b.name
	b.props["storePathRootDir"] = b.storeRoot
	for _, o := range opts {
		o(b)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		// listenPort-2 (VIP) and listenPort+1 (HA) are kept free too.
		b.port = freePort(t, -2, 1)
		b.addr = "127.0.0.1:" + strconv.Itoa(b.port)
		b.props["listenPort"] = strconv.Itoa(b.port)
		b.noteTLS()
		b.writeConfig()
		args := []string{"-c", b.configPath}
		for _, k := range slices.Sorted(maps.Keys(b.flags)) {
			args = append(args, "--"+k+"="+b.flags[k])
		}
		b.proc = &proc{
			name:    "mqbroker " + b.name,
			bin:     filepath.Join(binDir, "mqbroker"),
			args:    args,
			env:     append([]string{"HOME=" + dir}, b.env...),
			logPath: filepath.Join(dir, fmt.Sprintf("mqbroker-%d.log", attempt)),
		}
		b.start(t)
		register(t, b.proc)
		if lastErr = b.waitReady(30 * time.Second); lastErr == nil {
			return b
		}
		b.kill()
		if !strings.Contains(lastErr.Error(), "address already in use") {
			break
		}
	}
	t.Fatalf("broker did not become ready: %v", lastErr)
	return nil
}

func (b *broker) writeConfig() {
	var sb strings.Builder
	sb.WriteString("# written by the integration harness\n")
	for _, k := range slices.Sorted(maps.Keys(b.props)) {
		fmt.Fprintf(&sb, "%s=%s\n", k, b.props[k])
	}
	if err := os.WriteFile(b.configPath, []byte(sb.String()), 0o644); err != nil {
		b.t.Fatalf("write broker config: %v", err)
	}
}

// waitReady waits until the broker accepts TCP connections and the name server serves a
// route for TBW102 that names this broker's address (so it has registered).
func (b *broker) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	err := poll(timeout, func() error {
		if err := b.exited(); err != nil {
			return permanent{err}
		}
		c, err := net.DialTimeout("tcp", b.addr, time.Second)
		if err != nil {
			return fmt.Errorf("broker port %s not accepting: %w", b.addr, err)
		}
		c.Close()
		return nil
	})
	if err != nil {
		return err
	}
	return poll(time.Until(deadline), func() error {
		if err := b.exited(); err != nil {
			return permanent{err}
		}
		return routeHasBroker(b.nsAddr, "TBW102", b.addr)
	})
}

// restart starts the broker again on the same ports, config and data directory, after a
// stop or kill, and waits until it is ready.
func (b *broker) restart() {
	b.t.Helper()
	if b.running() {
		b.t.Fatalf("restart of a running broker")
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		b.start(b.t)
		if err = b.waitReady(30 * time.Second); err == nil {
			return
		}
		b.kill()
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
		// Someone else holds the port for a moment (TIME_WAIT, an outgoing socket): retry.
		time.Sleep(time.Second)
	}
	b.t.Fatalf("broker did not come back after restart: %v", err)
}

// cluster is one name server and one broker.
type cluster struct {
	ns *namesrv
	b  *broker
	// via, when set, is the name server list the clients are given instead of ns (the
	// remoting listeners of proxies, proxy4_test.go).
	via []string
}

// clientNameServers is the name server list the cluster's clients are given.
func (c *cluster) clientNameServers() []string {
	if len(c.via) > 0 {
		return c.via
	}
	return []string{c.ns.addr}
}

// startCluster starts a name server and one broker registered with it.
func startCluster(t testing.TB, opts ...brokerOpt) *cluster {
	t.Helper()
	ns := startNamesrv(t)
	return &cluster{ns: ns, b: startBroker(t, ns, opts...)}
}
