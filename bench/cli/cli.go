// Package cli is mqbench's command line (flags, commands, profile), shared by cmd/mqbench and
// cmd/mqbench5, which differ only in the gRPC client they install with bench.UseGRPC: this
// repository's own (bench/grpcnative) or the official 5.x Go client (bench/grpc5). The two
// cannot share a binary, as they register the same protobuf names.
//
// Usage:
//
//	mqbench produce -n 127.0.0.1:9876 -t BenchTopic --mode sync --size 1024 --concurrency 256 --duration 30s
//	mqbench consume -n 127.0.0.1:9876 -t BenchTopic -g bench_group --duration 30s --expect 1000000
//	mqbench produce --client native -n 127.0.0.1:9876 -t BenchTopic --mode async --concurrency 256
//	mqbench produce --client grpc --endpoint 127.0.0.1:8081 -t BenchTopic --mode sync --concurrency 256 --connections 2
//	mqbench5 produce --client grpc --endpoint 127.0.0.1:8081 -t BenchTopic --mode sync --concurrency 256
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"rocketraft/bench"
	"rocketraft/internal/version"
)

const usage = `mqbench: benchmark a RocketMQ-compatible broker with the official Go client
(--client official, the default), this repository's light client (--client native), or a
RocketMQ 5 gRPC proxy (--client grpc --endpoint host:8081): with mqbench this repository's lean
gRPC client, with mqbench5 the official 5.x Go client.

Usage:
  mqbench produce -n <namesrv[;namesrv...]> -t <topic> [flags]
  mqbench consume -n <namesrv[;namesrv...]> -t <topic> -g <group> [flags]
  mqbench probe -a <broker[;broker...]> -t <topic> [--op send|pull] [--since ns]
  mqbench <command> --help
  mqbench --version

Each second one line is printed (msg/s, MiB/s, p50/p99/p999/max latency in
ms, errors; lines within the warm-up marked "warm-up"), then a summary of what
followed the warm-up (--warmup; the whole run if it ended within it). A producer's
summary also says how many sends were retried after a dead broker address or a
missing route (--route-retries) and the longest gap between successful sends.
`

// cpuProfile is the --cpuprofile flag, shared by all commands.
var cpuProfile string

