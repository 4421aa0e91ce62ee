package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMistypedKeyDidYouMean runs the real mqbroker and mqnamesrv with a mistyped key
// (listenPrt): without strictConfig the broker starts and its log names the key it meant; with
// strictConfig=true it exits with status 2 before binding anything, saying the same. --version
// exits 0 with the version line.
func TestMistypedKeyDidYouMean(t *testing.T) {
	ns := startNamesrv(t)
	b := startBroker(t, ns, withProp("listenPrt", "30911"))
	logData, _ := os.ReadFile(b.logPath)
	if !strings.Contains(string(logData), `unknown key \"listenPrt\" ignored (did you mean \"listenPort\"?)`) &&
		!strings.Contains(string(logData), `unknown key "listenPrt" ignored (did you mean "listenPort"?)`) {
		t.Errorf("the broker's log does not suggest listenPort for listenPrt:\n%s", tail(b.logPath, 2000))
	}

	dir := t.TempDir()
	cfg := filepath.Join(dir, "broker.properties")
	if err := os.WriteFile(cfg, []byte("strictConfig=true\nlistenPrt=30911\nstorePathRootDir="+filepath.Join(dir, "store")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{"mqbroker", "mqnamesrv"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, bin), "-c", cfg)
		cmd.Env = append(os.Environ(), "HOME="+dir)
		out, err := cmd.CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%s with strictConfig=true and listenPrt: %v, want exit status 2; output:\n%s", bin, err, out)
		}
		if !strings.Contains(string(out), `did you mean "listenPort"`) || !strings.Contains(string(out), "strictConfig=true") {
			t.Errorf("%s: output lacks the suggestion: %s", bin, out)
		}

		vctx, vcancel := context.WithTimeout(context.Background(), 10*time.Second)
		vout, err := exec.CommandContext(vctx, filepath.Join(binDir, bin), "--version").CombinedOutput()
		vcancel()
		if err != nil || !strings.HasPrefix(string(vout), bin+" rocketraft ") || !strings.Contains(string(vout), "commit ") {
			t.Errorf("%s --version: %v, %q", bin, err, vout)
		}
	}
}
