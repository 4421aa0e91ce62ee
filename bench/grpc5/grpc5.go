// Package grpc5 is the benchmark's gRPC client built on the official 5.x Go client
// (github.com/apache/rocketmq-clients/golang/v5), unmodified but for the connection hook every
// application that turns TLS off uses: what an application of that client costs through a proxy
// (mqproxy). It is a package of its own, linked only into cmd/mqbench5, because the client
// registers the same protobuf names as this repository's stubs (proxy/rmqpb, used by
// bench/grpcnative) and a binary with both panics at start. It must never import rocketraft/proxy
// or its stubs.
package grpc5

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

	"rocketraft/bench"
)

// Name is this client's name in banners and summaries.
const Name = "grpc5"

// Client is this package's produce and consume runs, for bench.UseGRPC.
var Client = bench.GRPCClient{Name: Name, Produce: Produce, Consume: Consume}

// grpcPlaintext makes the 5.x client dial plaintext (it always dials TLS otherwise; the proxy
// serves both on one port) unless GRPCTLS is set.
var grpcPlaintext sync.Once

func setupGRPCClient(c *bench.Common) {
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

// Produce is bench.RunProduce through a proxy: Producers 5.x producers (one gRPC connection
// each) shared by Concurrency goroutines looping on Send (sync), or keeping Concurrency
// SendAsync calls in flight (async). A send is one SendMessage call, with the client's default
// retries; its latency is the call's wall time.
func Produce(ctx context.Context, cfg bench.ProduceConfig, stdout, stderr io.Writer) (*bench.Summary, error) {
	if cfg.Mode == bench.ModeOneway || cfg.Batch > 1 {
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
	msg := func() *rmq.Message {
		m := &rmq.Message{Topic: cfg.Topic, Body: body}
		if cfg.Tag != "" {
			m.SetTag(cfg.Tag)
		}
		return m
	}
	var next atomic.Uint64 // sends go round robin over the producers
	pick := func() rmq.Producer { return producers[next.Add(1)%uint64(len(producers))] }
	banner := fmt.Sprintf("mqbench produce: client=%s endpoint=%s topic=%s mode=%s size=%d concurrency=%d producers=%d",
		Name, cfg.Endpoint, cfg.Topic, cfg.Mode, cfg.Size, cfg.Concurrency, len(producers))
	return bench.RunSends(ctx, cfg, bench.ClientGRPC, banner, bench.Sends{
		Sync: func(ctx context.Context) error {
			_, err := pick().Send(ctx, msg())
			return err
		},
		Async: func(ctx context.Context, done func(error)) {
			pick().SendAsync(ctx, msg(), func(_ context.Context, _ []*rmq.SendReceipt, err error) { done(err) })
		},
	}, stdout, stderr)
}

// Consume is bench.RunConsume through a proxy: Pollers goroutines of one 5.x SimpleConsumer call
// Receive (up to PullBatch messages, 20 s invisible, long-polling) and ack every message they
// get (the acks of a batch concurrently); latency is end to end (receive time minus the born
// timestamp). A new group starts at the queues' end (the proxy's POP), so --from first is not
// available.
func Consume(ctx context.Context, cfg bench.ConsumeConfig, stdout, stderr io.Writer) (*bench.Summary, error) {
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
	banner := fmt.Sprintf("mqbench consume: client=%s endpoint=%s topic=%s group=%s batch=%d pollers=%d",
		Name, cfg.Endpoint, cfg.Topic, cfg.Group, cfg.PullBatch, cfg.Pollers)
	poll := func(sink *bench.PollSink, stopped func() bool) {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		mvs, err := c.Receive(rctx, int32(min(cfg.PullBatch, 32)), 20*time.Second)
		cancel()
		if err != nil && len(mvs) == 0 {
			if !strings.Contains(err.Error(), "MESSAGE_NOT_FOUND") && !stopped() {
				sink.Fail(err)
				sink.Backoff()
			}
			return
		}
		nowUs := time.Now().UnixMicro()
		sink.Record(func(st *bench.Stats) {
			for _, mv := range mvs {
				st.Msgs++
				st.Bytes += uint64(len(mv.GetBody()))
				if bt := mv.GetBornTimestamp(); bt != nil {
					st.Latency.Record(nowUs - bt.UnixMicro())
				}
			}
			st.Ops++
		})
		// One AckMessage per message (the client has no batch ack), all of a batch at once:
		// each is a replicated write on the group, so one after another would pace the
		// consumer by the group's commit latency.
		var acks sync.WaitGroup
		for _, mv := range mvs {
			acks.Add(1)
			go func() {
				defer acks.Done()
				actx, acancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer acancel()
				if err := c.Ack(actx, mv); err != nil {
					sink.Fail(fmt.Errorf("ack: %w", err))
				}
			}()
		}
		acks.Wait()
		sink.Done(len(mvs))
	}
	return bench.RunPollers(ctx, cfg, bench.ClientGRPC, "simple", banner, poll, stdout, stderr)
}
