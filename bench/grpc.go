package bench

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The gRPC client (Client = ClientGRPC): RocketMQ 5's protocol through a proxy (mqproxy), with
// the official 5.x Go client (github.com/apache/rocketmq-clients/golang/v5), unmodified but for
// the connection hook every application that turns TLS off uses. This package must never import
// rocketraft/proxy or its generated stubs: they register the same protobuf names as the client
// and the binary would panic at start.

// ClientGRPC drives a proxy's gRPC MessagingService through the official 5.x Go client.
const ClientGRPC = "grpc"

// grpcPlaintext makes the 5.x client dial plaintext (it always dials TLS otherwise; the proxy
// serves both on one port) unless GRPCTLS is set.
var grpcPlaintext sync.Once

func setupGRPCClient(c *Common) {
	if c.GRPCTLS {
		return
	}
	grpcPlaintext.Do(func() {
		dial := rmq.NewRpcClient
		rmq.NewRpcClient = func(target string, opts ...rmq.RpcClientOption) (rmq.RpcClient, error) {
			opts = append(opts, rmq.WithRpcClientConnOption(rmq.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()))))
			return dial(target, opts...)
		}
	})
	// The client logs to a file under $HOME/logs unless told otherwise; errors only.
	if os.Getenv("rocketmq.client.logLevel") == "" {
		_ = os.Setenv("rocketmq.client.logLevel", "error")
	}
}

