package main

import (
	"io"
	"strings"
	"testing"

	"rocketraft/bench"
)

// TestGRPCClient: the command runs (a binary linking both the official 5.x client and
// proxy/rmqpb would panic before any test), installs its own gRPC client, and --client grpc
// without --endpoint is a usage error.
func TestGRPCClient(t *testing.T) {
	if code := run([]string{"--help"}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	if got := bench.GRPCClientName(); got != "grpc5" {
		t.Fatalf("gRPC client %q, want grpc5", got)
	}
	var errs strings.Builder
	if code := run([]string{"produce", "--client", "grpc", "-t", "T", "-d", "1s"}, io.Discard, &errs); code != 1 || !strings.Contains(errs.String(), "--endpoint") {
		t.Fatalf("exit %d, stderr %q; want 1 and a word on --endpoint", code, errs.String())
	}
}
