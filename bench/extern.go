package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// The gRPC clients live outside this package, each in a package of its own: the official 5.x Go
// client (bench/grpc5) and this repository's stubs (bench/grpcnative, on proxy/rmqpb) register
// the same protobuf names, and a binary that links both panics at start. A command installs one
// of them with UseGRPC (cmd/mqbench the native one, cmd/mqbench5 the official one); RunProduce
// and RunConsume hand Client == ClientGRPC runs to it. RunSends and RunPollers are the run
// machinery (recorder, reporter, error log, summary) such a client drives.

// ClientGRPC drives a proxy's gRPC MessagingService, through whichever gRPC client the command
// installed with UseGRPC.
const ClientGRPC = "grpc"

// GRPCClient is a gRPC client's produce and consume runs; a nil field is a run it does not have.
type GRPCClient struct {
	// Name tells the client apart in banners and summaries (e.g. "grpc-native", "grpc5").
	Name    string
	Produce func(ctx context.Context, cfg ProduceConfig, stdout, stderr io.Writer) (*Summary, error)
	Consume func(ctx context.Context, cfg ConsumeConfig, stdout, stderr io.Writer) (*Summary, error)
}

// grpcClient is the client UseGRPC installed.
var grpcClient GRPCClient

// UseGRPC installs the gRPC client that --client grpc runs use; call it before RunProduce or
// RunConsume.
func UseGRPC(c GRPCClient) { grpcClient = c }

// GRPCClientName is the name of the installed gRPC client, "" if there is none.
func GRPCClientName() string { return grpcClient.Name }

// Sends is how RunSends sends one message.
type Sends struct {
	// Sync sends one message and returns when it is acknowledged (nil) or failed.
	Sync func(ctx context.Context) error
	// Async starts one send and calls done with its outcome. Nil: async mode keeps Concurrency
	// goroutines calling Sync, which for a client whose calls block is the same thing.
	Async func(ctx context.Context, done func(error))
}

// RunSends is a produce run of a gRPC client: Concurrency goroutines looping on s.Sync (sync
// mode), or Concurrency s.Async calls in flight (async mode), each send with SendTimeout, until
// Duration, Messages or ctx ends it; a failed send is counted and its sender pauses for
// errorBackoff. banner is the first line on stderr, client the summary's client.
func RunSends(ctx context.Context, cfg ProduceConfig, client, banner string, s Sends, stdout, stderr io.Writer) (*Summary, error) {
	if cfg.Mode == ModeOneway || cfg.Batch > 1 {
		return nil, fmt.Errorf("the gRPC clients send one message per call, sync or async (no oneway, no --batch)")
	}
	lines, summaryOut := stdout, stdout
	if cfg.JSON {
		lines = stderr
	}
	if cfg.Quiet {
		lines = nil
	}
	rec := newSendRecorder(&cfg, stderr)
	elog := newErrorLog(stderr, cfg.MaxPrintedErrors)
	rep := newReporter(rec, lines, "lat", cfg.Interval, cfg.Warmup, false)
	fmt.Fprintln(stderr, banner)
	var (
		stopped atomic.Bool
		wg      sync.WaitGroup
		budget  = sendBudget{limit: cfg.Messages}
	)
	finished, repDone := make(chan struct{}), make(chan struct{})
	go func() { rep.run(finished); close(repDone) }()
	fail := func(err error) {
		rec.RecordError()
		elog.Add(err)
	}
	for range cfg.Concurrency {
		wg.Add(1)
		if cfg.Mode == ModeAsync && s.Async != nil {
			var launch func()
			launch = func() {
				if stopped.Load() || budget.take(1) == 0 {
					wg.Done()
					return
				}
				t0 := time.Now()
				sctx, cancel := context.WithTimeout(context.Background(), cfg.SendTimeout)
				s.Async(sctx, func(err error) {
					cancel()
					if err != nil {
						fail(err)
						time.AfterFunc(errorBackoff, launch)
						return
					}
					rec.RecordOp(time.Since(t0), 1, cfg.Size)
					launch()
				})
			}
			launch()
			continue
		}
		go func() {
			defer wg.Done()
			for !stopped.Load() && budget.take(1) > 0 {
				t0 := time.Now()
				sctx, cancel := context.WithTimeout(context.Background(), cfg.SendTimeout)
				err := s.Sync(sctx)
				cancel()
				if err != nil {
					fail(err)
					time.Sleep(errorBackoff)
					continue
				}
				rec.RecordOp(time.Since(t0), 1, cfg.Size)
			}
		}()
	}
	workersDone := make(chan struct{})
	go func() { wg.Wait(); close(workersDone) }()
	waitForEnd(ctx, cfg.Duration, workersDone)
	stopped.Store(true)
	grace := time.NewTimer(cfg.SendTimeout + 2*time.Second)
	defer grace.Stop()
	select {
	case <-workersDone:
	case <-grace.C:
		fmt.Fprintf(stderr, "warning: senders did not stop within %s\n", cfg.SendTimeout+2*time.Second)
	}
	close(finished)
	<-repDone
	sum := &Summary{Kind: "produce", Mode: cfg.Mode, Client: client, Topic: cfg.Topic, Size: cfg.Size, Batch: 1,
		Concurrency: cfg.Concurrency, Latency: "send"}
	rep.win.summary(sum)
	sum.setRecovery(0, rec.LongestGap(time.Now())) // the proxy fails over; nothing is re-routed here
	sum.TopErrors = elog.Top(5)
	printSummary(sum, cfg.JSON, summaryOut, stderr)
	return sum, nil
}