// runGRPCProduce is RunProduce through a proxy: Producers 5.x producers (one gRPC connection
// each) shared by Concurrency goroutines looping on Send (sync), or keeping Concurrency
// SendAsync calls in flight (async). A send is one SendMessage call, with the client's default
// retries; its latency is the call's wall time.
func runGRPCProduce(ctx context.Context, cfg ProduceConfig, stdout, stderr io.Writer) (*Summary, error) {
	if cfg.Mode == ModeOneway || cfg.Batch > 1 {
		return nil, fmt.Errorf("the gRPC client sends one message per call, sync or async (no oneway, no --batch)")
	}
	setupGRPCClient(&cfg.Common)
	producers := make([]rmq.Producer, 0, cfg.Producers)
	defer func() {
		for _, p := range producers {
			_ = p.GracefulStop()
		}
	}()
	for range cfg.Producers {
		p, err := rmq.NewProducer(&rmq.Config{Endpoint: cfg.Endpoint, Credentials: &credentials.SessionCredentials{}}, rmq.WithTopics(cfg.Topic))
		if err != nil {
			return nil, fmt.Errorf("new 5.x producer: %w", err)
		}
		if err := p.Start(); err != nil {
			return nil, fmt.Errorf("start 5.x producer through %s: %w", cfg.Endpoint, err)
		}
		producers = append(producers, p)
	}
	body := make([]byte, cfg.Size)
	_, _ = crand.Read(body)
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
	fmt.Fprintf(stderr, "mqbench produce: client=grpc endpoint=%s topic=%s mode=%s size=%d concurrency=%d producers=%d\n",
		cfg.Endpoint, cfg.Topic, cfg.Mode, cfg.Size, cfg.Concurrency, len(producers))
	var (
		stopped atomic.Bool
		wg      sync.WaitGroup
		budget  = sendBudget{limit: cfg.Messages}
	)
	finished, repDone := make(chan struct{}), make(chan struct{})
	go func() { rep.run(finished); close(repDone) }()
	msg := func() *rmq.Message {
		m := &rmq.Message{Topic: cfg.Topic, Body: body}
		if cfg.Tag != "" {
			m.SetTag(cfg.Tag)
		}
		return m
	}
	fail := func(err error) {
		rec.RecordError()
		elog.Add(err)
	}
	for g := range cfg.Concurrency {
		p := producers[g%len(producers)]
		wg.Add(1)
		if cfg.Mode == ModeAsync {
			var launch func()
			launch = func() {
				if stopped.Load() || budget.take(1) == 0 {
					wg.Done()
					return
				}
				t0 := time.Now()
				sctx, cancel := context.WithTimeout(context.Background(), cfg.SendTimeout)
				p.SendAsync(sctx, msg(), func(_ context.Context, _ []*rmq.SendReceipt, err error) {
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
				_, err := p.Send(sctx, msg())
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
	sum := &Summary{Kind: "produce", Mode: cfg.Mode, Client: ClientGRPC, Topic: cfg.Topic, Size: cfg.Size, Batch: 1,
		Concurrency: cfg.Concurrency, Latency: "send"}
	rep.win.summary(sum)
	sum.TopErrors = elog.Top(5)
	printSummary(sum, cfg.JSON, summaryOut, stderr)
	return sum, nil
}

// runGRPCConsume is RunConsume through a proxy: Pollers goroutines of one 5.x SimpleConsumer
// call Receive (up to PullBatch messages, 20 s invisible, long-polling) and ack every message
// they get (the acks of a batch concurrently); latency is end to end (receive time minus the born timestamp). A new group starts
// at the queues' end (the proxy's POP), so --from first is not available.
func runGRPCConsume(ctx context.Context, cfg ConsumeConfig, stdout, stderr io.Writer) (*Summary, error) {
	if cfg.From == "first" {
		return nil, fmt.Errorf("--client grpc: a new group starts where the queues end (POP); --from first is not available")
	}
	setupGRPCClient(&cfg.Common)
	c, err := rmq.NewSimpleConsumer(&rmq.Config{Endpoint: cfg.Endpoint, ConsumerGroup: cfg.Group, Credentials: &credentials.SessionCredentials{}},
		rmq.WithAwaitDuration(5*time.Second), rmq.WithSubscriptionExpressions(map[string]*rmq.FilterExpression{
			cfg.Topic: rmq.NewFilterExpression(cfg.Tag)}))
	if err != nil {
		return nil, fmt.Errorf("new 5.x simple consumer: %w", err)
	}
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("start 5.x simple consumer through %s: %w", cfg.Endpoint, err)
	}
	defer func() { _ = c.GracefulStop() }()
	lines, summaryOut := stdout, stdout
	if cfg.JSON {
		lines = stderr
	}
	if cfg.Quiet {
		lines = nil
	}
	rec := NewRecorder()
	elog := newErrorLog(stderr, cfg.MaxPrintedErrors)
	cnt := &consumeCounter{rec: rec, expect: cfg.Expect, done: make(chan struct{})}
	fmt.Fprintf(stderr, "mqbench consume: client=grpc endpoint=%s topic=%s group=%s batch=%d pollers=%d\n",
		cfg.Endpoint, cfg.Topic, cfg.Group, cfg.PullBatch, cfg.Pollers)
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
				rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				mvs, err := c.Receive(rctx, int32(min(cfg.PullBatch, 32)), 20*time.Second)
				cancel()
				if err != nil && len(mvs) == 0 {
					if !strings.Contains(err.Error(), "MESSAGE_NOT_FOUND") && !stopped.Load() {
						rec.RecordError()
						elog.Add(err)
						time.Sleep(errorBackoff)
					}
					continue
				}
				nowUs := time.Now().UnixMicro()
				rec.RecordBatch(func(st *Stats) {
					for _, mv := range mvs {
						st.Msgs++
						st.Bytes += uint64(len(mv.GetBody()))
						if bt := mv.GetBornTimestamp(); bt != nil {
							st.Latency.Record(nowUs - bt.UnixMicro())
						}
					}
					st.Ops++
				})
				// One AckMessage per message (the client has no batch ack), all of a batch at
				// once: each is a replicated write on the group, so one after another would
				// pace the consumer by the group's commit latency.
				var acks sync.WaitGroup
				for _, mv := range mvs {
					acks.Add(1)
					go func() {
						defer acks.Done()
						actx, acancel := context.WithTimeout(context.Background(), 5*time.Second)
						defer acancel()
						if err := c.Ack(actx, mv); err != nil {
							rec.RecordError()
							elog.Add(fmt.Errorf("ack: %w", err))
						}
					}()
				}
				acks.Wait()
				cnt.add(len(mvs))
			}
		}()
	}
	waitForEnd(ctx, cfg.Duration, cnt.done)
	stopped.Store(true)
	wg.Wait()
	close(finished)
	<-repDone
	sum := &Summary{Kind: "consume", Mode: "simple", Client: ClientGRPC, Topic: cfg.Topic, Latency: "end_to_end"}
	rep.win.summary(sum)
	sum.TopErrors = elog.Top(5)
	printSummary(sum, cfg.JSON, summaryOut, stderr)
	return sum, nil
}
