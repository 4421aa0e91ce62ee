package integration

import (
	"bufio"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// distVersion is the version TestDist stamps, to find it again in --version and /status.
const distVersion = "v0.0.0-disttest"

// distBinaries are the programs every release tarball holds (the Makefile's BINARIES).
var distBinaries = []string{"mqnamesrv", "mqbroker", "mqadmin", "mqbench", "mqbench5", "mqproxy"}

// TestDist follows a user who downloads a release: make dist for this machine's architecture
// (scripts/dist.sh), the tarball checked against SHA256SUMS, unpacked with tar into an empty
// directory; every binary is a static ELF for the architecture (no interpreter, no shared
// libraries); ./mqnamesrv --version runs with an empty environment and names the stamped
// version; then the unpacked mqnamesrv and three mqbroker nodes started from the shipped
// config/dledger/broker-n{0,1,2}.properties, moved to free loopback ports with their Raft peers
// named by host name (as deploy/ names them), all answer /status/ready with 200 (leader and
// caught-up followers) and /status with the stamped version, the group's master shows in the
// unpacked mqadmin's route, and every process exits 0 on SIGTERM. The first run compiles the static variant of every
// package (minutes on a busy machine); later runs reuse the build cache.
func TestDist(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	mk := exec.CommandContext(ctx, "make", "--no-print-directory", "dist", "DIST_ARCHS="+runtime.GOARCH, "DIST_DIR="+out, "VERSION="+distVersion)
	mk.Dir = root
	if b, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make dist: %v\n%s", err, b)
	}
	t.Logf("make dist DIST_ARCHS=%s: %v", runtime.GOARCH, time.Since(start).Round(100*time.Millisecond))

	name := fmt.Sprintf("rocketraft-%s-linux-%s", distVersion, runtime.GOARCH)
	tarball := filepath.Join(out, name+".tar.gz")
	checkSums(t, filepath.Join(out, "SHA256SUMS"), map[string]string{name + ".tar.gz": tarball})

	unpack := t.TempDir()
	if b, err := exec.Command("tar", "-C", unpack, "-xzf", tarball).CombinedOutput(); err != nil {
		t.Fatalf("tar xzf: %v\n%s", err, b)
	}
	dir := filepath.Join(unpack, name)
	for _, f := range []string{"LICENSE", "README.md", "config/broker.properties", "config/dledger/broker-n0.properties",
		"config/dledger/broker-n1.properties", "config/dledger/broker-n2.properties", "config/plain_acl.example.yml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("tarball: %v", err)
		}
	}
	for _, b := range distBinaries {
		checkStatic(t, filepath.Join(dir, b))
	}

	// --version on a machine with nothing set up: no environment at all.
	v := exec.Command("./mqnamesrv", "--version")
	v.Dir, v.Env = dir, []string{}
	vout, err := v.CombinedOutput()
	if err != nil || !strings.Contains(string(vout), distVersion) {
		t.Fatalf("./mqnamesrv --version: %v, %q; want the stamped %s", err, vout, distVersion)
	}
	t.Logf("./mqnamesrv --version: %s", strings.TrimSpace(string(vout)))

	runFromDist(t, dir)
}

// checkSums verifies that sums (a SHA256SUMS file) lists exactly files (name → path) with
// their digests.
func checkSums(t *testing.T, sums string, files map[string]string) {
	t.Helper()
	f, err := os.Open(sums)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		digest, file, ok := strings.Cut(sc.Text(), "  ")
		path, known := files[file]
		if !ok || !known {
			t.Fatalf("SHA256SUMS line %q: not one of %v", sc.Text(), files)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != digest {
			t.Fatalf("SHA256SUMS: %s does not match", file)
		}
		seen++
	}
	if seen != len(files) {
		t.Fatalf("SHA256SUMS lists %d files, want %d", seen, len(files))
	}
}

// checkStatic asserts that path is an ELF executable for this architecture that needs no
// dynamic loader and no shared library.
func checkStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
	if f.Machine != want {
		t.Errorf("%s: machine %v, want %v", path, f.Machine, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s: has a dynamic loader (PT_INTERP): not static", path)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s: needs shared libraries %v", path, libs)
	}
}

