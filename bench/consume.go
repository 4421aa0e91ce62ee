package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// Consumer types of the consume benchmark.
const (
	ConsumerPush = "push"
	ConsumerPull = "pull"
)

// ConsumeConfig configures a consume run.
type ConsumeConfig struct {
	Common
	// Group is the consumer group. With a fresh group, From decides where
	// consumption starts; an existing group resumes from its offsets.
	Group string
	// Type is ConsumerPush (PushConsumer with a callback) or ConsumerPull
	// (PullConsumer with Poll/ACK).
	Type string
	// Expect stops the run once this many messages were received
	// (0: no limit).
	Expect int64
	// From is "first" or "last" (where a new group starts).
	From string
	// Tag is the subscription expression ("*" for all).
	Tag string
	// PullBatch is the number of messages asked for per pull request.
	PullBatch int
	// ConsumeBatch is the most messages handed to one push callback.
	ConsumeBatch int
	// ConsumeGoroutines is the push consumer's callback concurrency
	// (0: client default, 20).
	ConsumeGoroutines int
	// PullThresholdForQueue is the push consumer's per-queue cache limit
	// in messages before it pauses pulling (0: client default, 1024).
	PullThresholdForQueue int
	// MaxSpan is the push consumer's ConsumeConcurrentlyMaxSpan, the
	// offset span of cached messages before it pauses pulling (0: client
	// default, 1000).
	MaxSpan int
	// Pollers is the number of goroutines calling Poll (pull type).
	Pollers int
	// WaitTopic is how long to keep retrying while the topic has no route
	// yet (e.g. no producer has created it).
	WaitTopic time.Duration
	// ReadAddr, when set, is the broker every queue is pulled from instead of the route's
	// master (native client: readaddr.go), e.g. a follower.
	ReadAddr string
}

func (c *ConsumeConfig) validate() error {
	switch c.Type {
	case ConsumerPush, ConsumerPull:
	default:
		return fmt.Errorf("unknown consumer type %q (want push or pull)", c.Type)
	}
	switch c.From {
	case "first", "last":
	default:
		return fmt.Errorf("unknown --from %q (want first or last)", c.From)
	}
	if c.Topic == "" {
		return fmt.Errorf("a topic is required")
	}
	if c.Group == "" {
		c.Group = fmt.Sprintf("mqbench_consumer_%d", time.Now().Unix())
	}
	if c.Tag == "" {
		c.Tag = "*"
	}
	if c.PullBatch < 1 || c.PullBatch > 1024 {
		return fmt.Errorf("pull batch must be in [1, 1024]")
	}
	if c.ConsumeBatch < 1 || c.ConsumeBatch > 1024 {
		return fmt.Errorf("consume batch must be in [1, 1024]")
	}
	if c.Pollers < 1 {
		c.Pollers = 1
	}
	if c.ReadAddr != "" && c.Client != ClientNative {
		return fmt.Errorf("--read-addr needs --client native")
	}
	return c.validateClient()
}

// consumeCounter turns received batches into Recorder samples and signals
// when the expected number of messages has arrived.
type consumeCounter struct {
	rec      *Recorder
	expect   int64
	received atomic.Int64
	done     chan struct{}
	doneOnce sync.Once
}

// observe records one received batch: one op, its messages and body bytes,
// and one end-to-end latency sample per message (receive time minus the
// producer-side born timestamp, which has millisecond resolution).
func (c *consumeCounter) observe(msgs []*primitive.MessageExt) {
	if len(msgs) == 0 {
		return
	}
	nowUs := time.Now().UnixMicro()
	c.rec.RecordBatch(func(st *Stats) {
		var bytes int
		for _, m := range msgs {
			bytes += len(m.Body)
			st.Latency.Record(nowUs - m.BornTimestamp*1000)
		}
		st.Ops++
		st.Msgs += uint64(len(msgs))
		st.Bytes += uint64(bytes)
	})
	c.add(len(msgs))
}

// add counts n received messages and signals done once the expected number
// has arrived.
func (c *consumeCounter) add(n int) {
	if n == 0 {
		return
	}
	if r := c.received.Add(int64(n)); c.expect > 0 && r >= c.expect {
		c.doneOnce.Do(func() { close(c.done) })
	}
}

