// Command mqbench5 is mqbench (same commands and flags, bench/cli) whose --client grpc is the
// official 5.x Go client (github.com/apache/rocketmq-clients/golang/v5) through a RocketMQ 5
// gRPC proxy, producer and SimpleConsumer: what an application of that client gets. It is a
// command of its own because the client registers the same protobuf names as this
// repository's stubs, which mqbench's own gRPC producer uses.
package main

import (
	"io"
	"os"

	"rocketraft/bench"
	"rocketraft/bench/cli"
	"rocketraft/bench/grpc5"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run installs this command's gRPC client and runs the command line.
func run(args []string, stdout, stderr io.Writer) int {
	bench.UseGRPC(grpc5.Client)
	return cli.Run(args, stdout, stderr)
}