// startProfile starts CPU profiling if --cpuprofile was given and returns
// the function that stops it.
func startProfile() (func(), error) {
	if cpuProfile == "" {
		return func() {}, nil
	}
	f, err := os.Create(cpuProfile)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// Run runs the command line args (without the program name) and returns the exit code.
func Run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	switch args[0] {
	case "produce":
		err = produce(ctx, args[1:], stdout, stderr)
	case "consume":
		err = consume(ctx, args[1:], stdout, stderr)
	case "probe":
		err = probe(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "--version", "-version", "version":
		fmt.Fprintln(stdout, version.Line(filepath.Base(os.Args[0])))
		return 0
	default:
		fmt.Fprintf(stderr, "mqbench: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err == pflag.ErrHelp {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "mqbench: %v\n", err)
		return 1
	}
	return 0
}

// commonFlags registers the flags shared by all commands.
func commonFlags(fs *pflag.FlagSet, c *bench.Common) {
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of mqbench itself to this file")
	fs.StringVarP(&c.NameServers, "namesrv", "n", "127.0.0.1:9876", "name server address(es), ';'-separated")
	fs.StringVarP(&c.Topic, "topic", "t", "BenchmarkTest", "topic")
	fs.DurationVarP(&c.Duration, "duration", "d", 30*time.Second, "run time (0: until another stop condition or Ctrl-C)")
	fs.DurationVar(&c.Warmup, "warmup", 3*time.Second, "warm-up: the initial period left out of the summary")
	fs.DurationVar(&c.Interval, "interval", time.Second, "reporting interval")
	fs.BoolVar(&c.JSON, "json", false, "print the summary as one JSON line on stdout (everything else on stderr)")
	fs.BoolVarP(&c.Quiet, "quiet", "q", false, "do not print per-interval lines")
	fs.IntVar(&c.MaxPrintedErrors, "print-errors", 10, "number of errors printed as they happen (all are counted)")
	fs.StringVar(&c.ClientLogLevel, "client-log-level", "error", "rocketmq client log level: debug, info, warn, error, fatal or off")
	fs.StringVar(&c.ClientLogFile, "client-log-file", "", "write the client's log to this file instead of stderr")
	fs.StringVar(&c.Client, "client", bench.ClientOfficial, "client: official (rocketmq-client-go), native (this repo's remoting client, cheap on CPU) or grpc (through a proxy, --endpoint: mqbench's own lean client, mqbench5's official 5.x client)")
	fs.StringVar(&c.Endpoint, "endpoint", "", "grpc client: the proxy's gRPC address(es), ';'-separated")
	fs.BoolVar(&c.GRPCTLS, "grpc-tls", false, "grpc client: dial TLS (the 5.x client's default) instead of plaintext")
	fs.IntVar(&c.Connections, "connections", 2, "native client: connections to each broker that requests are spread over; mqbench's grpc client: HTTP/2 connections to the proxy")
}

func parse(fs *pflag.FlagSet, args []string, stderr io.Writer, synopsis string) error {
	fs.SetOutput(stderr)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(stderr, "%s\n\nFlags:\n%s", synopsis, fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return nil
}

func produce(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg bench.ProduceConfig
	fs := pflag.NewFlagSet("produce", pflag.ContinueOnError)
	commonFlags(fs, &cfg.Common)
	fs.StringVar(&cfg.Mode, "mode", bench.ModeSync, "send mode: sync, async or oneway")
	fs.IntVarP(&cfg.Size, "size", "s", 1024, "message body size in bytes")
	fs.IntVarP(&cfg.Concurrency, "concurrency", "c", 256, "sending goroutines (sync, oneway) or sends in flight (async)")
	fs.IntVar(&cfg.Batch, "batch", 1, "messages per send call (>1: client batch send)")
	fs.Int64Var(&cfg.Messages, "messages", 0, "stop after sending this many messages (0: no limit)")
	fs.StringVar(&cfg.Tag, "tag", "", "message tag")
	fs.StringVarP(&cfg.Group, "group", "g", "mqbench_producer", "producer group")
	fs.IntVar(&cfg.Producers, "producers", 4, "producer instances (each with its own connection) sharing the load")
	fs.DurationVar(&cfg.SendTimeout, "send-timeout", 3*time.Second, "client send timeout")
	fs.IntVar(&cfg.Retries, "retries", -1, "client retries for sync/oneway sends (-1: client default, 3)")
	fs.IntVar(&cfg.CompressOver, "compress-over", 4096, "body size from which the client compresses (0: never)")
	fs.DurationVar(&cfg.SlowLog, "slow-log", 0, "log every send that takes at least this long, with its start time, on stderr (0: off)")
	fs.IntVar(&cfg.RouteRetries, "route-retries", bench.DefaultRouteRetries, "official and native clients: retries of a sync/oneway send that failed on a dead broker address (with a fresh route from the name server) or a missing route (0: off)")
	fs.Float64Var(&cfg.Rate, "rate", 0, "native client: send at most this many messages a second, evenly spaced, with at most --concurrency in flight (0: as fast as the senders go)")
	fs.StringVar(&cfg.Serialize, "serialize", bench.SerializeJSON, "native client: request header encoding, json or rocketmq (the binary header a Java client sends with rocketmq.serialize.type=ROCKETMQ; answers come back in it)")
	fs.BoolVar(&cfg.CreateTopic, "create-topic", false, "create the topic with the admin API first (needs -b)")
	fs.StringVarP(&cfg.TopicOptions.Brokers, "broker", "b", "", "broker address(es) for --create-topic, ';'-separated")
	fs.IntVar(&cfg.TopicOptions.Queues, "queues", 8, "read/write queue count for --create-topic")
	err := parse(fs, args, stderr, "Usage: mqbench produce -n <namesrv> -t <topic> [flags]")
	if err != nil {
		return err
	}
	if cfg.CreateTopic && cfg.TopicOptions.Brokers == "" {
		return fmt.Errorf("--create-topic needs --broker/-b")
	}
	stopProfile, err := startProfile()
	if err != nil {
		return err
	}
	defer stopProfile()
	_, err = bench.RunProduce(ctx, cfg, stdout, stderr)
	return err
}

func consume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg bench.ConsumeConfig
	fs := pflag.NewFlagSet("consume", pflag.ContinueOnError)
	commonFlags(fs, &cfg.Common)
	fs.StringVarP(&cfg.Group, "group", "g", "", "consumer group (default: a new group mqbench_consumer_<time>)")
	fs.StringVar(&cfg.Type, "type", bench.ConsumerPush, "consumer: push (PushConsumer) or pull (PullConsumer Poll/ACK)")
	fs.Int64Var(&cfg.Expect, "expect", 0, "stop after receiving this many messages (0: no limit)")
	fs.StringVar(&cfg.From, "from", "last", "where a new group starts: first or last")
	fs.StringVar(&cfg.Tag, "tag", "*", "subscription expression (tags)")
	fs.IntVar(&cfg.PullBatch, "pull-batch", 32, "messages per pull request (1..1024; brokers may cap it)")
	fs.IntVar(&cfg.ConsumeBatch, "consume-batch", 32, "most messages per push callback (1..1024)")
	fs.IntVar(&cfg.ConsumeGoroutines, "consume-goroutines", 0, "push callback concurrency (0: client default, 20)")
	fs.IntVar(&cfg.PullThresholdForQueue, "pull-threshold", 0, "push: cached messages per queue before pulling pauses (0: client default 1024; max 65535)")
	fs.IntVar(&cfg.MaxSpan, "max-span", 0, "push: cached offset span per queue before pulling pauses (0: client default 1000; max 65535)")
	fs.IntVar(&cfg.Pollers, "pollers", 2, "goroutines calling Poll (pull type)")
	fs.StringVar(&cfg.ReadAddr, "read-addr", "", "native client: pull every queue from this broker address (e.g. a follower) instead of the route's master")
	fs.DurationVar(&cfg.WaitTopic, "wait-topic", 30*time.Second, "keep retrying this long while the topic has no route")
	err := parse(fs, args, stderr, "Usage: mqbench consume -n <namesrv> -t <topic> -g <group> [flags]")
	if err != nil {
		return err
	}
	stopProfile, err := startProfile()
	if err != nil {
		return err
	}
	defer stopProfile()
	_, err = bench.RunConsume(ctx, cfg, stdout, stderr)
	return err
}