// PollSink is what a gRPC consumer's poll reports to: received messages, failures, and the
// count that ends a run with Expect.
type PollSink struct {
	rec  *Recorder
	elog *errorLog
	cnt  *consumeCounter
}

// Record adds one receive to the statistics (f fills in Ops, Msgs, Bytes and latencies).
func (p *PollSink) Record(f func(st *Stats)) { p.rec.RecordBatch(f) }

// Fail counts one failed call and logs err.
func (p *PollSink) Fail(err error) {
	p.rec.RecordError()
	p.elog.Add(err)
}

// Backoff pauses a poller after a failure, so that a dead proxy does not make a busy loop.
func (p *PollSink) Backoff() { time.Sleep(errorBackoff) }

// Done counts n messages consumed (for Expect).
func (p *PollSink) Done(n int) { p.cnt.add(n) }

// RunPollers is a consume run of a gRPC client: Pollers goroutines calling poll until Duration,
// Expect or ctx ends it; stopped tells poll that the run is over. mode and client go into the
// summary, banner is the first line on stderr.
func RunPollers(ctx context.Context, cfg ConsumeConfig, client, mode, banner string,
	poll func(sink *PollSink, stopped func() bool), stdout, stderr io.Writer) (*Summary, error) {
	lines, summaryOut := stdout, stdout
	if cfg.JSON {
		lines = stderr
	}
	if cfg.Quiet {
		lines = nil
	}
	rec := NewRecorder()
	sink := &PollSink{rec: rec, elog: newErrorLog(stderr, cfg.MaxPrintedErrors),
		cnt: &consumeCounter{rec: rec, expect: cfg.Expect, done: make(chan struct{})}}
	fmt.Fprintln(stderr, banner)
	rep := newReporter(rec, lines, "e2e", cfg.Interval, cfg.Warmup, true)
	finished, repDone := make(chan struct{}), make(chan struct{})
	go func() { rep.run(finished); close(repDone) }()
	var (
		stopped atomic.Bool
		wg      sync.WaitGroup
	)
	for range cfg.Pollers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stopped.Load() {
				poll(sink, stopped.Load)
			}
		}()
	}
	waitForEnd(ctx, cfg.Duration, sink.cnt.done)
	stopped.Store(true)
	wg.Wait()
	close(finished)
	<-repDone
	sum := &Summary{Kind: "consume", Mode: mode, Client: client, Topic: cfg.Topic, Latency: "end_to_end"}
	rep.win.summary(sum)
	sum.TopErrors = sink.elog.Top(5)
	printSummary(sum, cfg.JSON, summaryOut, stderr)
	return sum, nil
}
