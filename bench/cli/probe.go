package cli

import (
	"context"
	"io"
	"time"

	"github.com/spf13/pflag"

	"rocketraft/bench"
)

// probe is `mqbench probe`: how long a (re)started broker takes to serve a send or a pull
// (bench.RunProbe), timed from --since, the broker's exec as `date +%s%N` printed it.
func probe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg bench.ProbeConfig
	var addrs, since string
	fs := pflag.NewFlagSet("probe", pflag.ContinueOnError)
	fs.StringVarP(&addrs, "addr", "a", "", "broker address(es) tried in turn, ';'-separated")
	fs.StringVarP(&cfg.Topic, "topic", "t", "", "topic (it must exist on the brokers)")
	fs.StringVar(&cfg.Op, "op", bench.ProbeSend, "send (SEND_OK of one 1 KiB message to queue 0) or pull (FOUND at queue 0, offset 0)")
	fs.StringVar(&since, "since", "", "count from this instant, in nanoseconds since the epoch (default: the probe's start)")
	fs.DurationVar(&cfg.Timeout, "timeout", time.Minute, "give up after this long")
	fs.DurationVar(&cfg.Every, "every", 5*time.Millisecond, "pause between two rounds of attempts")
	if err := parse(fs, args, stderr, "Usage: mqbench probe -a <broker[;broker...]> -t <topic> [--op send|pull] [--since ns]"); err != nil {
		return err
	}
	cfg.Addrs = bench.ParseAddrs(addrs)
	var err error
	if cfg.Since, err = bench.ParseUnixNanos(since); err != nil {
		return err
	}
	_, err = bench.RunProbe(ctx, cfg, stdout)
	return err
}