// runFromDist starts the unpacked name server and the three nodes of the shipped
// config/dledger/ files on free loopback ports and checks that they serve.
func runFromDist(t *testing.T, dir string) {
	work := t.TempDir()
	nsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	ns := &proc{name: "dist mqnamesrv", bin: filepath.Join(dir, "mqnamesrv"), args: []string{"--listen", nsAddr},
		env: []string{"HOME=" + work}, logPath: filepath.Join(work, "namesrv.log")}
	ns.start(t)
	register(t, ns)
	eventually(t, 15*time.Second, "the unpacked name server answers", func() error {
		if err := ns.exited(); err != nil {
			return permanent{err}
		}
		return namesrvAlive(nsAddr)
	})

	// The three shipped nodes, as the README starts them. Their Raft peers are named by host name
	// (localhost), as the compose file and the Kubernetes manifests name theirs.
	var raft [3]int
	for i := range raft {
		raft[i] = freePort(t)
	}
	peers := fmt.Sprintf("n0-localhost:%d;n1-localhost:%d;n2-localhost:%d", raft[0], raft[1], raft[2])
	var nodes []*proc
	var bases, addrs []string
	for i := range 3 {
		port, httpPort := freePort(t, 1), freePort(t)
		br := &proc{name: fmt.Sprintf("dist mqbroker n%d", i), bin: filepath.Join(dir, "mqbroker"),
			logPath: filepath.Join(work, fmt.Sprintf("n%d.log", i)), env: []string{"HOME=" + work},
			args: []string{"-c", filepath.Join(dir, fmt.Sprintf("config/dledger/broker-n%d.properties", i)), "-n", nsAddr,
				"--listenPort", strconv.Itoa(port), "--dLegerPeers", peers,
				"--storePathRootDir", filepath.Join(work, fmt.Sprintf("n%d", i)), "--httpPort", strconv.Itoa(httpPort)}}
		br.start(t)
		register(t, br)
		nodes = append(nodes, br)
		bases = append(bases, fmt.Sprintf("http://127.0.0.1:%d", httpPort))
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", port))
	}
	// Ready: the leader accepts writes, the followers are in touch and caught up (broker/ready.go).
	for i, base := range bases {
		eventually(t, 30*time.Second, fmt.Sprintf("unpacked node n%d is ready", i), func() error {
			if err := nodes[i].exited(); err != nil {
				return permanent{err}
			}
			return wantOK(base + "/status/ready")
		})
	}
	roles := map[string]int{}
	for i, base := range bases {
		var st struct {
			Version struct {
				Version string `json:"version"`
			} `json:"version"`
			Role string `json:"role"`
		}
		if err := getJSON(base+"/status", &st); err != nil || st.Version.Version != distVersion {
			t.Fatalf("n%d /status: %v, version %q, want %q", i, err, st.Version.Version, distVersion)
		}
		roles[st.Role]++
	}
	eventually(t, 15*time.Second, "the unpacked mqadmin shows the group's master in the route", func() error {
		cmd := exec.Command(filepath.Join(dir, "mqadmin"), "topicRoute", "-n", nsAddr, "-t", "TBW102")
		cmd.Env = []string{"HOME=" + work}
		b, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(b), "broker-a") || !containsAny(string(b), addrs) {
			return fmt.Errorf("mqadmin topicRoute: %v: %s", err, b)
		}
		return nil
	})
	t.Logf("from the tarball: three nodes ready (roles %v), registered with %s", roles, nsAddr)
	for _, p := range append(nodes, ns) {
		if err := p.stop(); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		exitErr := p.exitErr
		p.mu.Unlock()
		if exitErr != nil {
			t.Errorf("%s: exit after SIGTERM: %v; log tail:\n%s", p.name, exitErr, tail(p.logPath, 4096))
		}
	}
}

// wantOK GETs url and wants 200 (the body, a reason, in the error otherwise).
func wantOK(url string) error {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return nil
}

// containsAny reports whether s contains one of subs.
func containsAny(s string, subs []string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}
