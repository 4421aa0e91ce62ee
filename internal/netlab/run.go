package netlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// cmdTimeout bounds every ip/nft call: a wedged netlink call must fail the test, not hang it.
const cmdTimeout = 15 * time.Second

// sbinDirs are searched when a binary is not on PATH: ip and nft live in sbin, which is often
// missing from PATH in CI shells and sudo environments.
var sbinDirs = []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"}

// binary resolves an administration tool by name.
func binary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range sbinDirs {
		if p, err := exec.LookPath(dir + "/" + name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("netlab: %q not found on PATH or in %s", name, strings.Join(sbinDirs, ", "))
}

// run executes prog with args (and stdin, if not empty) under cmdTimeout and returns its
// stdout. Errors name the full command line and carry its stderr.
func run(stdin, prog string, args ...string) (string, error) {
	path, err := binary(prog)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.WaitDelay = time.Second
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("timed out after %v: %w", cmdTimeout, err)
		}
		return "", fmt.Errorf("netlab: %s %s: %w: %s", prog, strings.Join(args, " "), err,
			strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// ip runs the iproute2 ip command.
func ip(args ...string) error {
	_, err := run("", "ip", args...)
	return err
}

// nft runs an nftables script inside namespace ns; nft has no namespace option of its own.
func nft(ns, script string) error {
	_, err := run(script, "ip", "netns", "exec", ns, "nft", "-f", "-")
	return err
}
