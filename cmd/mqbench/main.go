// Command mqbench benchmarks a RocketMQ-compatible broker through the official Go client, this
// repository's light remoting client (--client native), or a RocketMQ 5 gRPC proxy with this
// repository's lean gRPC client (--client grpc). The official 5.x Go client through a proxy is
// cmd/mqbench5: it cannot share a binary with this repository's stubs. Flags: bench/cli; what
// is measured: package rocketraft/bench.
package main

import (
	"io"
	"os"

	"rocketraft/bench"
	"rocketraft/bench/cli"
	"rocketraft/bench/grpcnative"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run installs this command's gRPC client and runs the command line.
func run(args []string, stdout, stderr io.Writer) int {
	bench.UseGRPC(grpcnative.Client)
	return cli.Run(args, stdout, stderr)
}