// RunConsume runs a consumer benchmark until cfg.Duration has passed,
// cfg.Expect messages were received, or ctx is cancelled. Output goes as
// for RunProduce. With cfg.Client ClientNative the official client is not
// used and cfg.Type is ignored (see the package comment).
func RunConsume(ctx context.Context, cfg ConsumeConfig, stdout, stderr io.Writer) (*Summary, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := SetupClientLog(cfg.ClientLogLevel, cfg.ClientLogFile); err != nil {
		return nil, err
	}
	if cfg.Client == ClientGRPC {
		if grpcClient.Consume == nil {
			return nil, fmt.Errorf("this build of the tool has no gRPC consumer")
		}
		return grpcClient.Consume(ctx, cfg, stdout, stderr)
	}
	ns, err := ResolveNameServers(cfg.NameServers)
	if err != nil {
		return nil, err
	}
	if cfg.Client == ClientNative {
		return runNativeConsume(ctx, cfg, ns, stdout, stderr)
	}

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
	from := consumer.ConsumeFromLastOffset
	if cfg.From == "first" {
		from = consumer.ConsumeFromFirstOffset
	}
	sel := consumer.MessageSelector{Type: consumer.TAG, Expression: cfg.Tag}
	common := func(attempt int) []consumer.Option {
		return []consumer.Option{
			consumer.WithNsResolver(nsResolver(ns)),
			consumer.WithGroupName(cfg.Group),
			consumer.WithInstance(instanceName("c", attempt)),
			consumer.WithConsumerModel(consumer.Clustering),
			consumer.WithConsumeFromWhere(from),
			// The pull consumer has no default batch size (0 asks the
			// broker for nothing): always set it.
			consumer.WithPullBatchSize(int32(cfg.PullBatch)),
		}
	}

	var (
		push    rocketmq.PushConsumer
		pull    rocketmq.PullConsumer
		stopped atomic.Bool
		wg      sync.WaitGroup
	)
	startOne := func(attempt int) error {
		switch cfg.Type {
		case ConsumerPush:
			opts := append(common(attempt), consumer.WithConsumeMessageBatchMaxSize(cfg.ConsumeBatch))
			if cfg.ConsumeGoroutines > 0 {
				opts = append(opts, consumer.WithConsumeGoroutineNums(cfg.ConsumeGoroutines))
			}
			if cfg.PullThresholdForQueue > 0 {
				opts = append(opts, consumer.WithPullThresholdForQueue(int64(cfg.PullThresholdForQueue)))
			}
			if cfg.MaxSpan > 0 {
				opts = append(opts, consumer.WithConsumeConcurrentlyMaxSpan(cfg.MaxSpan))
			}
			c, err := rocketmq.NewPushConsumer(opts...)
			if err != nil {
				return err
			}
			err = c.Subscribe(cfg.Topic, sel, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				cnt.observe(msgs)
				return consumer.ConsumeSuccess, nil
			})
			if err != nil {
				return err
			}
			// Start shuts the consumer down itself when the topic has no
			// route; a new consumer is needed for the next attempt.
			if err := c.Start(); err != nil {
				return err
			}
			push = c
		case ConsumerPull:
			c, err := rocketmq.NewPullConsumer(common(attempt)...)
			if err != nil {
				return err
			}
			if err := c.Subscribe(cfg.Topic, sel); err != nil {
				return err
			}
			if err := c.Start(); err != nil {
				return err
			}
			pull = c
		}
		return nil
	}
	waitUntil := time.Now().Add(cfg.WaitTopic)
	for attempt := 0; ; attempt++ {
		err := startOne(attempt)
		if err == nil {
			break
		}
		if !isRouteNotFound(err) || time.Now().After(waitUntil) {
			return nil, fmt.Errorf("start %s consumer: %w", cfg.Type, err)
		}
		if attempt == 0 {
			fmt.Fprintf(stderr, "topic %s has no route yet, retrying for up to %s: %v\n", cfg.Topic, cfg.WaitTopic, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	defer func() {
		if push != nil {
			// Stop pulling first: the client's shutdown closes its
			// per-queue channels while a pull that is just finishing may
			// still send to them.
			push.Suspend()
			time.Sleep(100 * time.Millisecond)
			shutdownAll([]rocketmq.PushConsumer{push}, stderr)
		}
		if pull != nil {
			shutdownAll([]rocketmq.PullConsumer{pull}, stderr)
		}
	}()

	fmt.Fprintf(stderr, "mqbench consume: topic=%s group=%s type=%s from=%s pull-batch=%d namesrv=%v\n",
		cfg.Topic, cfg.Group, cfg.Type, cfg.From, cfg.PullBatch, ns)
	rep := newReporter(rec, lines, "e2e", cfg.Interval, cfg.Warmup, true)
	finished := make(chan struct{})
	repDone := make(chan struct{})
	go func() { rep.run(finished); close(repDone) }()

	if pull != nil {
		for i := 0; i < cfg.Pollers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stopped.Load() {
					cr, err := pull.Poll(context.Background(), 200*time.Millisecond)
					if err != nil {
						if !consumer.IsNoNewMsgError(err) {
							rec.RecordError()
							elog.Add(err)
							time.Sleep(errorBackoff)
						}
						continue
					}
					cnt.observe(cr.GetMsgList())
					// ACK commits the offset (in memory, persisted
					// periodically and at shutdown).
					pull.ACK(context.Background(), cr, consumer.ConsumeSuccess)
				}
			}()
		}
	}

	waitForEnd(ctx, cfg.Duration, cnt.done)
	stopped.Store(true)
	wg.Wait()
	close(finished)
	<-repDone

	sum := &Summary{Kind: "consume", Mode: cfg.Type, Topic: cfg.Topic, Latency: "end_to_end"}
	rep.win.summary(sum)
	sum.TopErrors = elog.Top(5)
	printSummary(sum, cfg.JSON, summaryOut, stderr)
	return sum, nil
}

// isRouteNotFound tells whether a consumer failed to start only because the
// topic has no route (yet).
func isRouteNotFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), "route info not found")
}
